// mtx import: a model trained elsewhere as an mtx bundle (Hugging Face MarianMT directories, Marian/OPUS-MT .npz
// models; docs/import.md).
// The bundle translates, scores, exports, quantizes and fine-tunes (mtx train --init) as any other.
#include "commands.h"
#include "mtx/bundle/import.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"

#include <filesystem>

namespace mtx::cli {

struct ImportCommandArgs {
  std::string from, input, out, config;
  bundle::ImportOptions options;
};

namespace {

int run_import(const ImportCommandArgs& a) {
  bundle::ImportOptions options = a.options;
  options.config = a.config;
  for (const bundle::ImportFormat& f : bundle::import_formats()) {
    if (a.from == f.name && f.config && a.config.empty()) {
      throw ConfigError("import: --from " + a.from + " needs --config (" + f.config + ")");
    }
  }
  bundle::Imported imported = bundle::import_model(a.from, a.input, options);
  bundle::Bundle& b = imported.bundle;
  bundle::save_bundle(a.out, b.config, *b.tokenizer, b.model);
  for (const auto& note : imported.notes) log::info("import: {}", note);
  log::info("wrote {} ({:.1f} MB): {} layers + {}, d_model {}, vocabulary {}", a.out,
            double(std::filesystem::file_size(a.out)) / 1e6, b.config.model.encoder_layers,
            b.config.model.decoder_layers, b.config.model.d_model, b.tokenizer->tgt().vocab_size());
  return 0;
}

}  // namespace

Command add_import(CLI::App& app) {
  auto a = std::make_shared<ImportCommandArgs>();
  auto* cmd = app.add_subcommand("import", "Write an mtx bundle of a model trained elsewhere (MarianMT, Marian)");
  std::vector<std::string> names;
  std::string inputs, configs;
  for (const bundle::ImportFormat& f : bundle::import_formats()) {
    names.push_back(f.name);
    inputs += std::string(inputs.empty() ? "" : "; ") + f.name + ": " + f.input;
    if (f.config) configs += std::string(configs.empty() ? "" : "; ") + f.name + ": " + f.config;
  }
  cmd->add_option("--from", a->from, "The model's format")->required()->check(CLI::IsMember(names));
  cmd->add_option("input", a->input, inputs)->required();
  cmd->add_option("--config", a->config, configs);
  cmd->add_option("--out", a->out, "Where to write the bundle")->required();
  cmd->add_option("--python", a->options.python,
                  "pytorch_model.bin only: a Python with torch and safetensors to rewrite it (e.g. .venv/bin/python)")
      ->capture_default_str();
  return {cmd, [a] { return run_import(*a); }};
}

}  // namespace mtx::cli
