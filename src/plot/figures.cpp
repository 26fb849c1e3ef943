#include "mtx/plot/figures.h"

#include <torch/torch.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "mtx/model/layers.h"
#include "mtx/model/masks.h"
#include "mtx/train/schedule.h"
#include "mtx/util/errors.h"
#include "mtx/util/strings.h"
#include "mtx/util/svg.h"

namespace mtx::plot {

std::string positions_svg(int64_t max_len, int64_t d_model, const std::vector<int64_t>& dims) {
  if (max_len < 1 || d_model < 2 || d_model % 2) {
    throw ConfigError(
        fmt::format("plot positions: need --len >= 1 and an even --d-model >= 2, got {} and {}", max_len, d_model));
  }
  for (const int64_t d : dims) {
    if (d < 0 || d >= d_model)
      throw ConfigError(fmt::format("plot positions: dimension {} is not in [0, {})", d, d_model));
  }
  model::PositionalEncoding pe(max_len, d_model, config::Positions::sinusoidal);
  const torch::Tensor table = pe->table.to(torch::kDouble).contiguous();  // [max_len, d_model]
  const double* t = table.data_ptr<double>();
  svg::LineChart chart;
  chart.title = fmt::format("Sinusoidal positional encoding (d_model {})", d_model);
  chart.x_label = "position";
  chart.y_label = "encoding value";
  for (const int64_t d : dims) {
    svg::Series s;
    s.label = fmt::format("dim {}", d);
    for (int64_t p = 0; p < max_len; ++p) {
      s.x.push_back(double(p));
      s.y.push_back(t[p * d_model + d]);
    }
    chart.series.push_back(std::move(s));
  }
  svg::Heatmap map;
  map.title = "all dimensions (columns) by position (rows)";
  map.rows = max_len;
  map.cols = d_model;
  map.values.assign(t, t + max_len * d_model);
  map.lo = -1;
  map.hi = 1;
  map.diverging = true;
  return svg::to_svg(svg::stack({svg::line_chart(chart), svg::heatmap_grid({map}, 1, "")}));  // the chart above the map
}

std::string mask_svg(int64_t len) {
  if (len < 1 || len > 512) throw ConfigError(fmt::format("plot mask: --len must be in [1, 512], got {}", len));
  const torch::Tensor mask =
      model::causal_mask(len, torch::TensorOptions()).view({len, len}).to(torch::kDouble).contiguous();
  svg::Heatmap map;
  map.title = "dark: may attend";
  map.rows = map.cols = len;
  map.values.assign(mask.data_ptr<double>(), mask.data_ptr<double>() + len * len);
  for (int64_t i = 0; i < len; ++i) {
    map.row_labels.push_back(fmt::format("{}", i));
    map.col_labels.push_back(fmt::format("{}", i));
  }
  return svg::heatmap_grid_svg({map}, 1,
                               fmt::format("Subsequent mask ({0} x {0}): query position (rows) by key position", len));
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
  svg::LineChart chart;
  chart.title = "Learning rate schedules";
  chart.x_label = "update";
  chart.y_label = "learning rate";
  chart.y_from_zero = true;
  const int64_t stride = std::max<int64_t>(1, steps / 1000);  // at most ~1000 points a curve
  for (const auto& c : curves) {
    const train::LrSchedule schedule(c.train, c.d_model);
    svg::Series s;
    s.label = c.label;
    for (int64_t step = 1; step <= steps; step += stride) {
      s.x.push_back(double(step));
      s.y.push_back(schedule.lr(step));
    }
    chart.series.push_back(std::move(s));
  }
  return svg::line_chart_svg(chart);
}

svg::Series tsv_series(const std::string& path, const std::string& x_column, const std::string& y_column,
                       const std::string& label) {
  std::ifstream in(path);
  if (!in) throw DataError(fmt::format("plot lines: cannot read '{}'", path));
  std::string line;
  if (!std::getline(in, line))
    throw DataError(fmt::format("plot lines: '{}' is empty (a header row was expected)", path));
  const std::vector<std::string> header = split(line, '\t');
  auto column = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) {
      std::string have;
      for (const auto& h : header) have += (have.empty() ? "" : ", ") + h;
      throw DataError(fmt::format("plot lines: '{}' has no column '{}' (its columns: {})", path, name, have));
    }
    return size_t(it - header.begin());
  };
  const size_t xi = column(x_column), yi = column(y_column);
  svg::Series s;
  s.label = label;
  for (int64_t number = 2; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const std::vector<std::string> cells = split(line, '\t');
    auto value = [&](size_t i) {
      char* end = nullptr;
      const double v = i < cells.size() ? std::strtod(cells[i].c_str(), &end) : 0;
      if (i >= cells.size() || end == cells[i].c_str() || *end != '\0') {
        throw DataError(fmt::format("plot lines: {}:{}: column '{}' is not a number", path, number, header[i]));
      }
      return v;
    };
    s.x.push_back(value(xi));
    s.y.push_back(value(yi));
  }
  return s;
}

svg::Series point_series(const std::string& label, double x, double y) {
  svg::Series s;
  s.label = label;
  s.x = {x};
  s.y = {y};
  return s;
}

}  // namespace mtx::plot

namespace mtx::plot {
namespace {

// One kind of attention: a heatmap per layer (rows of the grid) and head (columns), weights [h, q, k] each.
std::string attention_grid(const std::vector<torch::Tensor>& layers, const std::vector<std::string>& queries,
                           const std::vector<std::string>& keys, const std::string& title) {
  std::vector<svg::Heatmap> maps;
  int64_t heads = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    const torch::Tensor w = layers[l].to(torch::kCPU, torch::kDouble).contiguous();  // [h, q, k]
    heads = w.size(0);
    for (int64_t h = 0; h < heads; ++h) {
      svg::Heatmap map;
      map.title = fmt::format("layer {} head {}", l + 1, h + 1);
      map.rows = w.size(1);
      map.cols = w.size(2);
      const double* p = w[h].data_ptr<double>();
      map.values.assign(p, p + map.rows * map.cols);
      map.row_labels = queries;
      map.col_labels = keys;
      map.lo = 0;
      map.hi = 1;
      maps.push_back(std::move(map));
    }
  }
  return svg::heatmap_grid_svg(maps, int(std::max<int64_t>(heads, 1)), title);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> attention_svgs(model::Transformer& model,
                                                                const tokenizer::Tokenizer& tok,
                                                                const std::vector<int32_t>& src_ids,
                                                                const std::vector<int32_t>& tgt_ids) {
  const tokenizer::SpecialIds ids = tok.special_ids();
  const auto device = model->parameters().front().device();
  auto tensor = [&](const std::vector<int32_t>& v) {
    return torch::tensor(std::vector<int64_t>(v.begin(), v.end()), torch::kLong).unsqueeze(0).to(device);  // [1, n]
  };
  auto pieces = [](const tokenizer::Model& m, const std::vector<int32_t>& v) {
    std::vector<std::string> out;
    for (const int32_t id : v) out.push_back(m.piece(id));
    return out;
  };
  const int64_t max_len = model->options.max_len();
  if (model->options.decoder_only()) {
    if (tgt_ids.empty()) throw ConfigError("plot attention: the text encodes to no tokens");
    if (int64_t(tgt_ids.size()) > max_len) {
      throw ConfigError(fmt::format("plot attention: {} tokens, the model has {} positions", tgt_ids.size(), max_len));
    }
    const model::AttentionMaps maps = model->attention_maps(torch::Tensor(), tensor(tgt_ids));
    const auto labels = pieces(tok.tgt(), tgt_ids);
    return {{"self.svg", attention_grid(maps.encoder_self, labels, labels,
                                        "Causal self-attention (rows: the position predicting the next token)")}};
  }
  std::vector<int32_t> src = src_ids, tgt_in = {ids.bos};
  src.push_back(ids.eos);
  tgt_in.insert(tgt_in.end(), tgt_ids.begin(), tgt_ids.end());
  if (int64_t(src.size()) > max_len || int64_t(tgt_in.size()) > max_len) {
    throw ConfigError(fmt::format("plot attention: {} source and {} target tokens, the model has {} positions",
                                  src.size(), tgt_in.size(), max_len));
  }
  const model::AttentionMaps maps = model->attention_maps(tensor(src), tensor(tgt_in));
  const auto src_labels = pieces(tok.src(), src), tgt_labels = pieces(tok.tgt(), tgt_in);
  return {{"encoder_self.svg", attention_grid(maps.encoder_self, src_labels, src_labels, "Encoder self-attention")},
          {"decoder_self.svg",
           attention_grid(
               maps.decoder_self, tgt_labels, tgt_labels,
               "Decoder self-attention (each row: a position, labelled by its input piece, predicting the next)")},
          {"cross.svg",
           attention_grid(maps.cross, tgt_labels, src_labels,
                          "Encoder-decoder attention (rows: target positions, labelled by their input piece, each "
                          "predicting the next; columns: source)")}};
}

}  // namespace mtx::plot
