// import_hf: a Hugging Face MarianMT directory as an mtx bundle (bundle/import.h).
#include "mtx/bundle/import.h"

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <map>
#include <set>

#include "mtx/bundle/export.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/errors.h"
#include "mtx/util/process.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace mtx::bundle {
namespace {

// The start token's output row is its own with the bias this much lower (import.h).
constexpr const char* kPickleToSafetensors =
    "import sys, torch\n"
    "from safetensors.torch import save_file\n"
    "state = torch.load(sys.argv[1], map_location='cpu', weights_only=True)\n"
    "save_file({k: v.detach().clone().contiguous() for k, v in state.items()}, sys.argv[2])\n";

constexpr double kStartBiasOffset = 30;

json read_json(const fs::path& path) {
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw DataError(path.string() + ": not JSON (" + std::string(e.what()).substr(0, 120) + ")");
  }
}

std::string shape_of(torch::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

// config.json's values, each named in errors.
class HfConfig {
 public:
  explicit HfConfig(fs::path path) : path_(std::move(path)), doc_(read_json(path_)) {
    if (!doc_.is_object()) throw DataError(path_.string() + ": not a JSON object");
  }
  bool has(const char* key) const { return doc_.contains(key) && !doc_.at(key).is_null(); }
  template <class T>
  T get(const char* key) const {
    if (!has(key)) throw DataError(path_.string() + ": '" + key + "' is missing");
    try {
      return doc_.at(key).get<T>();
    } catch (const json::exception&) {
      throw DataError(path_.string() + ": '" + key + "' has the wrong type (" + doc_.at(key).dump() + ")");
    }
  }
  template <class T>
  T get(const char* key, T fallback) const {
    return has(key) ? get<T>(key) : fallback;
  }
  int64_t positive(const char* key) const {
    const auto v = get<int64_t>(key);
    if (v <= 0) throw DataError(path_.string() + ": '" + key + "' must be positive, not " + std::to_string(v));
    return v;
  }
  // One id, or the first of a list (eos_token_id may be either).
  int32_t id(const char* key) const {
    if (has(key) && doc_.at(key).is_array() && !doc_.at(key).empty()) return doc_.at(key).at(0).get<int32_t>();
    return get<int32_t>(key);
  }
  [[noreturn]] void refuse(const std::string& what) const { throw DataError(path_.string() + ": " + what); }

 private:
  fs::path path_;
  json doc_;
};

// The checkpoint's tensors by name, with the file they came from; each is taken once.
class HfWeights {
 public:
  HfWeights(const fs::path& dir, const std::string& python) {
    if (fs::exists(dir / "model.safetensors")) {
      add_safetensors(dir / "model.safetensors");
    } else if (fs::exists(dir / "model.safetensors.index.json")) {
      const json index = read_json(dir / "model.safetensors.index.json");
      std::set<std::string> files;
      try {
        for (const auto& [name, file] : index.at("weight_map").items()) files.insert(file.get<std::string>());
      } catch (const json::exception&) {
        throw DataError((dir / "model.safetensors.index.json").string() + ": no 'weight_map' of names to files");
      }
      for (const auto& file : files) add_safetensors(dir / file);
    } else if (fs::exists(dir / "pytorch_model.bin")) {
      add_pickle(dir / "pytorch_model.bin", python);
    } else {
      throw DataError(dir.string() +
                      ": no weights (model.safetensors, model.safetensors.index.json or pytorch_model.bin)");
    }
  }
  bool has(const std::string& name) const { return tensors_.count(name) > 0; }
  // The tensor as float, checked against the shape config.json implies.
  torch::Tensor take(const std::string& name, std::vector<int64_t> shape) {
    const auto it = tensors_.find(name);
    if (it == tensors_.end()) throw DataError(file_of(name) + ": parameter '" + name + "' is missing");
    torch::Tensor t = it->second.second;
    if (t.sizes() != torch::IntArrayRef(shape)) {
      throw DataError(it->second.first + ": parameter '" + name + "' has shape " + shape_of(t.sizes()) +
                      "; config.json's sizes need " + shape_of(shape));
    }
    if (!t.is_floating_point()) throw DataError(it->second.first + ": parameter '" + name + "' is not floating point");
    used_.insert(name);
    return t.to(torch::kFloat).contiguous();
  }
  // Marks a tensor as accounted for (a tied copy, a table mtx computes alike).
  void skip(const std::string& name) { used_.insert(name); }
  // Every tensor must have been taken: one mtx has no place for means an architecture it cannot run.
  void check_all_used() const {
    for (const auto& [name, entry] : tensors_) {
      if (!used_.count(name)) {
        throw DataError(entry.first + ": parameter '" + name +
                        "' has no place in mtx's MarianMT (a layer of an architecture mtx cannot run)");
      }
    }
  }

 private:
  std::string file_of(const std::string&) const { return files_.empty() ? "weights" : files_.front(); }
  void add(const fs::path& file, std::string name, torch::Tensor t) {
    if (!tensors_.emplace(name, std::make_pair(file.string(), std::move(t))).second) {
      throw DataError(file.string() + ": parameter '" + name + "' appears twice");
    }
  }
  void add_safetensors(const fs::path& file) {
    files_.push_back(file.string());
    for (auto& [name, t] : read_safetensors(file).tensors) add(file, name, t);
  }
  // torch.save's pickles (an OrderedDict of tensors) are Python objects LibTorch's C++ unpickler does not rebuild;
  // PyTorch itself rewrites them as safetensors (weights_only: no code in the file runs).
  void add_pickle(const fs::path& file, const std::string& python) {
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

  std::vector<std::string> files_;
  std::map<std::string, std::pair<std::string, torch::Tensor>> tensors_;  // name -> (file, tensor)
  std::set<std::string> used_;
};

config::Activation activation_of(const HfConfig& hf) {
  const auto name = hf.get<std::string>("activation_function", "gelu");
  if (name == "relu") return config::Activation::relu;
  if (name == "gelu") return config::Activation::gelu;
  if (name == "swish" || name == "silu") return config::Activation::swish;
  if (name == "quick_gelu") return config::Activation::gelu_sigmoid;
  hf.refuse("activation_function '" + name + "' is not one mtx has (relu, gelu, swish/silu, quick_gelu)");
}

config::Config model_config(const HfConfig& hf, int64_t vocab, const json& generation) {
  if (hf.get<std::string>("model_type", "") != "marian") {
    hf.refuse("model_type '" + hf.get<std::string>("model_type", "") + "' is not MarianMT's ('marian')");
  }
  if (!hf.get<bool>("scale_embedding", false)) hf.refuse("scale_embedding is false; mtx scales embeddings by sqrt(d)");
  for (const char* key : {"normalize_before", "add_final_layer_norm", "normalize_embedding", "layernorm_embedding"}) {
    if (hf.get<bool>(key, false)) hf.refuse(std::string(key) + " is set: mtx's MarianMT is post-norm only");
  }
  if (hf.get<bool>("static_position_embeddings", true) == false) {
    hf.refuse("learned position embeddings: MarianMT's are sinusoidal");
  }
  if (hf.positive("encoder_attention_heads") != hf.positive("decoder_attention_heads")) {
    hf.refuse("encoder_attention_heads and decoder_attention_heads differ; mtx uses one count");
  }
  if (hf.positive("encoder_ffn_dim") != hf.positive("decoder_ffn_dim")) {
    hf.refuse("encoder_ffn_dim and decoder_ffn_dim differ; mtx uses one width");
  }
  config::Config c;
  config::ModelConfig& m = c.model;
  m.d_model = int(hf.positive("d_model"));
  m.heads = int(hf.positive("encoder_attention_heads"));
  m.encoder_layers = int(hf.positive("encoder_layers"));
  m.decoder_layers = int(hf.positive("decoder_layers"));
  m.ffn_dim = int(hf.positive("encoder_ffn_dim"));
  m.dropout = hf.get<double>("dropout", 0.1);
  m.attention_dropout = hf.get<double>("attention_dropout", 0.0);
  m.activation_dropout = hf.get<double>("activation_dropout", 0.0);
  m.max_len = int(hf.positive("max_position_embeddings"));
  m.norm = config::Norm::post;
  m.positions = config::Positions::sinusoidal_halves;
  m.activation = activation_of(hf);
  m.share_embeddings = hf.get<bool>("share_encoder_decoder_embeddings", true);
  m.tie_output = hf.get<bool>("tie_word_embeddings", true);
  m.output_bias = m.tie_output;  // final_logits_bias; an untied projection has its own bias
  c.tokenizer.joint = false;
  c.tokenizer.vocab_size = int(vocab);
  if (generation.is_object() && generation.contains("num_beams") && generation.at("num_beams").is_number_integer()) {
    c.decode.beam = std::max(1, generation.at("num_beams").get<int>());
  }
  config::validate(c);
  return c;
}

// vocab.json as pieces in id order (gaps up to the model's size filled with unused names), plus mtx's start
// piece; and the special ids.
std::pair<std::vector<std::string>, tokenizer::SpecialIds> read_vocabulary(const fs::path& dir, const HfConfig& hf,
                                                                          int64_t rows) {
  const fs::path path = dir / "vocab.json";
  const json vocab = read_json(path);
  if (!vocab.is_object()) throw DataError(path.string() + ": not a JSON object of pieces and ids");
  std::vector<std::string> pieces(static_cast<size_t>(rows));
  std::vector<bool> seen(static_cast<size_t>(rows), false);
  for (const auto& [piece, id_json] : vocab.items()) {
    if (!id_json.is_number_integer()) throw DataError(path.string() + ": the id of '" + piece + "' is not an integer");
    const auto id = id_json.get<int64_t>();
    if (id < 0 || id >= rows) {
      throw DataError(path.string() + ": '" + piece + "' has id " + std::to_string(id) + ", outside the model's " +
                      std::to_string(rows) + " embedding rows (config.json's vocab_size)");
    }
    if (seen[size_t(id)]) throw DataError(path.string() + ": id " + std::to_string(id) + " is given twice");
    seen[size_t(id)] = true;
    pieces[size_t(id)] = piece;
  }
  for (int64_t i = 0; i < rows; ++i) {
    if (!seen[size_t(i)]) pieces[size_t(i)] = "<mtx-unused-" + std::to_string(i) + ">";
  }
  tokenizer::SpecialIds ids;
  if (!vocab.contains("<unk>")) throw DataError(path.string() + ": no '<unk>' piece");
  ids.unk = vocab.at("<unk>").get<int32_t>();
  ids.pad = hf.id("pad_token_id");
  ids.eos = hf.id("eos_token_id");
  ids.bos = int32_t(rows);  // mtx's start piece, appended
  const bool taken = vocab.contains("<s>");
  pieces.push_back(taken ? "<mtx-start>" : "<s>");
  return {std::move(pieces), ids};
}

}  // namespace

Imported import_hf(const fs::path& dir, const ImportOptions& options) {
  if (!fs::is_directory(dir)) throw DataError(dir.string() + ": not a directory (a Hugging Face MarianMT model)");
  const HfConfig hf(dir / "config.json");
  if (fs::exists(dir / "tokenizer_config.json") &&
      read_json(dir / "tokenizer_config.json").value("separate_vocabs", false)) {
    throw DataError((dir / "tokenizer_config.json").string() +
                    ": separate_vocabs: separate source and target vocabularies are not supported (one vocab.json)");
  }
  const int64_t rows = hf.positive("vocab_size");
  if (hf.has("decoder_vocab_size") && hf.get<int64_t>("decoder_vocab_size") != rows) {
    hf.refuse("decoder_vocab_size differs from vocab_size: separate vocabularies are not supported");
  }
  const json generation = fs::exists(dir / "generation_config.json") ? read_json(dir / "generation_config.json") : json();
  Imported out;
  Bundle& b = out.bundle;
  b.config = model_config(hf, rows + 1, generation);
  auto [pieces, ids] = read_vocabulary(dir, hf, rows);
  const int32_t start = hf.has("decoder_start_token_id") ? hf.id("decoder_start_token_id") : ids.pad;
  if (start < 0 || start >= rows) hf.refuse("decoder_start_token_id " + std::to_string(start) + " is outside the vocabulary");
  auto side = [&](const char* file) {
    return tokenizer::VocabModel::create(tokenizer::SpmModel::from_bytes(read_file(dir / file)), pieces, ids);
  };
  b.tokenizer = tokenizer::Tokenizer::from_bytes(side("source.spm")->bytes(), side("target.spm")->bytes());
  b.model = build_model(b.config, *b.tokenizer);
  b.model->eval();

  HfWeights w(dir, options.python);
  const config::ModelConfig& m = b.config.model;
  const int64_t d = m.d_model, f = m.ffn_dim;
  std::map<std::string, torch::Tensor> params;
  for (const auto& p : b.model->named_parameters()) params.emplace(p.key(), p.value());
  std::set<std::string> filled;
  torch::NoGradGuard no_grad;
  auto put = [&](const std::string& name, const torch::Tensor& value) {
    const auto it = params.find(name);
    TORCH_CHECK(it != params.end(), "import: mtx's model has no parameter ", name);
    TORCH_CHECK(it->second.sizes() == value.sizes(), "import: ", name, " is ", it->second.sizes(), ", not ",
                value.sizes());
    it->second.copy_(value);
    filled.insert(name);
  };
  auto linear = [&](const std::string& to, const std::string& from, int64_t out_dim, int64_t in_dim) {
    put(to + ".weight", w.take(from + ".weight", {out_dim, in_dim}));
    put(to + ".bias", w.take(from + ".bias", {out_dim}));
  };
  auto norm = [&](const std::string& to, const std::string& from) {
    put(to + ".weight", w.take(from + ".weight", {d}));
    put(to + ".bias", w.take(from + ".bias", {d}));
  };
  auto fused = [&](const std::string& to, const std::string& from, std::vector<const char*> parts) {
    std::vector<torch::Tensor> weights, biases;
    for (const char* p : parts) {
      weights.push_back(w.take(from + "." + p + "_proj.weight", {d, d}));  // [d, d]
      biases.push_back(w.take(from + "." + p + "_proj.bias", {d}));        // [d]
    }
    put(to + ".weight", torch::cat(weights, 0));  // [parts * d, d]
    put(to + ".bias", torch::cat(biases, 0));      // [parts * d]
  };
  for (int64_t i = 0; i < m.encoder_layers; ++i) {
    const std::string to = "encoder." + std::to_string(i), from = "model.encoder.layers." + std::to_string(i);
    fused(to + ".self_attn.qkv", from + ".self_attn", {"q", "k", "v"});
    linear(to + ".self_attn.out", from + ".self_attn.out_proj", d, d);
    norm(to + ".norm1", from + ".self_attn_layer_norm");
    linear(to + ".ffn.fc1", from + ".fc1", f, d);
    linear(to + ".ffn.fc2", from + ".fc2", d, f);
    norm(to + ".norm2", from + ".final_layer_norm");
  }
  for (int64_t i = 0; i < m.decoder_layers; ++i) {
    const std::string to = "decoder." + std::to_string(i), from = "model.decoder.layers." + std::to_string(i);
    fused(to + ".self_attn.qkv", from + ".self_attn", {"q", "k", "v"});
    linear(to + ".self_attn.out", from + ".self_attn.out_proj", d, d);
    norm(to + ".norm1", from + ".self_attn_layer_norm");
    fused(to + ".cross_attn.q", from + ".encoder_attn", {"q"});
    fused(to + ".cross_attn.kv", from + ".encoder_attn", {"k", "v"});
    linear(to + ".cross_attn.out", from + ".encoder_attn.out_proj", d, d);
    norm(to + ".norm2", from + ".encoder_attn_layer_norm");
    linear(to + ".ffn.fc1", from + ".fc1", f, d);
    linear(to + ".ffn.fc2", from + ".fc2", d, f);
    norm(to + ".norm3", from + ".final_layer_norm");
  }

  // Embeddings and the output layer, each with the start piece's row appended (import.h).
  auto with_start_row = [&](const torch::Tensor& table) {
    return torch::cat({table, table.narrow(0, start, 1)}, 0);  // [rows + 1, ...]
  };
  auto first_of = [&](std::initializer_list<const char*> names) -> std::string {
    for (const char* n : names) {
      if (w.has(n)) return n;
    }
    return *names.begin();
  };
  const std::string src_name = first_of({"model.shared.weight", "model.encoder.embed_tokens.weight"});
  const torch::Tensor src_embed = w.take(src_name, {rows, d});  // [rows, d]
  torch::Tensor tgt_embed = src_embed;
  if (m.share_embeddings) {
    for (const char* tied : {"model.shared.weight", "model.encoder.embed_tokens.weight",
                             "model.decoder.embed_tokens.weight"}) {
      w.skip(tied);
    }
  } else {
    tgt_embed = w.take("model.decoder.embed_tokens.weight", {rows, d});  // [rows, d]
    if (src_name != "model.shared.weight") w.skip("model.shared.weight");
  }
  put("src_embed.weight", with_start_row(src_embed));
  if (!m.share_embeddings) put("tgt_embed.weight", with_start_row(tgt_embed));
  torch::Tensor bias = w.has("final_logits_bias") ? w.take("final_logits_bias", {1, rows}).view({rows})  // [rows]
                                                  : torch::zeros({rows});
  bias = with_start_row(bias);  // [rows + 1]
  bias[rows] -= kStartBiasOffset;
  if (m.tie_output) {
    w.skip("lm_head.weight");
    put("output_bias", bias);
  } else {
    put("output.weight", with_start_row(w.take("lm_head.weight", {rows, d})));
    put("output.bias", bias);
  }
  // MarianMT computes its position tables (files may hold a copy): sines, then cosines, of the same waves as
  // mtx's sinusoidal_halves.
  for (const char* table : {"model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"}) {
    if (!w.has(table)) continue;
    const torch::Tensor theirs = w.take(table, {m.max_len, d});
    const torch::Tensor ours = b.model->positions->table;
    const double diff = (theirs - ours).abs().max().item<double>();
    if (diff > 1e-5) {
      throw DataError(std::string(table) + " differs from MarianMT's sinusoid by " + std::to_string(diff) +
                      ": positions mtx cannot reproduce");
    }
  }
  w.check_all_used();
  for (const auto& [name, value] : params) {
    TORCH_CHECK(filled.count(name), "import: mtx's parameter ", name, " was left unset");
  }
  b.weights_sha256 = weights_sha256(b.model);
  b.path = dir;
  out.notes.push_back("the vocabulary gains '" + pieces.back() + "' (id " + std::to_string(ids.bos) +
                      "): mtx's decoder start, MarianMT's id " + std::to_string(start) + " in all but its name");
  if (fs::exists(dir / "tokenizer_config.json") &&
      !read_json(dir / "tokenizer_config.json").value("source_lang", std::string()).empty()) {
    out.notes.push_back(
        "MarianTokenizer's Moses punctuation normalisation (sacremoses) is not applied; sentencepiece's is");
  }
  return out;
}

}  // namespace mtx::bundle
