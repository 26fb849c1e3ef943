// mtx plot positions|mask|schedule|attention|lines: the Annotated Transformer's pictures as SVG files (plot/figures.h).
#include <filesystem>
#include <memory>

#include "commands.h"
#include "mtx/bundle/bundle.h"
#include "mtx/decode/translator.h"
#include "mtx/plot/figures.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"

namespace mtx::cli {

namespace {

struct PlotArgs {
  std::string out;
  int64_t len = 100;      // positions
  int64_t mask_len = 20;  // mask (the Annotated Transformer's figure)
  int64_t d_model = 20;
  std::vector<int64_t> dims = {4, 5, 6, 7};
  int64_t steps = 20000;
  ConfigArgs config;  // schedule: the curve of a config's train section (besides the tutorial's three)
  // attention
  std::string ckpt, src, tgt;
  // lines
  std::vector<std::string> series, points;  // LABEL=FILE, LABEL=X,Y
  std::string x_column = "minutes", y_column = "bleu", title, x_label, y_label;
};

void write(const std::string& path, const std::string& svg) {
  write_file_atomic(path, svg);
  log::info("wrote {}", path);
}

// The checkpoint's attention maps for one sentence: its own translation (the configured beam) unless --tgt
// gives the target; a language model's for --src as its text.
void plot_attention(const PlotArgs& a) {
  if (a.src.empty()) throw ConfigError("plot attention: --src must be a non-empty sentence");
  const std::filesystem::path dir = a.out.empty() ? "attention" : a.out;
  bundle::Bundle ckpt = bundle::load_bundle(a.ckpt, torch::kCPU);
  const tokenizer::Tokenizer& tok = *ckpt.tokenizer;
  std::vector<int32_t> src = tok.src().encode(a.src), tgt;
  if (ckpt.model->options.decoder_only()) {
    if (!a.tgt.empty()) throw ConfigError("plot attention: a language model reads --src only; drop --tgt");
    tgt = std::move(src);
    src.clear();
  } else if (!a.tgt.empty()) {
    tgt = tok.tgt().encode(a.tgt);
  } else {
    decode::TranslateOptions o = decode::options_from_config(ckpt.config.decode);
    o.search.nbest = 1;
    decode::Translator translator(ckpt.model, tok, o);
    const auto hyps = translator.translate_ids({src});
    if (!hyps.front().empty()) tgt = hyps.front().front().tokens;
    log::info("translation (beam {}): {}", o.search.beam, tok.tgt().decode(tgt));
  }
  std::filesystem::create_directories(dir);
  for (const auto& [name, svg] : plot::attention_svgs(ckpt.model, tok, src, tgt)) write((dir / name).string(), svg);
}

// "LABEL=REST" split at the last '=' (a label such as "lr=3e-3" may hold one; a path or a number seldom does).
std::pair<std::string, std::string> label_and(const std::string& arg, const char* option) {
  const size_t eq = arg.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size()) {
    throw ConfigError(fmt::format("plot lines: {} '{}' is not LABEL=VALUE", option, arg));
  }
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

// Curves from tables (and reference points) in one chart: e.g. BLEU against minutes of several recipes.
void plot_lines(const PlotArgs& a) {
  if (a.series.empty()) throw ConfigError("plot lines: give at least one --series LABEL=FILE");
  svg::LineChart chart;
  chart.title = a.title;
  chart.x_label = a.x_label.empty() ? a.x_column : a.x_label;
  chart.y_label = a.y_label.empty() ? a.y_column : a.y_label;
  chart.y_from_zero = true;
  chart.markers = true;
  chart.x_from_zero = true;
  for (const auto& s : a.series) {
    const auto [label, file] = label_and(s, "--series");
    chart.series.push_back(plot::tsv_series(file, a.x_column, a.y_column, label));
  }
  for (const auto& p : a.points) {
    const auto [label, xy] = label_and(p, "--point");
    const size_t comma = xy.find(',');
    char* end1 = nullptr;
    char* end2 = nullptr;
    const std::string xs = xy.substr(0, comma), ys = comma == std::string::npos ? "" : xy.substr(comma + 1);
    const double x = std::strtod(xs.c_str(), &end1), y = std::strtod(ys.c_str(), &end2);
    if (comma == std::string::npos || end1 == xs.c_str() || *end1 || end2 == ys.c_str() || *end2) {
      throw ConfigError(fmt::format("plot lines: --point '{}' is not LABEL=X,Y", p));
    }
    chart.series.push_back(plot::point_series(label, x, y));
  }
  write(a.out.empty() ? "lines.svg" : a.out, svg::line_chart_svg(chart));
}

}  // namespace

Command add_plot(CLI::App& app) {
  auto a = std::make_shared<PlotArgs>();
  auto* cmd = app.add_subcommand(
      "plot", "Draw the Annotated Transformer's pictures as SVG: positions, mask, schedule, attention");
  cmd->require_subcommand(1);
  auto* positions = cmd->add_subcommand("positions", "Sinusoidal positional encodings (chart of some dims + heatmap)");
  positions->add_option("--len", a->len, "Positions")->capture_default_str();
  positions->add_option("--d-model", a->d_model, "Encoding width (even)")->capture_default_str();
  positions->add_option("--dims", a->dims, "Dimensions to chart")->delimiter(',');
  positions->add_option("--out", a->out, "SVG file to write (default positions.svg)");
  auto* mask = cmd->add_subcommand("mask", "The subsequent (causal) mask of the decoder");
  mask->add_option("--len", a->mask_len, "Sequence length")->capture_default_str();
  mask->add_option("--out", a->out, "SVG file to write (default mask.svg)");
  auto* schedule = cmd->add_subcommand("schedule",
                                       "Learning-rate curves: the tutorial's three Noam settings, "
                                       "and a config's own with --config");
  schedule->add_option("--steps", a->steps, "Updates")->capture_default_str();
  schedule->add_option("--out", a->out, "SVG file to write (default schedule.svg)");
  add_config_flags(*schedule, a->config, /*required=*/false);
  auto* attention = cmd->add_subcommand("attention",
                                        "Attention maps of a checkpoint for one sentence: every layer "
                                        "and head, encoder self / decoder self / cross (or a language "
                                        "model's causal self-attention), pieces on the axes");
  attention->add_option("--ckpt", a->ckpt, "Checkpoint")->required();
  attention->add_option("--src", a->src, "Source sentence (a language model: its text)")->required();
  attention->add_option("--tgt", a->tgt, "Target sentence (default: the checkpoint's own translation)");
  attention->add_option("--out", a->out, "Directory for the SVG files (default attention/)");
  auto* lines = cmd->add_subcommand("lines",
                                    "Curves from tab-separated tables with a header row (e.g. the "
                                    "curve.tsv of scripts/bench/budget.sh: BLEU against minutes)");
  lines->add_option("--series", a->series, "LABEL=FILE: one curve from FILE's --x and --y columns (repeat)")
      ->required();
  lines->add_option("--point", a->points, "LABEL=X,Y: a single labelled point (repeat)");
  lines->add_option("--x", a->x_column, "Column for the x axis")->capture_default_str();
  lines->add_option("--y", a->y_column, "Column for the y axis")->capture_default_str();
  lines->add_option("--title", a->title, "Chart title");
  lines->add_option("--x-label", a->x_label, "x axis label (default: the column's name)");
  lines->add_option("--y-label", a->y_label, "y axis label (default: the column's name)");
  lines->add_option("--out", a->out, "SVG file to write (default lines.svg)");
  return {cmd, [a, positions, mask, schedule, attention, lines] {
            if (lines->parsed()) {
              plot_lines(*a);
              return 0;
            }
            if (attention->parsed()) {
              plot_attention(*a);
              return 0;
            }
            if (positions->parsed()) {
              write(a->out.empty() ? "positions.svg" : a->out, plot::positions_svg(a->len, a->d_model, a->dims));
            } else if (mask->parsed()) {
              write(a->out.empty() ? "mask.svg" : a->out, plot::mask_svg(a->mask_len));
            } else if (schedule->parsed()) {
              auto curves = plot::annotated_transformer_schedules();
              if (!a->config.config.empty()) {
                const config::Config c = config::load(a->config.config, a->config.overrides);
                curves.push_back({a->config.config, c.train, c.model.d_model});
              }
              write(a->out.empty() ? "schedule.svg" : a->out, plot::schedule_svg(curves, a->steps));
            }
            return 0;
          }};
}

}  // namespace mtx::cli
