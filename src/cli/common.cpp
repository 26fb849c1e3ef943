#include "commands.h"

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

config::Device parse_device(const std::string& device) {
  if (device == "cpu") return config::Device::cpu;
  if (device == "cuda") return config::Device::cuda;
  return config::Device::auto_;
}

}  // namespace mtx::cli
