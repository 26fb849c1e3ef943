#include "import_weights.h"

#include <algorithm>

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
    if (m.decoder_autoreg == config::DecoderAutoreg::ssru) {
      put(n.ssru, layout.ssru(w, i, d));
    } else {
      fused(n.self_qkv, true, i, {Dense::self_q, Dense::self_k, Dense::self_v});
      put(n.self_out, layout.dense(w, true, i, Dense::self_out, d, d));
    }
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

int32_t id_of(const std::vector<std::string>& pieces, const std::string& piece, const fs::path& where) {
  const auto it = std::find(pieces.begin(), pieces.end(), piece);
  if (it == pieces.end()) throw DataError(where.string() + ": no '" + piece + "' piece");
  return int32_t(it - pieces.begin());
}

Imported build_imported(Source& s) {
  Imported out;
  Bundle& b = out.bundle;
  config::Config& c = b.config;
  c = s.config;
  Vocabulary& v = s.vocabulary;
  const auto rows = int64_t(v.pieces.size());
  std::vector<std::string> pieces = v.pieces;
  for (const AddedPiece& a : s.added) {
    const bool taken = std::find(pieces.begin(), pieces.end(), a.name) != pieces.end();
    pieces.push_back(taken ? a.taken_name : a.name);
    out.notes.push_back("the vocabulary gains '" + pieces.back() + "' (id " + std::to_string(pieces.size() - 1) +
                        "): " + a.why);
  }
  c.tokenizer.vocab_size = int(pieces.size());
  config::validate(c);
  auto side = [&](const std::string& spm) {
    return tokenizer::VocabModel::create(tokenizer::SpmModel::from_bytes(spm), pieces, v.ids, v.languages,
                                         v.code_after_eos);
  };
  b.tokenizer = tokenizer::Tokenizer::from_bytes(side(v.source_spm)->bytes(), side(v.target_spm)->bytes());
  b.model = build_model(c, *b.tokenizer);
  b.model->eval();

  const config::ModelConfig& m = c.model;
  Weights& w = *s.weights;
  Filler target(b.model);
  torch::NoGradGuard no_grad;
  fill_layers(w, target, s.layout(), m);
  s.fill_rest(target, b.model);
  // The embeddings and the output layer, each with the added pieces' rows.
  const Embeddings e = s.embeddings(w, m, rows);
  auto with_added = [&](const torch::Tensor& table) {  // [rows, ...] -> [rows + added, ...]
    std::vector<torch::Tensor> parts = {table};
    for (const AddedPiece& a : s.added) {
      parts.push_back(a.copy_of >= 0 ? table.narrow(0, a.copy_of, 1).clone()
                                     : torch::zeros_like(table.narrow(0, 0, 1)));
    }
    return torch::cat(parts, 0);
  };
  namespace names = model::names;
  target.put(names::join(names::kSrcEmbed, "weight"), with_added(e.src_embed));
  if (!m.share_embeddings) target.put(names::join(names::kTgtEmbed, "weight"), with_added(e.tgt_embed));
  torch::Tensor bias = with_added(e.bias.defined() ? e.bias : torch::zeros({rows}));  // [rows + added]
  for (size_t i = 0; i < s.added.size(); ++i) bias[rows + int64_t(i)] += s.added[i].bias;
  if (m.tie_output) {
    target.put(names::kOutputBias, bias);
  } else {
    target.put(names::join(names::kOutput, "weight"), with_added(e.output));
    target.put(names::join(names::kOutput, "bias"), bias);
  }
  w.check_all_used([&](const std::string& name) { return s.unplaced(name); });
  target.check_all_filled();
  b.weights_sha256 = weights_sha256(b.model);
  b.path = s.path;
  for (const std::string& note : v.notes) out.notes.push_back(note);
  for (const std::string& note : s.notes) out.notes.push_back(note);
  return out;
}

}  // namespace mtx::bundle::detail
