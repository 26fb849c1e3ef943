// import_hf: a Hugging Face MarianMT directory as an mtx bundle (bundle/import.h).
#include "mtx/bundle/import.h"

#include <torch/torch.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <type_traits>

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

// The JSON type a C++ type reads from, for errors.
template <class T>
const char* json_type_name() {
  if constexpr (std::is_same_v<T, bool>)
    return "true or false";
  else if constexpr (std::is_integral_v<T>)
    return "an integer";
  else if constexpr (std::is_floating_point_v<T>)
    return "a number";
  else if constexpr (std::is_same_v<T, std::string>)
    return "a string";
  else
    return "another type";
}

// One JSON object from a file of a Hugging Face directory (config.json, tokenizer_config.json,
// generation_config.json, model.safetensors.index.json), each value named in errors by file and key. A null is
// absent, as transformers writes unset values (`"source_lang": null`): get(key, fallback) gives the fallback. A
// value of another type is a DataError "FILE: 'KEY' is TYPE, not VALUE", never a bare JSON exception.
class JsonFile {
 public:
  explicit JsonFile(fs::path path) : path_(std::move(path)), doc_(read_json(path_)) {
    if (!doc_.is_object()) throw DataError(path_.string() + ": not a JSON object");
  }
  // The file if it exists, else an empty object (every key absent).
  static JsonFile optional(const fs::path& path) { return fs::exists(path) ? JsonFile(path) : JsonFile(path, {}); }
  const fs::path& path() const { return path_; }
  bool has(const char* key) const { return doc_.contains(key) && !doc_.at(key).is_null(); }
  template <class T>
  T get(const char* key) const {
    if (!has(key)) throw DataError(path_.string() + ": '" + key + "' is missing");
    return as<T>(doc_.at(key), key);
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
    if (has(key) && doc_.at(key).is_array() && !doc_.at(key).empty()) return as<int32_t>(doc_.at(key).at(0), key);
    return get<int32_t>(key);
  }
  // An object of string values (model.safetensors.index.json's weight_map), names to values.
  std::map<std::string, std::string> strings(const char* key) const {
    if (!has(key) || !doc_.at(key).is_object()) {
      throw DataError(path_.string() + ": '" + key + "' is " + (has(key) ? "not an object" : "missing"));
    }
    std::map<std::string, std::string> out;
    for (const auto& [name, value] : doc_.at(key).items()) {
      out[name] = as<std::string>(value, std::string(key) + "." + name);
    }
    return out;
  }
  [[noreturn]] void refuse(const std::string& what) const { throw DataError(path_.string() + ": " + what); }

 private:
  JsonFile(fs::path path, json doc) : path_(std::move(path)), doc_(std::move(doc)) {}
  template <class T>
  T as(const json& value, const std::string& key) const {
    const bool fits = std::is_same_v<T, bool>          ? value.is_boolean()
                      : std::is_integral_v<T>          ? value.is_number_integer()
                      : std::is_floating_point_v<T>    ? value.is_number()
                      : std::is_same_v<T, std::string> ? value.is_string()
                                                       : true;
    try {
      if (fits) return value.get<T>();
    } catch (const json::exception&) {
    }
    std::string shown = value.dump();
    if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
    throw DataError(path_.string() + ": '" + key + "' must be " + json_type_name<T>() + ", not " + shown);
  }

  fs::path path_;
  json doc_;
};
using HfConfig = JsonFile;  // config.json

// A checkpoint's tensors by name, with the file they came from; each is taken once.
class Weights {
 public:
  // `config` names what gives the expected shapes in errors (e.g. "config.json").
  explicit Weights(std::string config) : config_(std::move(config)) {}
  bool has(const std::string& name) const { return tensors_.count(name) > 0; }
  // The tensor as float, checked against the shape config.json implies.
  torch::Tensor take(const std::string& name, std::vector<int64_t> shape) {
    const auto it = tensors_.find(name);
    if (it == tensors_.end()) throw DataError(where() + ": parameter '" + name + "' is missing");
    torch::Tensor t = it->second.second;
    if (t.sizes() != torch::IntArrayRef(shape)) {
      throw DataError(it->second.first + ": parameter '" + name + "' has shape " + shape_of(t.sizes()) + "; " +
                      config_ + "'s sizes need " + shape_of(shape));
    }
    if (!t.is_floating_point()) throw DataError(it->second.first + ": parameter '" + name + "' is not floating point");
    used_.insert(name);
    return t.to(torch::kFloat).contiguous();
  }
  // A tensor as stored (no shape or type check), marked as taken.
  torch::Tensor take_raw(const std::string& name) {
    used_.insert(name);
    return tensors_.at(name).second;
  }
  // Marks a tensor as accounted for (a tied copy, a table mtx computes alike).
  void skip(const std::string& name) { used_.insert(name); }
  // Every tensor must have been taken: one mtx has no place for means an architecture it cannot run (`what`
  // names it from the parameter's name, where it can).
  void check_all_used(const std::function<std::string(const std::string&)>& what) const {
    for (const auto& [name, entry] : tensors_) {
      if (!used_.count(name)) {
        throw DataError(entry.first + ": parameter '" + name + "' has no place in mtx's Transformer (" + what(name) +
                        ")");
      }
    }
  }
  void add(const fs::path& file, std::string name, torch::Tensor t) {
    if (!tensors_.emplace(name, std::make_pair(file.string(), std::move(t))).second) {
      throw DataError(file.string() + ": parameter '" + name + "' appears twice");
    }
  }
  void add_npz(const fs::path& file) {
    files_.push_back(file.string());
    for (auto& [name, t] : read_npz(file)) add(file, name, t);
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

 private:
  std::string where() const { return files_.empty() ? "weights" : files_.front(); }
  std::string config_;
  std::vector<std::string> files_;
  std::map<std::string, std::pair<std::string, torch::Tensor>> tensors_;  // name -> (file, tensor)
  std::set<std::string> used_;
};

// A MarianMT directory's weights: model.safetensors, a sharded index, or pytorch_model.bin.
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

// mtx's parameters, each filled once from the imported ones.
class Filler {
 public:
  explicit Filler(model::Transformer& model) {
    for (const auto& p : model->named_parameters()) params_.emplace(p.key(), p.value());
  }
  void put(const std::string& name, const torch::Tensor& value) {
    const auto it = params_.find(name);
    TORCH_CHECK(it != params_.end(), "import: mtx's model has no parameter ", name);
    TORCH_CHECK(it->second.sizes() == value.sizes(), "import: ", name, " is ", it->second.sizes(), ", not ",
                value.sizes());
    torch::NoGradGuard no_grad;
    it->second.copy_(value);
    filled_.insert(name);
  }
  void check_all_filled() const {
    for (const auto& [name, value] : params_) {
      TORCH_CHECK(filled_.count(name), "import: mtx's parameter ", name, " was left unset");
    }
  }

 private:
  std::map<std::string, torch::Tensor> params_;
  std::set<std::string> filled_;
};

config::Activation activation_of(const HfConfig& hf) {
  const auto name = hf.get<std::string>("activation_function", "gelu");
  if (name == "relu") return config::Activation::relu;
  if (name == "gelu") return config::Activation::gelu;
  if (name == "swish" || name == "silu") return config::Activation::swish;
  if (name == "quick_gelu") return config::Activation::gelu_sigmoid;
  hf.refuse("activation_function '" + name + "' is not one mtx has (relu, gelu, swish/silu, quick_gelu)");
}

config::Config model_config(const HfConfig& hf, int64_t vocab, const JsonFile& generation) {
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
  c.decode.beam = std::max(1, generation.get<int>("num_beams", c.decode.beam));
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
  const JsonFile tokenizer_config = JsonFile::optional(dir / "tokenizer_config.json");
  if (tokenizer_config.get<bool>("separate_vocabs", false)) {
    tokenizer_config.refuse(
        "separate_vocabs: separate source and target vocabularies are not supported (one vocab.json)");
  }
  const int64_t rows = hf.positive("vocab_size");
  if (hf.has("decoder_vocab_size") && hf.get<int64_t>("decoder_vocab_size") != rows) {
    hf.refuse("decoder_vocab_size differs from vocab_size: separate vocabularies are not supported");
  }
  const JsonFile generation = JsonFile::optional(dir / "generation_config.json");
  Imported out;
  Bundle& b = out.bundle;
  b.config = model_config(hf, rows + 1, generation);
  // Not a structured binding: lambdas below capture these (C++17).
  auto vocabulary = read_vocabulary(dir, hf, rows);
  const std::vector<std::string>& pieces = vocabulary.first;
  const tokenizer::SpecialIds ids = vocabulary.second;
  const int32_t start = hf.has("decoder_start_token_id") ? hf.id("decoder_start_token_id") : ids.pad;
  if (start < 0 || start >= rows)
    hf.refuse("decoder_start_token_id " + std::to_string(start) + " is outside the vocabulary");
  auto side = [&](const char* file) {
    return tokenizer::VocabModel::create(tokenizer::SpmModel::from_bytes(read_file(dir / file)), pieces, ids);
  };
  b.tokenizer = tokenizer::Tokenizer::from_bytes(side("source.spm")->bytes(), side("target.spm")->bytes());
  b.model = build_model(b.config, *b.tokenizer);
  b.model->eval();

  Weights w = hf_weights(dir, options.python);
  const config::ModelConfig& m = b.config.model;
  const int64_t d = m.d_model, f = m.ffn_dim;
  Filler target(b.model);
  torch::NoGradGuard no_grad;
  auto put = [&](const std::string& name, const torch::Tensor& value) { target.put(name, value); };
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
    put(to + ".bias", torch::cat(biases, 0));     // [parts * d]
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
    for (const char* tied :
         {"model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"}) {
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
  w.check_all_used([](const std::string&) { return "a layer of an architecture mtx cannot run"; });
  target.check_all_filled();
  b.weights_sha256 = weights_sha256(b.model);
  b.path = dir;
  out.notes.push_back("the vocabulary gains '" + pieces.back() + "' (id " + std::to_string(ids.bos) +
                      "): mtx's decoder start, MarianMT's id " + std::to_string(start) + " in all but its name");
  if (!tokenizer_config.get<std::string>("source_lang", "").empty()) {
    out.notes.push_back(
        "MarianTokenizer's Moses punctuation normalisation (sacremoses) is not applied; sentencepiece's is");
  }
  return out;
}

namespace {

// The logit bias of the pieces mtx adds to a Marian vocabulary (<pad> and the decoder start, both with zero
// embeddings): far below any real logit, so Marian's log-probabilities hold to float precision, and finite, so
// label smoothing stays finite when the model is fine-tuned.
constexpr double kAddedPieceBias = -100;

YAML::Node read_yaml(const fs::path& path, const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw DataError(path.string() + ": not YAML (" + std::string(e.what()).substr(0, 120) + ")");
  }
}

// Marian's model.yml (stored in the .npz as "special:model.yml") or decoder.yml: values named in errors.
class MarianYaml {
 public:
  MarianYaml(std::string where, YAML::Node node) : where_(std::move(where)), node_(std::move(node)) {
    if (!node_.IsMap()) throw DataError(where_ + ": not a YAML map of options");
  }
  // A key set to null (`key:` or `key: ~`) is absent, as in Marian's own option parsing.
  bool has(const char* key) const { return node_[key] && !node_[key].IsNull(); }
  template <class T>
  T get(const char* key, T fallback) const {
    if (!has(key)) return fallback;
    try {
      return node_[key].as<T>();
    } catch (const YAML::Exception&) {
      std::string shown = YAML::Dump(node_[key]);
      std::replace(shown.begin(), shown.end(), '\n', ' ');
      if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
      throw DataError(where_ + ": '" + key + "' must be " + json_type_name<T>() + ", not " + shown);
    }
  }
  std::vector<std::string> list(const char* key) const {
    if (!has(key)) return {};
    try {
      return node_[key].as<std::vector<std::string>>();
    } catch (const YAML::Exception&) {
      throw DataError(where_ + ": '" + key + "' is not a list");
    }
  }
  [[noreturn]] void refuse(const std::string& what) const { throw DataError(where_ + ": " + what); }

 private:
  std::string where_;
  YAML::Node node_;
};

// Why a Marian parameter has no place in mtx's Transformer, from its name.
std::string marian_architecture(const std::string& name) {
  if (name.find("_rnn_") != std::string::npos) return "an RNN/SSRU decoder layer (transformer-decoder-autoreg: rnn)";
  if (name.find("_aan_") != std::string::npos) return "an average-attention decoder layer";
  if (name.find("Wpos") != std::string::npos) return "learned positions";
  if (name.find("_emb_ln") != std::string::npos) return "a layer norm on the embeddings";
  if (name.find("_top_ln") != std::string::npos || name.find("_pre") != std::string::npos) return "a pre-norm layer";
  if (name.find("factor") != std::string::npos || name.find("lemma") != std::string::npos) return "factored vocabulary";
  return "a layer of an architecture mtx cannot run";
}

config::Activation marian_activation(const MarianYaml& y) {
  const auto name = y.get<std::string>("transformer-ffn-activation", "swish");
  if (name == "swish") return config::Activation::swish;
  if (name == "relu") return config::Activation::relu;
  if (name == "gelu") return config::Activation::gelu_sigmoid;  // Marian's gelu: x sigmoid(1.702 x)
  y.refuse("transformer-ffn-activation '" + name + "' is not one mtx has (swish, relu, gelu)");
}

// The model's settings from model.yml; refuses what mtx's Transformer does not compute.
config::Config marian_config(const MarianYaml& y) {
  if (y.get<std::string>("type", "transformer") != "transformer") {
    y.refuse("type '" + y.get<std::string>("type", "") + "' is not 'transformer'");
  }
  const auto autoreg = y.get<std::string>("transformer-decoder-autoreg", "self-attention");
  if (autoreg != "self-attention") {
    y.refuse("transformer-decoder-autoreg '" + autoreg + "': mtx's decoder is self-attention only" +
             (autoreg == "rnn" ? " (not an SSRU/RNN decoder)" : ""));
  }
  if (y.get<std::string>("transformer-preprocess", "") != "" ||
      y.get<std::string>("transformer-postprocess", "dan") != "dan") {
    y.refuse("transformer-preprocess '" + y.get<std::string>("transformer-preprocess", "") +
             "' / transformer-postprocess '" + y.get<std::string>("transformer-postprocess", "dan") +
             "': mtx imports Marian's post-norm ('' / 'dan') only");
  }
  const auto emb = y.get<std::string>("transformer-postprocess-emb", "d");
  if (emb != "d" && !emb.empty())
    y.refuse("transformer-postprocess-emb '" + emb + "': mtx has no embedding layer norm");
  if (!y.get<std::string>("transformer-postprocess-top", "").empty()) y.refuse("transformer-postprocess-top is set");
  if (y.get<int>("transformer-ffn-depth", 2) != 2 || y.get<int>("transformer-decoder-ffn-depth", 0) > 2 ||
      y.get<int>("transformer-decoder-ffn-depth", 0) == 1) {
    y.refuse("transformer-ffn-depth other than 2: mtx's feed-forward blocks have two layers");
  }
  if (y.get<bool>("right-left", false)) y.refuse("right-left: a right-to-left model");
  if (y.get<int>("lemma-dim-emb", 0) != 0) y.refuse("lemma-dim-emb: factored vocabularies are not supported");
  if (y.get<bool>("transformer-no-projection", false)) y.refuse("transformer-no-projection is set");
  if (!y.list("transformer-tied-layers").empty()) y.refuse("transformer-tied-layers: tied layers are not supported");
  config::Config c;
  config::ModelConfig& m = c.model;
  m.d_model = y.get<int>("dim-emb", 512);
  m.heads = y.get<int>("transformer-heads", 8);
  m.encoder_layers = y.get<int>("enc-depth", 6);
  m.decoder_layers = y.get<int>("dec-depth", 6);
  m.ffn_dim = y.get<int>("transformer-dim-ffn", 2048);
  const int dec_ffn = y.get<int>("transformer-decoder-dim-ffn", 0);
  if (dec_ffn != 0 && dec_ffn != m.ffn_dim) y.refuse("transformer-decoder-dim-ffn differs from transformer-dim-ffn");
  m.dropout = y.get<double>("transformer-dropout", 0.1);
  m.attention_dropout = y.get<double>("transformer-dropout-attention", 0.0);
  m.activation_dropout = y.get<double>("transformer-dropout-ffn", 0.0);
  m.max_len = 512;
  m.norm = config::Norm::post;
  m.positions = config::Positions::sinusoidal_marian;
  m.activation = marian_activation(y);
  m.layer_norm_eps = 1e-6;
  const bool all = y.get<bool>("tied-embeddings-all", false);
  m.share_embeddings = all || y.get<bool>("tied-embeddings-src", false);
  m.tie_output = all || y.get<bool>("tied-embeddings", false);
  m.output_bias = m.tie_output;
  c.tokenizer.joint = false;
  c.decode.allow_unk = false;  // Marian never generates <unk> unless --allow-unk
  return c;
}

// A vocabulary file named in decoder.yml: Marian's .yml (piece: id) or a sentencepiece model (its pieces).
std::vector<std::string> marian_vocabulary(const fs::path& path) {
  const std::string text = read_file(path);
  const std::string ext = path.extension().string();
  if (ext == ".spm" || ext == ".model") {
    auto spm = tokenizer::SpmModel::from_bytes(text);
    std::vector<std::string> pieces;
    for (int32_t i = 0; i < spm->vocab_size(); ++i) pieces.push_back(spm->piece(i));
    return pieces;
  }
  const YAML::Node node = read_yaml(path, text);
  if (!node.IsMap()) throw DataError(path.string() + ": not a YAML map of pieces to ids");
  std::vector<std::string> pieces(node.size());
  std::vector<bool> seen(node.size(), false);
  for (const auto& entry : node) {
    std::string piece;
    int64_t id = -1;
    try {
      piece = entry.first.as<std::string>();
      id = entry.second.as<int64_t>();
    } catch (const YAML::Exception&) {
      throw DataError(path.string() + ": an entry is not 'piece: id'");
    }
    if (id < 0 || id >= int64_t(pieces.size()) || seen[size_t(id)]) {
      throw DataError(path.string() + ": '" + piece + "' has id " + std::to_string(id) + " (ids must be 0.." +
                      std::to_string(pieces.size() - 1) + ", each once)");
    }
    seen[size_t(id)] = true;
    pieces[size_t(id)] = piece;
  }
  return pieces;
}

}  // namespace

Imported import_marian(const fs::path& npz, const fs::path& decoder_yml) {
  const fs::path dir = decoder_yml.parent_path();
  const MarianYaml decoder(decoder_yml.string(), read_yaml(decoder_yml, read_file(decoder_yml)));
  Weights w("model.yml");
  w.add_npz(npz);
  if (!w.has("special:model.yml")) {
    throw DataError(npz.string() + ": no 'special:model.yml' (not a Marian model, or one saved without its options)");
  }
  const torch::Tensor yml = w.take_raw("special:model.yml");
  std::string yml_text(reinterpret_cast<const char*>(yml.data_ptr()), size_t(yml.numel()) * yml.element_size());
  yml_text = yml_text.substr(0, yml_text.find('\0'));
  const MarianYaml model_yml(npz.string() + ": special:model.yml", read_yaml(npz, yml_text));

  // Vocabularies: one map for both sides; source.spm and target.spm beside decoder.yml cut the text.
  const auto vocab_files = decoder.list("vocabs");
  if (vocab_files.size() != 2) decoder.refuse("'vocabs' must name the source and target vocabularies");
  auto resolve = [&](const std::string& name) { return fs::path(name).is_absolute() ? fs::path(name) : dir / name; };
  std::vector<std::string> pieces = marian_vocabulary(resolve(vocab_files[0]));
  if (resolve(vocab_files[1]) != resolve(vocab_files[0]) && marian_vocabulary(resolve(vocab_files[1])) != pieces) {
    decoder.refuse("the source and target vocabularies differ: separate vocabularies are not supported");
  }
  const auto rows = int64_t(pieces.size());
  auto index_of = [&](const std::string& piece, const fs::path& where) {
    const auto it = std::find(pieces.begin(), pieces.end(), piece);
    if (it == pieces.end()) throw DataError(where.string() + ": no '" + piece + "' piece");
    return int32_t(it - pieces.begin());
  };
  tokenizer::SpecialIds ids;
  ids.eos = index_of("</s>", resolve(vocab_files[0]));
  ids.unk = index_of("<unk>", resolve(vocab_files[0]));
  ids.pad = int32_t(rows);
  ids.bos = int32_t(rows + 1);
  for (const char* piece : {"<pad>", "<s>"}) {
    const bool taken = std::find(pieces.begin(), pieces.end(), piece) != pieces.end();
    pieces.push_back(taken ? std::string("<mtx-") + (piece[1] == 'p' ? "pad>" : "start>") : piece);
  }
  auto spm_for = [&](const std::string& vocab, const char* fallback) {
    const fs::path v = resolve(vocab);
    const std::string ext = v.extension().string();
    return (ext == ".spm" || ext == ".model") ? v : dir / fallback;
  };
  auto side = [&](const fs::path& spm) {
    return tokenizer::VocabModel::create(tokenizer::SpmModel::from_bytes(read_file(spm)), pieces, ids);
  };

  Imported out;
  Bundle& b = out.bundle;
  b.config = marian_config(model_yml);
  b.config.tokenizer.vocab_size = int(rows + 2);
  b.config.decode.beam = std::max(1, decoder.get<int>("beam-size", b.config.decode.beam));
  b.config.decode.allow_unk = decoder.get<bool>("allow-unk", false);
  config::validate(b.config);
  b.tokenizer = tokenizer::Tokenizer::from_bytes(side(spm_for(vocab_files[0], "source.spm"))->bytes(),
                                                 side(spm_for(vocab_files[1], "target.spm"))->bytes());
  b.model = build_model(b.config, *b.tokenizer);
  b.model->eval();

  const config::ModelConfig& m = b.config.model;
  const int64_t d = m.d_model, f = m.ffn_dim;
  Filler target(b.model);
  torch::NoGradGuard no_grad;
  // Marian's matrices are [in, out] (y = x W + b); mtx's Linear holds [out, in]. Biases and norms are [1, n].
  auto matrix = [&](const std::string& name, int64_t in, int64_t out_dim) { return w.take(name, {in, out_dim}).t(); };
  auto vector = [&](const std::string& name, int64_t n) { return w.take(name, {1, n}).view({n}); };
  auto linear = [&](const std::string& to, const std::string& from, const char* suffix, int64_t in, int64_t out_dim) {
    target.put(to + ".weight", matrix(from + "_W" + suffix, in, out_dim));
    target.put(to + ".bias", vector(from + "_b" + suffix, out_dim));
  };
  auto norm = [&](const std::string& to, const std::string& from) {
    target.put(to + ".weight", vector(from + "_ln_scale", d));
    target.put(to + ".bias", vector(from + "_ln_bias", d));
  };
  auto fused = [&](const std::string& to, const std::string& from, std::vector<const char*> parts) {
    std::vector<torch::Tensor> weights, biases;
    for (const char* p : parts) {
      weights.push_back(matrix(from + "_W" + p, d, d));  // [d, d]
      biases.push_back(vector(from + "_b" + p, d));      // [d]
    }
    target.put(to + ".weight", torch::cat(weights, 0));  // [parts * d, d]
    target.put(to + ".bias", torch::cat(biases, 0));     // [parts * d]
  };
  auto ffn = [&](const std::string& to, const std::string& from) {
    linear(to + ".ffn.fc1", from + "_ffn", "1", d, f);
    linear(to + ".ffn.fc2", from + "_ffn", "2", f, d);
  };
  for (int64_t i = 0; i < m.encoder_layers; ++i) {
    const std::string to = "encoder." + std::to_string(i), from = "encoder_l" + std::to_string(i + 1);
    fused(to + ".self_attn.qkv", from + "_self", {"q", "k", "v"});
    linear(to + ".self_attn.out", from + "_self", "o", d, d);
    norm(to + ".norm1", from + "_self_Wo");
    ffn(to, from);
    norm(to + ".norm2", from + "_ffn_ffn");
  }
  for (int64_t i = 0; i < m.decoder_layers; ++i) {
    const std::string to = "decoder." + std::to_string(i), from = "decoder_l" + std::to_string(i + 1);
    fused(to + ".self_attn.qkv", from + "_self", {"q", "k", "v"});
    linear(to + ".self_attn.out", from + "_self", "o", d, d);
    norm(to + ".norm1", from + "_self_Wo");
    fused(to + ".cross_attn.q", from + "_context", {"q"});
    fused(to + ".cross_attn.kv", from + "_context", {"k", "v"});
    linear(to + ".cross_attn.out", from + "_context", "o", d, d);
    norm(to + ".norm2", from + "_context_Wo");
    ffn(to, from);
    norm(to + ".norm3", from + "_ffn_ffn");
  }
  // Embeddings with zero rows for <pad> and the decoder start (Marian starts from a zero vector).
  auto with_added_rows = [&](const torch::Tensor& table) {
    return torch::cat({table, torch::zeros({2, table.size(1)})}, 0);  // [rows + 2, d]
  };
  const torch::Tensor src_embed = w.take(m.share_embeddings ? "Wemb" : "encoder_Wemb", {rows, d});  // [rows, d]
  target.put("src_embed.weight", with_added_rows(src_embed));
  torch::Tensor tgt_embed = src_embed;
  if (!m.share_embeddings) {
    tgt_embed = w.take("decoder_Wemb", {rows, d});  // [rows, d]
    target.put("tgt_embed.weight", with_added_rows(tgt_embed));
  }
  torch::Tensor bias = w.has("decoder_ff_logit_out_b") ? vector("decoder_ff_logit_out_b", rows) : torch::zeros({rows});
  bias = torch::cat({bias, torch::full({2}, kAddedPieceBias)});  // [rows + 2]
  if (m.tie_output) {
    target.put("output_bias", bias);
  } else {
    const torch::Tensor out_w = w.has("decoder_ff_logit_out_W") ? matrix("decoder_ff_logit_out_W", d, rows)  // legacy
                                                                : w.take("decoder_ff_logit_out_Wt", {rows, d});
    target.put("output.weight", with_added_rows(out_w));
    target.put("output.bias", bias);
  }
  w.check_all_used(marian_architecture);
  target.check_all_filled();
  b.weights_sha256 = weights_sha256(b.model);
  b.path = npz;
  out.notes.push_back("the vocabulary gains '" + pieces[size_t(rows)] + "' and '" + pieces[size_t(rows + 1)] +
                      "' (ids " + std::to_string(rows) + ", " + std::to_string(rows + 1) +
                      "): mtx's padding and Marian's zero-vector decoder start");
  if (decoder.has("normalize")) {
    out.notes.push_back("decoder.yml's normalize (Marian's score / length^a) is not carried: mtx's alpha is GNMT's");
  }
  if (model_yml.has("transformer-guided-alignment-layer") || model_yml.has("guided-alignment")) {
    out.notes.push_back("guided alignment trains an attention head; it adds no weights: translation is the same");
  }
  return out;
}

}  // namespace mtx::bundle
