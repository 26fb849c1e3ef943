// The Annotated Transformer's pictures as SVG text: sinusoidal positional encodings, the subsequent
// (causal) mask, and learning-rate schedules; each computed by the very code mtx trains with.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mtx/config/config.h"

namespace mtx::plot {

// The encodings of positions 0..max_len-1: a heatmap over all d_model dimensions, and a line chart of the
// chosen dimensions against position (the Annotated Transformer's figure: dims 4..7 of d_model 20).
std::string positions_svg(int64_t max_len, int64_t d_model, const std::vector<int64_t>& dims);
// The mask a decoder position attends through: position i (row) may see j (column) iff j <= i.
std::string mask_svg(int64_t len);
// One learning-rate curve: its legend label, the train settings that define it, and the model width (Noam).
struct ScheduleCurve {
  std::string label;
  config::TrainConfig train;
  int64_t d_model = 512;
};
// The Annotated Transformer's three Noam curves: d_model 512 / warm-up 4000, 512 / 8000, 256 / 4000.
std::vector<ScheduleCurve> annotated_transformer_schedules();
// Learning rate against update for each curve over `steps` updates.
std::string schedule_svg(const std::vector<ScheduleCurve>& curves, int64_t steps);

}  // namespace mtx::plot
