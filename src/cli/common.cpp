#include "commands.h"

#include <algorithm>
#include <fstream>
#include <limits>

#include "mtx/bundle/bundle.h"
#include "mtx/util/errors.h"
#include "mtx/util/utf8.h"

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

void ControlFlags::add(CLI::App& cmd, const std::string& note) {
  cmd.add_option("--source-lang", source_lang_,
                 "A multilingual model's source language code (NLLB's deu_Latn, M2M100's de, mBART-50's de_DE; "
                 "mtx info --ckpt lists them)" +
                     note);
  cmd.add_option("--target-lang", target_lang_,
                 "A multilingual model's target language code: each translation starts with its token" + note);
  cmd.add_option("--target-prefix", prefix_path_,
                 "Line-aligned target prefixes: each translation starts with its line of FILE (empty: none); the "
                 "search continues after it" +
                     note)
      ->check(CLI::ExistingFile);
  cmd.add_option("--constraints", constraints_path_,
                 "Line-aligned terminology constraints: each line of FILE a JSON list of target phrases its "
                 "translation must hold, e.g. [\"a dog\"] (empty: none); lexically constrained beam search" +
                     note)
      ->check(CLI::ExistingFile);
  cmd.add_option("--glossary", glossary_path_,
                 "A glossary, \"source term<TAB>target term\" a line (forms separated by '|': "
                 "\"Hund|Hunde<TAB>puppy|puppies\"): where a line holds a source term as whole words, its target term "
                 "takes the place of the model's translation of those words" +
                     note)
      ->check(CLI::ExistingFile);
  cmd.add_flag("--glossary-ignore-case", glossary_matching_.ignore_case,
               "Glossary source terms match in any case" + note);
  cmd.add_option("--glossary-stem", glossary_matching_.stem,
                 "Glossary source terms match words with the same Snowball stems (a stemmer's name or language "
                 "code: german, de, english, ...), in any case: Hund matches Hunde and Hundes" +
                     note);
}

void ControlFlags::apply(decode::TranslateOptions& options) const {
  options.source_lang = source_lang_;
  options.target_lang = target_lang_;
}

void ControlFlags::open(decode::StreamOptions& stream) {
  const auto open_one = [](const std::string& flag, const std::string& path, std::ifstream& file,
                           std::unique_ptr<decode::LineSource>& lines, decode::StreamOptions::ControlFile& into) {
    if (path.empty()) return;
    file.open(path, std::ios::binary);
    if (!file) throw DataError(flag + ": cannot read '" + path + "'");
    lines = decode::istream_line_source(file);
    into = {lines.get(), flag + " '" + path + "'"};
  };
  open_one("--target-prefix", prefix_path_, prefix_file_, prefixes_, stream.prefixes);
  open_one("--constraints", constraints_path_, constraints_file_, constraints_, stream.constraints);
  if (!glossary_path_.empty()) {
    glossary_ = decode::Glossary::load(glossary_path_, glossary_matching_);
    log::info("glossary {}: {} entries", glossary_path_, glossary_->size());
    stream.glossary = &*glossary_;
  }
}

namespace {
// A phrases option's file: one phrase a line, blank lines and lines starting with '#' skipped.
std::vector<std::string> read_phrases(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(flag + ": cannot read '" + path + "'");
  std::vector<std::string> out;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos || line[0] == '#') continue;
    if (!utf8::is_valid(line)) {
      throw DataError(flag + " '" + path + "' line " + std::to_string(number) + ": not valid UTF-8");
    }
    out.push_back(line);
  }
  if (in.bad()) throw DataError(flag + ": reading '" + path + "' failed");
  return out;
}
}  // namespace

void DecodeFlags::add(CLI::App& cmd, const std::string& note) {
  const auto& table = config::decode_options();
  slots_.assign(table.size(), Slot{});
  for (size_t i = 0; i < table.size(); ++i) {
    const config::DecodeOption& o = table[i];
    const config::DecodeConfig defaults;
    const std::string help =
        std::string(o.help) + " (default: the checkpoint's decode." + o.key + ", else " + o.text(defaults) + ")" + note;
    Slot& slot = slots_[i];
    if (o.boolean) {
      // A callback, not add_flag's variable: CLI11 would set the variable (to false) when no flag is given, and
      // the checkpoint's value would never apply. The count is negative for the {false} name.
      cmd.add_flag_function(
          o.flags, [&slot](int64_t count) { slot.boolean = count > 0; }, help);
    } else if (o.phrases) {
      cmd.add_option(o.flags, slot.file, help)->type_name("FILE");
    } else if (o.number) {
      cmd.add_option(o.flags, slot.number, help);
    } else {
      cmd.add_option(o.flags, slot.integer, help);
    }
  }
}

config::DecodeConfig DecodeFlags::apply(config::DecodeConfig d) const {
  const auto& table = config::decode_options();
  bool nbest_given = false;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const config::DecodeOption& o = table[i];
    const Slot& slot = slots_[i];
    nbest_given = nbest_given || (slot.integer && o.integer == &config::DecodeConfig::nbest);
    if (slot.boolean) d.*o.boolean = *slot.boolean;
    if (slot.file) d.*o.phrases = read_phrases(*slot.file, std::string(o.flags));
    if (slot.number) d.*o.number = *slot.number;
    if (slot.integer) {
      o.set_integer(d, *slot.integer, std::string(o.flags).substr(0, std::string(o.flags).find_first_of("{,")));
    }
  }
  config::fit_nbest_to_beam(d, nbest_given);
  config::validate(d);
  return d;
}

TranslationModels load_translation_models(const std::vector<std::string>& paths, const torch::Device& device,
                                          const QuantizeArgs& quantize) {
  if (quantize.float_output && !quantize.int8()) throw ConfigError("--float-output goes with --quantize int8");
  TranslationModels out;
  std::optional<bundle::Int8Options> int8;
  if (quantize.int8()) int8 = bundle::Int8Options{!quantize.float_output};
  out.bundles = bundle::load_for_inference({paths.begin(), paths.end()}, device, int8);
  for (auto& b : out.bundles) out.models.push_back(b.model);
  return out;
}

std::string inference_device(const std::string& device, const QuantizeArgs& args) {
  return args.int8() && device == "auto" ? "cpu" : device;
}

DeviceChoice parse_device(const std::string& device) {
  if (device == "cpu") return DeviceChoice::cpu;
  if (device == "cuda") return DeviceChoice::cuda;
  return DeviceChoice::auto_;
}

}  // namespace mtx::cli
