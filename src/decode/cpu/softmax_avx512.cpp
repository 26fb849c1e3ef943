// softmax_kernels.h's loops compiled for the avx512 level (flags in CMakeLists.txt; x86-64 only).
#include "softmax_kernels.h"

#if defined(__x86_64__)
#include "softmax_loops.h"

namespace mtx::decode::kernels {

RowLoops row_loops_avx512() { return kLoops; }

}  // namespace mtx::decode::kernels

#endif
