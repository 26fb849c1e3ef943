#include "import_weights.h"

#include "mtx/bundle/bundle.h"
#include "mtx/model/param_names.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/process.h"

namespace mtx::bundle::detail {
namespace {

constexpr const char* kPickleToSafetensors =
    "import sys, torch\n"
    "from safetensors.torch import save_file\n"
    "state = torch.load(sys.argv[1], map_location='cpu', weights_only=True)\n"
    "save_file({k: v.detach().clone().contiguous() for k, v in state.items()}, sys.argv[2])\n";

}  // namespace

void Weights::add_pickle(const fs::path& file, const std::string& python) {
  ScratchDir scratch("import");
  const fs::path out = scratch.path() / "model.safetensors";
  const int status = run_process({python, "-c", kPickleToSafetensors, file.string(), out.string()});
  if (status != 0) {
    throw DataError(file.string() + ": PyTorch could not rewrite it as safetensors (" +
                    (status == 127 ? "no '" + python + "'" : "exit " + std::to_string(status) + ", see above") +
                    "); --python names an interpreter with torch and safetensors, or save the model with "
                    "save_pretrained(dir) (model.safetensors)");
  }
  files_.push_back(file.string());
  for (auto& [name, t] : read_safetensors(out).tensors) add(file, name, t);
}

Weights hf_weights(const fs::path& dir, const std::string& python) {
  Weights w("config.json");
  if (fs::exists(dir / "model.safetensors")) {
    w.add_safetensors(dir / "model.safetensors");
  } else if (fs::exists(dir / "model.safetensors.index.json")) {
    const JsonFile index(dir / "model.safetensors.index.json");
    std::set<std::string> files;
    for (const auto& [name, file] : index.strings("weight_map")) files.insert(file);
    for (const auto& file : files) w.add_safetensors(dir / file);
  } else if (fs::exists(dir / "pytorch_model.bin")) {
    w.add_pickle(dir / "pytorch_model.bin", python);
  } else {
    throw DataError(dir.string() +
                    ": no weights (model.safetensors, model.safetensors.index.json or pytorch_model.bin)");
  }
  return w;
}

void fill_layers(Weights& w, Filler& target, const Layout& layout, const config::ModelConfig& m) {
  const int64_t d = m.d_model, f = m.ffn_dim;
  auto put = [&](const std::string& name, const std::pair<torch::Tensor, torch::Tensor>& p) {
    target.put(name + ".weight", p.first);
    target.put(name + ".bias", p.second);
  };
  auto fused = [&](const std::string& name, bool decoder, int64_t i, std::initializer_list<Dense> parts) {
    std::vector<torch::Tensor> weights, biases;
    for (const Dense p : parts) {
      auto [weight, bias] = layout.dense(w, decoder, i, p, d, d);  // [d, d], [d]
      weights.push_back(weight);
      biases.push_back(bias);
    }
    put(name, {torch::cat(weights, 0), torch::cat(biases, 0)});  // [parts * d, d], [parts * d]
  };
  for (int64_t i = 0; i < m.encoder_layers; ++i) {
    const model::names::LayerNames n = model::names::encoder_layer(i);
    fused(n.self_qkv, false, i, {Dense::self_q, Dense::self_k, Dense::self_v});
    put(n.self_out, layout.dense(w, false, i, Dense::self_out, d, d));
    put(n.self_norm, layout.norm(w, false, i, Sublayer::self, d));
    put(n.fc1, layout.dense(w, false, i, Dense::fc1, f, d));
    put(n.fc2, layout.dense(w, false, i, Dense::fc2, d, f));
    put(n.ffn_norm, layout.norm(w, false, i, Sublayer::ffn, d));
  }
  for (int64_t i = 0; i < m.decoder_layers; ++i) {
    const model::names::LayerNames n = model::names::decoder_layer(i);
    fused(n.self_qkv, true, i, {Dense::self_q, Dense::self_k, Dense::self_v});
    put(n.self_out, layout.dense(w, true, i, Dense::self_out, d, d));
    put(n.self_norm, layout.norm(w, true, i, Sublayer::self, d));
    fused(n.cross_q, true, i, {Dense::cross_q});
    fused(n.cross_kv, true, i, {Dense::cross_k, Dense::cross_v});
    put(n.cross_out, layout.dense(w, true, i, Dense::cross_out, d, d));
    put(n.cross_norm, layout.norm(w, true, i, Sublayer::cross, d));
    put(n.fc1, layout.dense(w, true, i, Dense::fc1, f, d));
    put(n.fc2, layout.dense(w, true, i, Dense::fc2, d, f));
    put(n.ffn_norm, layout.norm(w, true, i, Sublayer::ffn, d));
  }
}

}  // namespace mtx::bundle::detail
