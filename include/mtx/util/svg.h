// Self-contained SVG figures for a person to open: line charts (several labelled series) and grids of
// labelled heatmaps. Text is XML-escaped; numbers are written with fixed precision. No torch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mtx::svg {

struct Series {
  std::string label;         // shown in the legend ("" = no legend entry)
  std::vector<double> x, y;  // same length; non-finite points are skipped
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  bool y_from_zero = false;  // start the y axis at 0 (else at the data's minimum, less a margin)
  bool markers = false;      // a dot at every point (when a series has fewer than 60)
  bool x_from_zero = false;  // start the x axis at 0 (else at the data's minimum)
};

// A drawn figure: its size and its elements (without the enclosing <svg>), so that figures can be stacked.
struct Figure {
  double width = 0, height = 0;
  std::string body;
};
std::string to_svg(const Figure& figure);          // a standalone document
Figure stack(const std::vector<Figure>& figures);  // one above the other

Figure line_chart(const LineChart& chart);
inline std::string line_chart_svg(const LineChart& chart) { return to_svg(line_chart(chart)); }

// values: rows x cols, row-major. Cells are shaded from `lo` (white) to `hi` (dark); labels (when given, one
// per row / column) are written beside the cells, column labels turned 90 degrees.
struct Heatmap {
  std::string title;
  int64_t rows = 0, cols = 0;
  std::vector<double> values;
  std::vector<std::string> row_labels, col_labels;
  double lo = 0, hi = 1;
  bool diverging = false;  // blue (lo) - white (0) - red (hi), for signed values such as encodings
};

// Maps side by side, `columns` per row, under one title.
Figure heatmap_grid(const std::vector<Heatmap>& maps, int columns, const std::string& title);
inline std::string heatmap_grid_svg(const std::vector<Heatmap>& maps, int columns, const std::string& title) {
  return to_svg(heatmap_grid(maps, columns, title));
}

std::string xml_escape(const std::string& text);

}  // namespace mtx::svg
