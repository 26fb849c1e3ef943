// train, translate and eval: their flags are parsed as documented, but the model, translator and
// scorer are not in this release yet; each says so plainly and exits non-zero. `train` already does
// its first stage: validate the config, prepare the data (training the tokenizer when missing) and
// write the resolved config into the run directory.
#include "commands.h"
#include "mtx/config/config.h"
#include "mtx/data/prepare.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"
#include "mtx/util/system.h"

namespace mtx::cli {
namespace {

int not_yet(const std::string& name, const std::string& what) {
  throw Error("'mtx " + name + "' is not available in mtx " + std::string(MTX_VERSION) + " yet: " + what +
              " arrives in a later release");
}

}  // namespace

struct TrainArgs {
  ConfigArgs config;
  std::string out;  // run directory (default: runs/<config name>)
};

int run_train(const TrainArgs& args) {
  const config::Config cfg = config::load(args.config.config, args.config.overrides);
  const std::filesystem::path out =
      args.out.empty() ? std::filesystem::path("runs") / std::filesystem::path(args.config.config).stem()
                       : std::filesystem::path(args.out);
  set_threads(cfg.train.threads);
  data::PrepareOptions options;
  options.threads = cfg.train.threads;
  const data::PreparedData prepared = data::prepare_data(cfg, options);
  config::write_resolved(cfg, out / "config.json");
  log::info("data ready ({} training pairs, tokenizer {}); resolved config written to {}", prepared.train.size(),
            prepared.tokenizer_dir.string(), (out / "config.json").string());
  return not_yet("train", "training the Transformer model");
}

Command add_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("train", "Train a Transformer (this release: prepares data, then stops)");
  add_config_flags(*cmd, args->config, true);
  cmd->add_option("--out", args->out, "Run directory for checkpoints, metrics and the resolved config");
  return {cmd, [args] { return run_train(*args); }};
}

Command add_translate(CLI::App& app) {
  auto ckpt = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("translate", "Translate stdin to stdout with beam search (coming)");
  cmd->add_option("--ckpt", *ckpt, "Checkpoint to translate with");
  return {cmd, [ckpt] { return not_yet("translate", "the beam-search translator"); }};
}

Command add_eval(CLI::App& app) {
  auto metric = std::make_shared<std::string>();
  auto refs = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand("eval", "Score translations: BLEU, chrF, TER as sacreBLEU computes them (coming)");
  cmd->add_option("--metric", *metric, "bleu,chrf,ter");
  cmd->add_option("--ref", *refs, "Reference file(s)");
  return {cmd, [metric, refs] { return not_yet("eval", "the sacreBLEU-exact scorer"); }};
}

}  // namespace mtx::cli
