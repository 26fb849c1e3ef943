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
  if (a.from == "marian" && a.config.empty()) {
    throw ConfigError("import: --from marian needs --config (the model's decoder.yml, which names its vocabularies)");
  }
  bundle::Imported imported =
      a.from == "hf" ? bundle::import_hf(a.input, a.options) : bundle::import_marian(a.input, a.config);
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
  cmd->add_option("--from", a->from, "The model's format: hf (a MarianMT directory) or marian (an .npz model)")
      ->required()
      ->check(CLI::IsMember({"hf", "marian"}));
  cmd->add_option("input", a->input,
                  "hf: a MarianMT directory (config.json, weights, *.spm, vocab.json); marian: the model's .npz")
      ->required();
  cmd->add_option("--config", a->config,
                  "marian: the model's decoder.yml (its vocabularies; source/target.spm beside it)");
  cmd->add_option("--out", a->out, "Where to write the bundle")->required();
  cmd->add_option("--python", a->options.python,
                  "pytorch_model.bin only: a Python with torch and safetensors to rewrite it (e.g. .venv/bin/python)")
      ->capture_default_str();
  return {cmd, [a] { return run_import(*a); }};
}

}  // namespace mtx::cli
