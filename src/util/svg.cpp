#include "mtx/util/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace mtx::svg {

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters are not allowed in XML 1.0 text: shown as a space.
        out += (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') ? ' ' : c;
    }
  }
  return out;
}

namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

// A number for an axis label: short, and exact enough to tell the ticks apart.
std::string tick(double v, double span) {
  if (span >= 50 || (std::abs(v - std::round(v)) < 1e-9 && span >= 5)) return fmt::format("{:.0f}", v);
  if (span >= 0.5) return fmt::format("{:.2f}", v);
  return fmt::format("{:.2g}", v);
}

std::string cell_color(double v, const Heatmap& m) {
  const double span = m.hi - m.lo;
  if (!std::isfinite(v)) return "#ffff99";
  if (m.diverging) {
    const double top = std::max(std::abs(m.lo), std::abs(m.hi));
    const double t = top > 0 ? std::clamp(v / top, -1.0, 1.0) : 0.0;
    const int fade = int(std::lround(255 * (1 - std::abs(t))));
    return t >= 0 ? fmt::format("#ff{:02x}{:02x}", fade, fade) : fmt::format("#{:02x}{:02x}ff", fade, fade);
  }
  const double t = span > 0 ? std::clamp((v - m.lo) / span, 0.0, 1.0) : 0.0;
  // white -> dark blue
  const int r = int(std::lround(255 - t * (255 - 8))), g = int(std::lround(255 - t * (255 - 48))),
            b = int(std::lround(255 - t * (255 - 107)));
  return fmt::format("#{:02x}{:02x}{:02x}", r, g, b);
}

size_t longest(const std::vector<std::string>& labels) {  // in characters, as shown (at most 24)
  size_t n = 0;
  for (const auto& l : labels) {
    size_t chars = 0;
    for (const char c : l) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    n = std::max(n, chars);
  }
  return std::min<size_t>(n, 24);
}

// At most 24 characters (UTF-8 aware: never cuts inside a character).
std::string shorten(const std::string& s) {
  size_t chars = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && ++chars > 22) break;
  }
  if (i >= s.size()) return s;
  size_t total = chars - 1;
  for (size_t j = i; j < s.size(); ++j) total += (static_cast<unsigned char>(s[j]) & 0xC0) != 0x80;
  return total <= 24 ? s : s.substr(0, i) + "..";
}

}  // namespace

std::string to_svg(const Figure& f) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n{2}</svg>\n",
      f.width, f.height, f.body);
}

Figure stack(const std::vector<Figure>& figures) {
  Figure out;
  for (const Figure& f : figures) {
    out.body += fmt::format("<g transform=\"translate(0 {:.0f})\">\n{}</g>\n", out.height, f.body);
    out.width = std::max(out.width, f.width);
    out.height += f.height;
  }
  return out;
}

Figure line_chart(const LineChart& c) {
  const double W = 760, H = 440, left = 70, right = 180, top = 44, bottom = 54;
  double x_min = 1e300, x_max = -1e300, y_min = 1e300, y_max = -1e300;
  for (const auto& s : c.series) {
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      x_min = std::min(x_min, s.x[i]);
      x_max = std::max(x_max, s.x[i]);
      y_min = std::min(y_min, s.y[i]);
      y_max = std::max(y_max, s.y[i]);
    }
  }
  if (c.x_from_zero && x_min <= x_max) x_min = std::min(0.0, x_min);
  if (x_min > x_max) x_min = 0, x_max = 1;
  if (y_min > y_max) y_min = 0, y_max = 1;
  if (x_max - x_min < 1e-12) x_max = x_min + 1;
  if (y_max - y_min < 1e-12) y_max += 0.5, y_min -= 0.5;
  if (c.y_from_zero)
    y_min = std::min(0.0, y_min);
  else
    y_min -= 0.05 * (y_max - y_min);
  const auto X = [&](double v) { return left + (W - left - right) * (v - x_min) / (x_max - x_min); };
  const auto Y = [&](double v) { return top + (H - top - bottom) * (1 - (v - y_min) / (y_max - y_min)); };

  std::string svg = fmt::format("<text x=\"{}\" y=\"24\" font-size=\"15\">{}</text>\n", left, xml_escape(c.title));
  for (int i = 0; i <= 5; ++i) {  // grid and tick labels
    const double v = y_min + (y_max - y_min) * i / 5.0, y = Y(v);
    svg +=
        fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", left, y, W - right, y);
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 6, y + 4,
                       tick(v, y_max - y_min));
    const double s = x_min + (x_max - x_min) * i / 5.0;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", X(s), H - bottom + 18,
                       tick(s, x_max - x_min));
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (W - right + left) / 2, H - 14,
                     xml_escape(c.x_label));
  svg += fmt::format("<text x=\"18\" y=\"{0}\" transform=\"rotate(-90 18 {0})\" text-anchor=\"middle\">{1}</text>\n",
                     (H - bottom + top) / 2, xml_escape(c.y_label));
  int row = 0;
  for (size_t k = 0; k < c.series.size(); ++k) {
    const auto& s = c.series[k];
    const char* color = kColors[k % std::size(kColors)];
    std::string pts;
    size_t n = 0;
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      pts += fmt::format("{:.1f},{:.1f} ", X(s.x[i]), Y(s.y[i]));
      ++n;
    }
    if (n == 0) continue;
    svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", color, pts);
    if (c.markers && n < 60) {
      for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
        if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
        svg +=
            fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>\n", X(s.x[i]), Y(s.y[i]), color);
      }
    }
    if (!s.label.empty()) {
      const double y = top + 8 + 18 * row++;
      svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"3\"/>\n",
                         W - right + 12, y, W - right + 32, y, color);
      svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", W - right + 38, y + 4, xml_escape(s.label));
    }
  }
  return {W, H, svg};
}

Figure heatmap_grid(const std::vector<Heatmap>& maps, int columns, const std::string& title) {
  columns = std::max(1, columns);
  // One layout for every map of the grid: the largest map's size and labels.
  int64_t rows = 1, cols = 1;
  size_t row_label = 0, col_label = 0;
  for (const auto& m : maps) {
    rows = std::max(rows, m.rows);
    cols = std::max(cols, m.cols);
    row_label = std::max(row_label, longest(m.row_labels));
    col_label = std::max(col_label, longest(m.col_labels));
  }
  const double cell = std::clamp(320.0 / double(std::max(rows, cols)), 2.0, 26.0);
  const double label_w = row_label ? 7.0 * double(row_label) + 8 : 0,
               label_h = col_label ? 7.0 * double(col_label) + 8 : 0;
  const double map_w = label_w + cell * double(cols) + 24, map_h = 22 + label_h + cell * double(rows) + 16;
  const int grid_rows = int((maps.size() + size_t(columns) - 1) / size_t(columns));
  const double W = 20 + map_w * std::min<double>(columns, double(std::max<size_t>(maps.size(), 1))),
               H = 44 + map_h * std::max(grid_rows, 1);
  std::string svg = fmt::format("<text x=\"20\" y=\"26\" font-size=\"15\">{}</text>\n", xml_escape(title));
  const double font = std::clamp(cell * 0.8, 6.0, 11.0);
  for (size_t k = 0; k < maps.size(); ++k) {
    const Heatmap& m = maps[k];
    const double ox = 20 + map_w * double(k % size_t(columns)), oy = 44 + map_h * double(k / size_t(columns));
    const double gx = ox + label_w, gy = oy + 22 + label_h;
    svg += fmt::format("<g>\n<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\">{}</text>\n", ox, oy + 12,
                       xml_escape(m.title));
    for (int64_t r = 0; r < m.rows; ++r) {
      for (int64_t c = 0; c < m.cols; ++c) {
        const double v = size_t(r * m.cols + c) < m.values.size() ? m.values[size_t(r * m.cols + c)] : 0.0;
        svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"/>\n",
                           gx + cell * double(c), gy + cell * double(r), cell + 0.05, cell + 0.05, cell_color(v, m));
      }
    }
    svg += fmt::format(
        "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"none\" "
        "stroke=\"#999\"/>\n",
        gx, gy, cell * double(m.cols), cell * double(m.rows));
    for (size_t r = 0; r < m.row_labels.size() && int64_t(r) < m.rows; ++r) {
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", gx - 4,
                         gy + cell * (double(r) + 0.5) + font / 3, font, xml_escape(shorten(m.row_labels[r])));
    }
    for (size_t c = 0; c < m.col_labels.size() && int64_t(c) < m.cols; ++c) {
      const double x = gx + cell * (double(c) + 0.5) + font / 3, y = gy - 4;
      svg += fmt::format(
          "<text x=\"{0:.1f}\" y=\"{1:.1f}\" font-size=\"{2:.1f}\" transform=\"rotate(-90 {0:.1f} {1:.1f})\">"
          "{3}</text>\n",
          x, y, font, xml_escape(shorten(m.col_labels[c])));
    }
    svg += "</g>\n";
  }
  return {W, H, svg};
}

}  // namespace mtx::svg
