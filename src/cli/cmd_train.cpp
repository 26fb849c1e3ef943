// mtx train: train from a config into a run directory, or continue one exactly (--resume).
#include <atomic>
#include <csignal>
#include <cstdlib>

#include "commands.h"
#include "mtx/config/config.h"
#include "mtx/train/dist.h"
#include "mtx/train/launch.h"
#include "mtx/train/trainer.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"
#include "mtx/util/strings.h"

namespace fs = std::filesystem;

namespace mtx::cli {

struct TrainArgs {
  ConfigArgs config;
  std::string out;     // run directory (default: runs/<config name>)
  std::string resume;  // run directory to continue
  int nproc = 1;       // local ranks to start (data-parallel training; 1 = this process alone)
};

namespace {

// On resume only the stop criteria and the device may change (a run moves between CPU and GPU machines;
// it continues exactly only on the device it was saved on), the collectives' timeout and bucket size, and
// train.accum_steps as long as it times the number of ranks stays what it was (the trainer checks that).
const std::vector<std::string> kResumable = {"train.max_steps",  "train.max_epochs",     "train.max_minutes",
                                             "train.device",     "train.dist_timeout_s", "train.dist_bucket_mb",
                                             "train.accum_steps"};

// First SIGINT/SIGTERM: finish the update, save, exit 130/143. A second one: leave at once.
void on_signal(int sig) {
  static std::atomic<int> received{0};
  if (received.fetch_add(1) > 0) std::_Exit(128 + sig);
  train::request_stop(sig);
}

int exit_code_for(int sig) { return sig == SIGINT ? kExitInterrupted : sig == SIGTERM ? kExitTerminated : 128 + sig; }

// --nproc N: this command again in N ranks (without --nproc), with the config's collective timeout.
int launch_ranks(const TrainArgs& args) {
  if (train::dist::env_from_environment()) {
    throw ConfigError(
        "--nproc: this process is already a rank (WORLD_SIZE is set); launch with --nproc or torchrun, not both");
  }
  config::Config cfg;
  if (!args.resume.empty()) {
    const fs::path last = fs::path(args.resume) / "last.pt";
    if (!fs::exists(last)) throw DataError("--resume: '" + last.string() + "' not found (not a run directory?)");
    nlohmann::json doc = config::to_json(train::load_checkpoint(last).config);
    for (const auto& o : args.config.overrides) config::apply_override(doc, o);
    cfg = config::from_json(doc);
  } else {
    cfg = config::load(args.config.config, args.config.overrides);  // checked here, before any rank starts
  }
  train::LaunchOptions o;
  o.nproc = args.nproc;
  o.timeout_s = cfg.train.dist_timeout_s;
  const auto& all = program_args();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] == "--nproc") {
      ++i;
      continue;
    }
    if (all[i].rfind("--nproc=", 0) == 0) continue;
    o.argv.push_back(all[i]);
  }
  return train::run_local_ranks(o);
}

int run_train(const TrainArgs& args) {
  if (args.nproc > 1) return launch_ranks(args);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  train::TrainSummary summary;
  if (!args.resume.empty()) {
    const fs::path dir = args.resume;
    const fs::path last = dir / "last.pt";
    if (!fs::exists(last)) throw DataError("--resume: '" + last.string() + "' not found (not a run directory?)");
    train::CheckpointContent ckpt = train::load_checkpoint(last);
    // The run's own config, with --set applied on top; --config, if given, must describe the same run.
    nlohmann::json doc = config::to_json(ckpt.config);
    for (const auto& o : args.config.overrides) config::apply_override(doc, o);
    const config::Config cfg = config::from_json(doc);
    std::vector<std::string> changed;
    auto collect = [&](const config::Config& requested) {
      for (const auto& d : config::differences(ckpt.config, requested)) {
        const std::string key = d.substr(0, d.find(':'));
        if (std::find(kResumable.begin(), kResumable.end(), key) == kResumable.end()) changed.push_back(d);
      }
    };
    collect(cfg);
    if (!args.config.config.empty()) collect(config::load(args.config.config, args.config.overrides));
    if (!changed.empty()) {
      throw ConfigError("--resume " + dir.string() + ": only " + join(kResumable, ", ") +
                        " may change on resume; checkpoint vs requested: " + join(changed, "; "));
    }
    summary = train::run_training(cfg, dir, std::move(ckpt));
  } else {
    const config::Config cfg = config::load(args.config.config, args.config.overrides);
    const fs::path out = args.out.empty() ? fs::path("runs") / fs::path(args.config.config).stem() : fs::path(args.out);
    if (fs::exists(out / "last.pt")) {
      throw ConfigError("--out " + out.string() + " already holds a run (last.pt): continue it with --resume " +
                        out.string() + " or choose another --out");
    }
    summary = train::run_training(cfg, out);
  }
  return summary.signal ? exit_code_for(summary.signal) : 0;
}

}  // namespace

Command add_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("train", "Train a Transformer: checkpoints, metrics and curves in a run directory");
  add_config_flags(*cmd, args->config, false);
  cmd->add_option("--out", args->out, "Run directory (default: runs/<config name>)");
  cmd->add_option("--resume", args->resume,
                  "Continue the run in this directory exactly (only stop criteria may change)");
  cmd->add_option("--nproc", args->nproc,
                  "Train data-parallel in N local processes (c10d; as torchrun --standalone --nproc-per-node N)")
      ->check(CLI::Range(1, 1024));
  cmd->callback([args] {
    if (args->resume.empty() && args->config.config.empty()) {
      throw CLI::ValidationError("train", "--config is required (or --resume RUN_DIR)");
    }
  });
  return {cmd, [args] { return run_train(*args); }};
}

}  // namespace mtx::cli
