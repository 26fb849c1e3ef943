// mtx average: the elementwise mean of several checkpoints (same model) into one translatable checkpoint.
#include "commands.h"
#include "mtx/train/average.h"

namespace mtx::cli {

Command add_average(CLI::App& app) {
  auto ckpts = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("average", "Average checkpoints of one model (e.g. the last K of a run) into one");
  cmd->add_option("--ckpt", *ckpts, "A checkpoint; repeat for each")->required();
  cmd->add_option("--out", *out, "Where to write the averaged checkpoint")->required();
  return {cmd, [ckpts, out] {
            std::vector<std::filesystem::path> paths(ckpts->begin(), ckpts->end());
            train::average_checkpoints(paths, *out);
            return 0;
          }};
}

}  // namespace mtx::cli
