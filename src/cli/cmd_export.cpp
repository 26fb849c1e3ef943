// mtx export: a checkpoint's model in another toolkit's form -- safetensors (weights, model description,
// vocabularies, sentencepiece models) or a CTranslate2 model directory (through CTranslate2's Python specs).
#include <cstdlib>

#include "commands.h"
#include "mtx/bundle/export.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"

namespace mtx::cli {

struct ExportArgs {
  std::string format = "ct2";
  std::string ckpt, out;
  std::string python;        // empty: $MTX_PYTHON, else python3
  std::string quantization;  // ct2: CTranslate2's weight type
  bool force = false;
};

namespace {

int run_export(const ExportArgs& a) {
  if (a.format != "ct2" && !a.quantization.empty()) throw ConfigError("--quantization goes with --format ct2");
  bundle::Bundle b = bundle::load_bundle(a.ckpt, torch::Device(torch::kCPU));
  if (a.format == "safetensors") {
    bundle::export_safetensors(b, a.out);
    log::info("wrote {}/model.safetensors and mtx_export.json (weights {})", a.out, b.weights_sha256.substr(0, 12));
    return 0;
  }
  bundle::Ct2ExportOptions options;
  const char* env = std::getenv("MTX_PYTHON");
  options.python = !a.python.empty() ? a.python : (env && *env ? env : "python3");
  options.quantization = a.quantization;
  options.force = a.force;
  bundle::export_ct2(b, a.out, options);
  log::info("wrote the CTranslate2 model {} (weights {}{})", a.out, b.weights_sha256.substr(0, 12),
            a.quantization.empty() ? "" : ", " + a.quantization);
  return 0;
}

}  // namespace

Command add_export(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* cmd = app.add_subcommand("export", "Export a checkpoint's model: a CTranslate2 model directory or safetensors");
  cmd->add_option("--format", a->format, "ct2 | safetensors")->check(CLI::IsMember({"ct2", "safetensors"}));
  cmd->add_option("--ckpt", a->ckpt, "Checkpoint (or bundle) to export")->required()->check(CLI::ExistingFile);
  cmd->add_option("--out", a->out, "Directory to write")->required();
  cmd->add_option("--python", a->python,
                  "ct2: Python with ctranslate2, safetensors, numpy (default: $MTX_PYTHON, else python3)");
  cmd->add_option("--quantization", a->quantization, "ct2: CTranslate2 weight type, e.g. int8 (default float32)");
  cmd->add_flag("--force", a->force, "ct2: replace an existing model directory");
  return {cmd, [a] { return run_export(*a); }};
}

}  // namespace mtx::cli
