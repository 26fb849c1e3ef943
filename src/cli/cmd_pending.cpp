// train, translate and eval: their flags are parsed as documented, but the model, translator and
// scorer are not in this release yet; each says so plainly and exits non-zero.
#include "commands.h"
#include "mtx/util/errors.h"

namespace mtx::cli {
namespace {

int not_yet(const std::string& name, const std::string& what) {
  throw Error("'mtx " + name + "' is not available in mtx " + std::string(MTX_VERSION) + " yet: " + what +
              " arrives in a later release (use 'mtx prepare' and 'mtx info' meanwhile)");
}

}  // namespace

Command add_train(CLI::App& app) {
  auto args = std::make_shared<ConfigArgs>();
  auto out = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("train", "Train a Transformer (coming: needs the model component)");
  add_config_flags(*cmd, *args, true);
  cmd->add_option("--out", *out, "Run directory for checkpoints, metrics and the resolved config");
  return {cmd, [] { return not_yet("train", "the Transformer model and trainer"); }};
}

Command add_translate(CLI::App& app) {
  auto ckpt = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("translate", "Translate stdin to stdout with beam search (coming)");
  cmd->add_option("--ckpt", *ckpt, "Checkpoint to translate with");
  return {cmd, [] { return not_yet("translate", "the beam-search translator"); }};
}

Command add_eval(CLI::App& app) {
  auto metric = std::make_shared<std::string>();
  auto refs = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand("eval", "Score translations: BLEU, chrF, TER as sacreBLEU computes them (coming)");
  cmd->add_option("--metric", *metric, "bleu,chrf,ter");
  cmd->add_option("--ref", *refs, "Reference file(s)");
  return {cmd, [] { return not_yet("eval", "the sacreBLEU-exact scorer"); }};
}

}  // namespace mtx::cli
