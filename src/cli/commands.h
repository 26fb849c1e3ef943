// Subcommand entry points: each parses its flags into a typed struct and calls the library.
#pragma once

#include <CLI/CLI.hpp>

#include "mtx/bundle/bundle.h"
#include "mtx/config/config.h"
#include "mtx/decode/stream.h"

#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mtx::cli {

// A registered subcommand: `run` is called after a successful parse and returns the exit code.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_prepare(CLI::App& app);
Command add_train(CLI::App& app);
Command add_translate(CLI::App& app);
Command add_eval(CLI::App& app);
Command add_info(CLI::App& app);
Command add_average(CLI::App& app);
Command add_plot(CLI::App& app);
Command add_generate(CLI::App& app);
Command add_quantize(CLI::App& app);
Command add_export(CLI::App& app);
Command add_import(CLI::App& app);
Command add_serve(CLI::App& app);
Command add_score(CLI::App& app);
Command add_detect(CLI::App& app);

// --config FILE and repeated --set section.key=value, shared by every config-reading subcommand.
struct ConfigArgs {
  std::string config;
  std::vector<std::string> overrides;
};
void add_config_flags(CLI::App& cmd, ConfigArgs& args, bool required);

// The process's command line as main() received it (for subcommands that start copies of themselves).
void set_program_args(int argc, char** argv);
const std::vector<std::string>& program_args();

// --quantize none|int8 and --float-output, for the commands that translate with a bundle.
struct QuantizeArgs {
  std::string quantize = "none";
  bool float_output = false;  // int8 layers, float output projection
  bool int8() const { return quantize == "int8"; }
};
void add_quantize_flags(CLI::App& cmd, QuantizeArgs& args);
// The checkpoints a translating command was given (several: an ensemble), loaded onto `device` with one
// tokenizer among them (bundle::load_ensemble) and quantized as the flags say (an int8 bundle stays as
// stored); models[i] is bundles[i].model, the first bundle's decode section gives the defaults.
struct TranslationModels {
  std::vector<bundle::Bundle> bundles;
  std::vector<model::Transformer> models;
};
TranslationModels load_translation_models(const std::vector<std::string>& paths, const torch::Device& device,
                                          const QuantizeArgs& quantize);
// --device for inference: int8 runs on the CPU, so "auto" means the CPU there.
std::string inference_device(const std::string& device, const QuantizeArgs& args);

// The per-line target controls' flags of mtx translate and eval --ckpt: --target-prefix FILE, --constraints FILE
// (line-aligned with the input) and --glossary FILE.
class ControlFlags {
 public:
  void add(CLI::App& cmd, const std::string& note = "");
  // Opens the files (DataError naming an unreadable one) into `stream`'s control files and glossary; they stay
  // open as long as this object.
  void open(decode::StreamOptions& stream);
  // The languages named (--source-lang, --target-lang) into the translator's options.
  void apply(decode::TranslateOptions& options) const;
  // Whether --target-prefix or --constraints, files with a line per input line, is given.
  bool line_aligned() const { return !prefix_path_.empty() || !constraints_path_.empty(); }

 private:
  std::string source_lang_, target_lang_;
  std::string prefix_path_, constraints_path_, glossary_path_;
  std::ifstream prefix_file_, constraints_file_;
  std::unique_ptr<decode::LineSource> prefixes_, constraints_;
  std::optional<decode::Glossary> glossary_;
  decode::Glossary::Matching glossary_matching_;
};

// The decoding options' flags, one per entry of config::decode_options() (--beam, --alpha, --sampling-topk, ...),
// for mtx translate, eval and serve. Unset flags leave the checkpoint's decode section's value.
class DecodeFlags {
 public:
  // Adds the flags to `cmd`; `note` ends each help line (e.g. " (with --ckpt)").
  void add(CLI::App& cmd, const std::string& note = "");
  // The section with the given flags applied, validated (ConfigError naming decode.KEY and its flag).
  config::DecodeConfig apply(config::DecodeConfig decode) const;

 private:
  struct Slot {
    std::optional<int64_t> integer;
    std::optional<double> number;
    std::optional<bool> boolean;
    std::optional<std::string> file;  // a phrases option: one phrase a line
  };
  std::vector<Slot> slots_;  // one per table entry, sized once (CLI11 holds their addresses)
};

// --device auto|cpu|cuda (already checked by CLI11) as the config's enum.
DeviceChoice parse_device(const std::string& device);

}  // namespace mtx::cli
