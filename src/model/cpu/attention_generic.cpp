// attention_kernels.h's loops compiled for the generic level (no instruction-set flags).
#include "attention_kernels.h"

#include "attention_loops.h"

namespace mtx::model::kernels {

AttentionLoops attention_loops_generic() { return kLoops; }

}  // namespace mtx::model::kernels
