// attention_kernels.h's loops compiled for the avx2 level (flags in CMakeLists.txt; x86-64 only).
#include "attention_kernels.h"

#if defined(__x86_64__)
#include "attention_loops.h"

namespace mtx::model::kernels {

AttentionLoops attention_loops_avx2() { return kLoops; }

}  // namespace mtx::model::kernels

#endif
