#include "mtx/train/curve.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "mtx/util/atomic_file.h"

namespace mtx::train {

void write_curve_svg(const std::filesystem::path& path, const std::vector<CurvePoint>& train,
                     const std::vector<CurvePoint>& valid, const std::string& title) {
  const double W = 720, H = 420, left = 60, right = 20, top = 40, bottom = 50;
  double x_max = 1, y_min = 1e300, y_max = -1e300;
  for (const auto* series : {&train, &valid}) {
    for (const auto& p : *series) {
      if (!std::isfinite(p.value)) continue;
      x_max = std::max(x_max, p.step);
      y_min = std::min(y_min, p.value);
      y_max = std::max(y_max, p.value);
    }
  }
  if (y_min > y_max) { y_min = 0; y_max = 1; }
  if (y_max - y_min < 1e-9) { y_max += 0.5; y_min -= 0.5; }
  y_min = std::max(0.0, y_min - 0.05 * (y_max - y_min));
  auto X = [&](double s) { return left + (W - left - right) * s / x_max; };
  auto Y = [&](double v) { return top + (H - top - bottom) * (1 - (v - y_min) / (y_max - y_min)); };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"22\" font-size=\"15\">{}</text>\n",
      W, H, left, title);
  for (int i = 0; i <= 5; ++i) {  // grid and labels
    const double v = y_min + (y_max - y_min) * i / 5.0, y = Y(v);
    svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", left, y, W - right, y);
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.2f}</text>\n", left - 6, y + 4, v);
    const double s = x_max * i / 5.0;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:.0f}</text>\n", X(s), H - bottom + 18, s);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">updates</text>\n", (W + left) / 2, H - 12);
  svg += fmt::format("<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">loss (nll per token)</text>\n",
                     (H) / 2, H / 2);
  auto polyline = [&](const std::vector<CurvePoint>& s, const char* color, const char* label, int row) {
    if (s.empty()) return;
    std::string pts;
    for (const auto& p : s) {
      if (std::isfinite(p.value)) pts += fmt::format("{:.1f},{:.1f} ", X(p.step), Y(p.value));
    }
    svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", color, pts);
    for (const auto& p : s) {
      if (s.size() < 60 && std::isfinite(p.value)) {
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>\n", X(p.step), Y(p.value), color);
      }
    }
    svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"3\"/>", W - 170,
                       top + 8 + 18 * row, W - 150, top + 8 + 18 * row, color);
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", W - 144, top + 12 + 18 * row, label);
  };
  polyline(train, "#1f77b4", "train", 0);
  polyline(valid, "#d62728", "validation", 1);
  svg += "</svg>\n";
  write_file_atomic(path, svg);
}

}  // namespace mtx::train
