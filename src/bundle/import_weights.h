// What the importers share (bundle/import.h): a source model's files and tensors read with errors that name the
// file and the key, mtx's parameters filled once each, and one encoder-decoder mapping (fill_layers) that each
// source format feeds through its Layout. Internal to src/bundle.
#pragma once

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "mtx/bundle/export.h"
#include "mtx/bundle/import.h"
#include "mtx/config/config.h"
#include "mtx/model/transformer.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/errors.h"

namespace mtx::bundle::detail {

namespace fs = std::filesystem;
using json = nlohmann::json;

inline json read_json(const fs::path& path) {
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw DataError(path.string() + ": not JSON (" + std::string(e.what()).substr(0, 120) + ")");
  }
}

inline std::string shape_of(torch::IntArrayRef sizes) {
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

// A source model's tensors by name, with the file they came from; each is taken once.
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
  void add_pickle(const fs::path& file, const std::string& python);

 private:
  std::string where() const { return files_.empty() ? "weights" : files_.front(); }
  std::string config_;
  std::vector<std::string> files_;
  std::map<std::string, std::pair<std::string, torch::Tensor>> tensors_;  // name -> (file, tensor)
  std::set<std::string> used_;
};

// A Hugging Face directory's weights: model.safetensors, a sharded index, or pytorch_model.bin.
Weights hf_weights(const fs::path& dir, const std::string& python);

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

// Where a source format keeps each part of an encoder-decoder layer, by the roles mtx's layers have
// (model/param_names.h): each format (Hugging Face's BART family, Marian's .npz) says it once.
enum class Dense { self_q, self_k, self_v, self_out, cross_q, cross_k, cross_v, cross_out, fc1, fc2 };
enum class Sublayer { self, cross, ffn };  // whose layer norm (Layout::norm)
class Layout {
 public:
  virtual ~Layout() = default;
  // Layer i's (of the decoder's stack, or the encoder's) dense part: its [out, in] weight and [out] bias, taken.
  virtual std::pair<torch::Tensor, torch::Tensor> dense(Weights& w, bool decoder, int64_t i, Dense part, int64_t out,
                                                        int64_t in) const = 0;
  // Its layer norm's [d] weight and bias, taken (Sublayer::self: the SSRU's, in an SSRU decoder).
  virtual std::pair<torch::Tensor, torch::Tensor> norm(Weights& w, bool decoder, int64_t i, Sublayer part,
                                                       int64_t d) const = 0;
  // Decoder layer i's SSRU (model.decoder_autoreg ssru): its [W; W_f] as one [2d, d] weight and [2d] bias (W's
  // half 0 where the format has none), taken. Formats without SSRU decoders never get here.
  virtual std::pair<torch::Tensor, torch::Tensor> ssru(Weights&, int64_t, int64_t) const {
    throw std::logic_error("import: this format has no SSRU decoder");
  }
};

// Every encoder and decoder layer of `m`, from the layout into mtx's parameters (attention projections fused as
// mtx holds them).
void fill_layers(Weights& w, Filler& target, const Layout& layout, const config::ModelConfig& m);

// ---- the import driver (CTranslate2's Converter with its loaders) ----------------------------------------------

// A model's vocabulary as its format's files give it: the pieces in id order (one per embedding row), the special
// ids, the sentencepiece models that cut each side's text, and the language codes of a multilingual model.
struct Vocabulary {
  std::vector<std::string> pieces;
  tokenizer::SpecialIds ids;
  std::string source_spm, target_spm;  // the models' bytes
  tokenizer::Languages languages;      // a multilingual model's codes and their tokens' ids
  bool code_after_eos = false;         // NLLB's legacy source layout (pieces </s> code)
  std::vector<std::string> notes;
};

// The id of `piece`, or a DataError naming `where`.
int32_t id_of(const std::vector<std::string>& pieces, const std::string& piece, const fs::path& where);

// A piece that mtx needs and the model lacks (its padding, its decoder start), appended after the model's rows:
// named `name`, or `taken_name` where the model has that piece already. Its embedding and output rows are row
// `copy_of`'s (-1: zeros), its output bias that row's plus `bias` (or `bias`).
struct AddedPiece {
  std::string name, taken_name;
  int32_t copy_of = -1;
  double bias = 0;
  std::string why;  // for the note: "mtx's decoder start"
};

// The embeddings and output layer a format holds, taken from its weights: [rows, d] tables; `tgt_embed`
// undefined where the decoder shares the source's, `output` undefined where it is tied to the target
// embeddings; `bias` [rows] (undefined: zeros).
struct Embeddings {
  torch::Tensor src_embed, tgt_embed, output, bias;
};

// One format's model, read (`read` of a format in src/bundle/import.cpp's table): its settings, vocabulary and
// weights, and the hooks through which the driver fills mtx's model from them.
class Source {
 public:
  virtual ~Source() = default;
  config::Config config;          // model options and decoding settings; the driver sets the vocabulary size
  Vocabulary vocabulary;          // the model's rows
  std::vector<AddedPiece> added;  // appended in order; `vocabulary.ids` names them where they are special
  std::unique_ptr<Weights> weights;
  std::filesystem::path path;
  std::vector<std::string> notes;
  // Where its layers' parts are.
  virtual const Layout& layout() const = 0;
  // What it holds besides the layers, the embeddings and the output (final norms, positions).
  virtual void fill_rest(Filler& target, model::Transformer& model) = 0;
  // From the weights, for a model of `m`'s width and `rows` pieces (the vocabulary's).
  virtual Embeddings embeddings(Weights& w, const config::ModelConfig& m, int64_t rows) = 0;
  // Why a parameter nobody took has no place in mtx (from its name).
  virtual std::string unplaced(const std::string& name) const = 0;
};

// Builds the bundle from a source, once for every format: its tokenizer (with the added pieces), its model, every
// layer through the source's layout, the rest, the embeddings and output with the added rows; checks that every
// parameter of both sides was used and filled.
Imported build_imported(Source& source);

}  // namespace mtx::bundle::detail
