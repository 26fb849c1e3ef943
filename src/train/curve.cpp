#include "mtx/train/curve.h"

#include "mtx/util/atomic_file.h"
#include "mtx/util/svg.h"

namespace mtx::train {

void write_curve_svg(const std::filesystem::path& path, const std::vector<CurvePoint>& train,
                     const std::vector<CurvePoint>& valid, const std::string& title) {
  svg::LineChart chart;
  chart.title = title;
  chart.x_label = "updates";
  chart.y_label = "loss (nll per token)";
  chart.markers = true;
  for (const auto& [points, label] : {std::pair{&train, "train"}, std::pair{&valid, "validation"}}) {
    svg::Series s;
    s.label = label;
    for (const auto& p : *points) {
      s.x.push_back(p.step);
      s.y.push_back(p.value);
    }
    chart.series.push_back(std::move(s));
  }
  write_file_atomic(path, svg::line_chart_svg(chart));
}

}  // namespace mtx::train
