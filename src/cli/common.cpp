#include "commands.h"

#include "mtx/bundle/bundle.h"
#include "mtx/util/errors.h"

namespace mtx::cli {

void add_config_flags(CLI::App& cmd, ConfigArgs& args, bool required) {
  auto* opt = cmd.add_option("-c,--config", args.config, "JSON config (configs/tiny.json, small.json, base.json)");
  if (required) opt->required();
  cmd.add_option("--set", args.overrides, "Override a setting: section.key=value (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
}

namespace {
std::vector<std::string> g_program_args;
}

void set_program_args(int argc, char** argv) { g_program_args.assign(argv, argv + argc); }
const std::vector<std::string>& program_args() { return g_program_args; }

void add_quantize_flags(CLI::App& cmd, QuantizeArgs& args) {
  cmd.add_option("--quantize", args.quantize,
                 "none | int8: int8 weights, activations quantized per row on the fly (CPU); an int8 bundle "
                 "(mtx quantize) is int8 already")
      ->check(CLI::IsMember({"none", "int8"}));
  cmd.add_flag("--float-output", args.float_output, "With --quantize int8: keep the output projection in float");
}

TranslationModels load_translation_models(const std::vector<std::string>& paths, const torch::Device& device,
                                          const QuantizeArgs& quantize) {
  if (quantize.float_output && !quantize.int8()) throw ConfigError("--float-output goes with --quantize int8");
  TranslationModels out;
  out.bundles = bundle::load_ensemble({paths.begin(), paths.end()}, device);
  bundle::Int8Options options;
  options.output = !quantize.float_output;
  for (auto& b : out.bundles) {
    if (quantize.int8()) bundle::quantize_int8(b, options);
    out.models.push_back(b.model);
  }
  return out;
}

std::string inference_device(const std::string& device, const QuantizeArgs& args) {
  return args.int8() && device == "auto" ? "cpu" : device;
}

config::Device parse_device(const std::string& device) {
  if (device == "cpu") return config::Device::cpu;
  if (device == "cuda") return config::Device::cuda;
  return config::Device::auto_;
}

}  // namespace mtx::cli
