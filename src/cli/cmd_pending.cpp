// eval: its flags are parsed as documented, but the scorer is not in this release yet; it says so
// plainly and exits non-zero.
#include "commands.h"
#include "mtx/util/errors.h"

namespace mtx::cli {
namespace {

int not_yet(const std::string& name, const std::string& what) {
  throw Error("'mtx " + name + "' is not available in mtx " + std::string(MTX_VERSION) + " yet: " + what +
              " arrives in a later release");
}

}  // namespace

Command add_eval(CLI::App& app) {
  auto metric = std::make_shared<std::string>();
  auto refs = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand("eval", "Score translations: BLEU, chrF, TER as sacreBLEU computes them (coming)");
  cmd->add_option("--metric", *metric, "bleu,chrf,ter");
  cmd->add_option("--ref", *refs, "Reference file(s)");
  return {cmd, [metric, refs] { return not_yet("eval", "the sacreBLEU-exact scorer"); }};
}

}  // namespace mtx::cli
