// mtx train: train from a config into a run directory, or continue one exactly (--resume).
#include <atomic>
#include <csignal>
#include <cstdlib>

#include "commands.h"
#include "mtx/config/config.h"
#include "mtx/train/dist.h"
#include "mtx/train/launch.h"
#include "mtx/train/settings.h"
#include "mtx/train/trainer.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"

namespace mtx::cli {

struct TrainArgs {
  ConfigArgs config;
  std::string out;     // run directory (default: runs/<config name>)
  std::string resume;  // run directory to continue
  std::string init;    // model file a new run starts from
  int nproc = 1;       // local ranks to start (data-parallel training; 1 = this process alone)
};

namespace {

// First SIGINT/SIGTERM: finish the update, save, exit 130/143. A second one: leave at once.
void on_signal(int sig) {
  static std::atomic<int> received{0};
  if (received.fetch_add(1) > 0) std::_Exit(128 + sig);
  train::request_stop(sig);
}

int exit_code_for(int sig) { return sig == SIGINT ? kExitInterrupted : sig == SIGTERM ? kExitTerminated : 128 + sig; }

train::RunRequest request_of(const TrainArgs& args) {
  return {args.config.config, args.config.overrides, args.out, args.resume, args.init};
}

// --nproc N: this command again in N ranks (without --nproc), with the run's collective timeout.
int launch_ranks(const TrainArgs& args) {
  if (train::dist::env_from_environment()) {
    throw ConfigError(
        "--nproc: this process is already a rank (WORLD_SIZE is set); launch with --nproc or torchrun, not both");
  }
  train::LaunchOptions o;
  o.nproc = args.nproc;
  o.timeout_s = train::resolve_run(request_of(args)).config.train.dist_timeout_s;  // checked before any rank starts
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
  const train::TrainSummary summary = train::Trainer(train::resolve_run(request_of(args))).run();
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
  cmd->add_option("--init", args->init,
                  "Start a new run from this model's weights and tokenizer (e.g. mtx import's; fine-tuning)")
      ->check(CLI::ExistingFile);
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
