// A model bundle: what inference needs from a model file -- weights, the resolved config (model and decode
// settings), the tokenizer and its special ids -- loaded and verified onto a device. The file is mtx's
// checkpoint format (mtx-checkpoint-1); train/ writes it with its training state as further parts, which
// inference never reads. Nothing here knows about training.
#pragma once

#include <torch/serialize/input-archive.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mtx/config/config.h"
#include "mtx/model/transformer.h"
#include "mtx/tokenizer/tokenizer.h"

namespace mtx::bundle {

struct Bundle {
  config::Config config;
  std::optional<tokenizer::Tokenizer> tokenizer;
  model::Transformer model{nullptr};
  std::string weights_sha256;
  std::filesystem::path path;  // where it was read from (named in errors)
};

// The named parts of a bundle file beyond the bundle itself (e.g. "mtx_state", "mtx_optimizer", "rng_cpu"),
// verified with the rest, and the open archive (older files keep some parts as archive entries).
struct ExtraParts {
  std::map<std::string, std::string> parts;
  std::shared_ptr<torch::serialize::InputArchive> archive;
};

// Reads and verifies a bundle file (every recorded hash: a damaged file is one DataError naming it) and
// builds its model on `device`. With `extra`, also hands over the file's other parts.
Bundle load_bundle(const std::filesystem::path& path, const torch::Device& device = torch::Device(torch::kCPU),
                   ExtraParts* extra = nullptr);

// The bundles of an ensemble (decode::Translator over several models), each loaded and verified as load_bundle
// does onto `device`. Throws ConfigError, naming the file, for a tokenizer other than the first file's (an
// ensemble scores one vocabulary).
std::vector<Bundle> load_ensemble(const std::vector<std::filesystem::path>& paths,
                                  const torch::Device& device = torch::Device(torch::kCPU));

// int8 inference (model/linear.h): every Linear of the layers, and the output projection with `output`.
struct Int8Options {
  bool output = true;  // the output projection too (tied or not)
};

// The bundles of an ensemble as load_ensemble loads them, for inference only (translate, score, serve, the
// Python package): quantized when `int8` is given, in eval mode, and on the CPU packed for mtx's kernels with
// every float weight that a pack duplicates dropped (model::TransformerImpl::release_float), so a model takes
// about one copy of its weights in memory; an int8 bundle's layers never build their float weights at all.
// The models translate exactly as load_ensemble's do, and cannot be trained or saved.
std::vector<Bundle> load_for_inference(const std::vector<std::filesystem::path>& paths,
                                       const torch::Device& device = torch::Device(torch::kCPU),
                                       const std::optional<Int8Options>& int8 = std::nullopt);
// Quantizes a loaded bundle's model for CPU inference (eval mode; its weights_sha256 is updated to the
// dequantized weights). Throws ConfigError when the model is not on the CPU or LibTorch has no int8 engine.
void quantize_int8(Bundle& bundle, const Int8Options& options = {});

// Writes a bundle file atomically: the bundle's parts plus `extra` (names from kExtraParts), all covered by
// one recorded sha256. Throws Error (and writes nothing) if any weight is NaN/Inf. An int8 model (quantized
// with quantize_int8) is written as an int8 bundle: int8 values and per-row scales for its quantized layers
// (about a quarter of their float size), loaded back quantized exactly so (CPU only). A tied int8 output
// projection's target embedding is its dequantized values, so it is not written again.
void save_bundle(const std::filesystem::path& path, const config::Config& config, const tokenizer::Tokenizer& tokenizer,
                 model::Transformer& model, const std::map<std::string, std::string>& extra = {});

// The parts a writer may add, in the order the file's sha256 covers them.
extern const char* const kExtraParts[4];  // mtx_state, mtx_optimizer, rng_cpu, rng_cuda

// A fresh model for a config and tokenizer (seeded init happens before this call); with `filled` false, one
// whose parameters are placeholders to load weights into (model::TransformerImpl::Unfilled).
model::Transformer build_model(const config::Config& config, const tokenizer::Tokenizer& tokenizer, bool filled = true);
// sha256 over every parameter and buffer (name, shape, float bytes), in name order.
std::string weights_sha256(model::Transformer& model);
bool weights_finite(model::Transformer& model);

// The first line of an exception's message, without LibTorch's backtrace (for one-line errors).
std::string short_what(const std::exception& e);

}  // namespace mtx::bundle
