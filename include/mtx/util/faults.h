// Fault injection for tests and scripts/faults/: named failpoints armed by MTX_FAULTS (or arm()) that
// make a code path behave as if a rare failure happened. Unarmed, a failpoint costs one atomic load.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mtx::fault {

// Arms failpoints from a spec "name[@N][,name[@N]...]": `name@N` fires once, the first time its site
// reports occurrence N (an update number, a validation's update...); `name` alone fires every time.
// An empty spec disarms all. The environment variable MTX_FAULTS is read once, on first use.
// Failpoints in mtx:
//   nonfinite_grad@U   the gradients of update U hold an Inf (as from an overflow in backward)
//   nan_val_loss@U     the validation after update U gives a NaN loss
//   crash_in_write@K   the K-th write_file_atomic of the process exits it (code 137) after writing its
//                      temp file, before the rename (a power cut in the middle of a checkpoint)
void arm(const std::string& spec);

// Whether failpoint `name` fires at occurrence `at`.
bool fires(std::string_view name, int64_t at = 0);

}  // namespace mtx::fault
