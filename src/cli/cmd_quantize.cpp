// mtx quantize: a bundle with int8 weights for CPU inference (about a quarter of the float layers' size);
// mtx translate and mtx eval --ckpt then run it int8 without further flags. Training state is left out.
#include "commands.h"
#include "mtx/bundle/bundle.h"
#include "mtx/util/logging.h"

#include <filesystem>

namespace mtx::cli {

struct QuantizeCommandArgs {
  std::string ckpt, out;
  bool float_output = false;
};

namespace {

int run_quantize(const QuantizeCommandArgs& a) {
  bundle::Bundle b = bundle::load_bundle(a.ckpt, torch::Device(torch::kCPU));
  bundle::Int8Options options;
  options.output = !a.float_output;
  bundle::quantize_int8(b, options);
  bundle::save_bundle(a.out, b.config, *b.tokenizer, b.model);
  log::info("wrote {} ({:.1f} MB; {} was {:.1f} MB): int8 layers{}", a.out,
            double(std::filesystem::file_size(a.out)) / 1e6, a.ckpt, double(std::filesystem::file_size(a.ckpt)) / 1e6,
            options.output ? " and output projection" : ", float output projection");
  return 0;
}

}  // namespace

Command add_quantize(CLI::App& app) {
  auto a = std::make_shared<QuantizeCommandArgs>();
  auto* cmd = app.add_subcommand("quantize", "Write an int8 bundle of a checkpoint for CPU inference");
  cmd->add_option("--ckpt", a->ckpt, "Checkpoint (or bundle) to quantize")->required()->check(CLI::ExistingFile);
  cmd->add_option("--out", a->out, "Where to write the int8 bundle")->required();
  cmd->add_flag("--float-output", a->float_output, "Keep the output projection in float");
  return {cmd, [a] { return run_quantize(*a); }};
}

}  // namespace mtx::cli
