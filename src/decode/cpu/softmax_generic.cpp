// softmax_kernels.h's loops compiled for the generic level (no instruction-set flags).
#include "softmax_kernels.h"

#include "softmax_loops.h"

namespace mtx::decode::kernels {

RowLoops row_loops_generic() { return kLoops; }

}  // namespace mtx::decode::kernels
