// The Annotated Transformer's pictures as SVG text: sinusoidal positional encodings, the subsequent
// (causal) mask, learning-rate schedules and a model's attention maps; each computed by the very code
// mtx trains and translates with.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mtx/config/config.h"
#include "mtx/model/transformer.h"
#include "mtx/tokenizer/tokenizer.h"
#include "mtx/util/svg.h"

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

// A series read from a table: tab-separated columns with a header row naming them (as scripts/bench/budget.sh
// writes curve.tsv); `x_column` and `y_column` are header names. Throws DataError naming the file, the missing
// column (and the ones there are) or the line that does not parse.
svg::Series tsv_series(const std::string& path, const std::string& x_column, const std::string& y_column,
                       const std::string& label);
// A labelled single point (a reference figure drawn with the curves, e.g. another system's score).
svg::Series point_series(const std::string& label, double x, double y);

// The attention maps of one sentence pair (translation: source ids, target ids, both without specials; the
// source gets </s>, the target <s> in front) or of one text (a language model: tgt_ids only), every layer a
// row and every head a column, with the pieces on the axes. Returns (file name, SVG): encoder_self.svg,
// decoder_self.svg and cross.svg, or self.svg for a language model.
std::vector<std::pair<std::string, std::string>> attention_svgs(model::Transformer& model,
                                                                const tokenizer::Tokenizer& tokenizer,
                                                                const std::vector<int32_t>& src_ids,
                                                                const std::vector<int32_t>& tgt_ids);

}  // namespace mtx::plot
