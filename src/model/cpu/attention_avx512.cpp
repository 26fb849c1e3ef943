// attention_kernels.h's loops compiled for the avx512 level (flags in CMakeLists.txt; x86-64 only).
#include "attention_kernels.h"

#if defined(__x86_64__)
#include "attention_loops.h"

namespace mtx::model::kernels {

AttentionLoops attention_loops_avx512() { return kLoops; }

}  // namespace mtx::model::kernels

#endif
