// mtx plot positions|mask|schedule: the Annotated Transformer's pictures as SVG files (plot/figures.h).
#include <memory>

#include "commands.h"
#include "mtx/plot/figures.h"
#include "mtx/util/atomic_file.h"
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
};

void write(const std::string& path, const std::string& svg) {
  write_file_atomic(path, svg);
  log::info("wrote {}", path);
}

}  // namespace

Command add_plot(CLI::App& app) {
  auto a = std::make_shared<PlotArgs>();
  auto* cmd = app.add_subcommand("plot", "Draw the Annotated Transformer's pictures as SVG: positions, mask, schedule");
  cmd->require_subcommand(1);
  auto* positions = cmd->add_subcommand("positions", "Sinusoidal positional encodings (chart of some dims + heatmap)");
  positions->add_option("--len", a->len, "Positions")->capture_default_str();
  positions->add_option("--d-model", a->d_model, "Encoding width (even)")->capture_default_str();
  positions->add_option("--dims", a->dims, "Dimensions to chart")->delimiter(',');
  positions->add_option("--out", a->out, "SVG file to write (default positions.svg)");
  auto* mask = cmd->add_subcommand("mask", "The subsequent (causal) mask of the decoder");
  mask->add_option("--len", a->mask_len, "Sequence length")->capture_default_str();
  mask->add_option("--out", a->out, "SVG file to write (default mask.svg)");
  auto* schedule = cmd->add_subcommand("schedule", "Learning-rate curves: the tutorial's three Noam settings, "
                                                   "and a config's own with --config");
  schedule->add_option("--steps", a->steps, "Updates")->capture_default_str();
  schedule->add_option("--out", a->out, "SVG file to write (default schedule.svg)");
  add_config_flags(*schedule, a->config, /*required=*/false);
  return {cmd, [a, positions, mask, schedule] {
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
