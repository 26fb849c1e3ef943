#include "mtx/plot/figures.h"

#include <torch/torch.h>

#include <fmt/format.h>

#include "mtx/model/layers.h"
#include "mtx/model/masks.h"
#include "mtx/plot/svg.h"
#include "mtx/train/schedule.h"
#include "mtx/util/errors.h"

namespace mtx::plot {

std::string positions_svg(int64_t max_len, int64_t d_model, const std::vector<int64_t>& dims) {
  if (max_len < 1 || d_model < 2 || d_model % 2) {
    throw ConfigError(fmt::format("plot positions: need --len >= 1 and an even --d-model >= 2, got {} and {}",
                                  max_len, d_model));
  }
  for (const int64_t d : dims) {
    if (d < 0 || d >= d_model) throw ConfigError(fmt::format("plot positions: dimension {} is not in [0, {})", d, d_model));
  }
  model::PositionalEncoding pe(max_len, d_model, /*learned=*/false);
  const torch::Tensor table = pe->table.to(torch::kDouble).contiguous();  // [max_len, d_model]
  const double* t = table.data_ptr<double>();
  LineChart chart;
  chart.title = fmt::format("Sinusoidal positional encoding (d_model {})", d_model);
  chart.x_label = "position";
  chart.y_label = "encoding value";
  for (const int64_t d : dims) {
    Series s;
    s.label = fmt::format("dim {}", d);
    for (int64_t p = 0; p < max_len; ++p) {
      s.x.push_back(double(p));
      s.y.push_back(t[p * d_model + d]);
    }
    chart.series.push_back(std::move(s));
  }
  Heatmap map;
  map.title = "all dimensions (columns) by position (rows)";
  map.rows = max_len;
  map.cols = d_model;
  map.values.assign(t, t + max_len * d_model);
  map.lo = -1;
  map.hi = 1;
  map.diverging = true;
  return to_svg(stack({line_chart(chart), heatmap_grid({map}, 1, "")}));  // the chart above the map
}

std::string mask_svg(int64_t len) {
  if (len < 1 || len > 512) throw ConfigError(fmt::format("plot mask: --len must be in [1, 512], got {}", len));
  const torch::Tensor mask = model::causal_mask(len, torch::TensorOptions()).view({len, len}).to(torch::kDouble).contiguous();
  Heatmap map;
  map.title = "dark: may attend";
  map.rows = map.cols = len;
  map.values.assign(mask.data_ptr<double>(), mask.data_ptr<double>() + len * len);
  for (int64_t i = 0; i < len; ++i) {
    map.row_labels.push_back(fmt::format("{}", i));
    map.col_labels.push_back(fmt::format("{}", i));
  }
  return heatmap_grid_svg({map}, 1, fmt::format("Subsequent mask ({0} x {0}): query position (rows) by key position", len));
}

std::vector<ScheduleCurve> annotated_transformer_schedules() {
  std::vector<ScheduleCurve> curves;
  for (const auto& [d_model, warmup] : {std::pair{512, 4000}, std::pair{512, 8000}, std::pair{256, 4000}}) {
    ScheduleCurve c;
    c.label = fmt::format("noam d_model {} warm-up {}", d_model, warmup);
    c.train.schedule = config::Schedule::noam;
    c.train.lr_factor = 1.0;
    c.train.warmup_steps = warmup;
    c.d_model = d_model;
    curves.push_back(c);
  }
  return curves;
}

std::string schedule_svg(const std::vector<ScheduleCurve>& curves, int64_t steps) {
  if (steps < 1) throw ConfigError(fmt::format("plot schedule: --steps must be positive, got {}", steps));
  LineChart chart;
  chart.title = "Learning rate schedules";
  chart.x_label = "update";
  chart.y_label = "learning rate";
  chart.y_from_zero = true;
  const int64_t stride = std::max<int64_t>(1, steps / 1000);  // at most ~1000 points a curve
  for (const auto& c : curves) {
    const train::LrSchedule schedule(c.train, c.d_model);
    Series s;
    s.label = c.label;
    for (int64_t step = 1; step <= steps; step += stride) {
      s.x.push_back(double(step));
      s.y.push_back(schedule.lr(step));
    }
    chart.series.push_back(std::move(s));
  }
  return line_chart_svg(chart);
}

}  // namespace mtx::plot
