// import_marian: a Marian .npz model as an mtx bundle (bundle/import.h).
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "import_weights.h"
#include "mtx/bundle/import.h"
#include "mtx/model/param_names.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/errors.h"

namespace mtx::bundle {

using namespace detail;

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
  const auto cell = y.get<std::string>("dec-cell", "gru");
  if (autoreg != "self-attention" && !(autoreg == "rnn" && cell == "ssru")) {
    y.refuse("transformer-decoder-autoreg '" + autoreg + "'" +
             (autoreg == "rnn" ? " with dec-cell '" + cell + "'" : "") +
             ": mtx's decoder layers use self-attention or an SSRU (rnn with dec-cell ssru)");
  }
  if (autoreg == "rnn" && y.get<bool>("layer-normalization", false)) {
    y.refuse("layer-normalization: an SSRU with layer normalization inside is not supported");
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
  if (autoreg == "rnn") m.decoder_autoreg = config::DecoderAutoreg::ssru;
  const bool all = y.get<bool>("tied-embeddings-all", false);
  m.share_embeddings = all || y.get<bool>("tied-embeddings-src", false);
  m.tie_output = all || y.get<bool>("tied-embeddings", false);
  m.output_bias = m.tie_output;
  c.tokenizer.joint = false;
  c.decode.allow_unk = false;  // Marian never generates <unk> unless --allow-unk
  return c;
}

// Marian's names: layer i of a stack is "encoder_l<i + 1>" / "decoder_l<i + 1>"; its matrices are [in, out]
// (y = x W + b), its biases and norms [1, n].
class MarianLayout : public Layout {
 public:
  std::pair<torch::Tensor, torch::Tensor> dense(Weights& w, bool decoder, int64_t i, Dense part, int64_t out,
                                                int64_t in) const override {
    const std::string at = (decoder ? "decoder_l" : "encoder_l") + std::to_string(i + 1);
    std::string block, suffix;
    switch (part) {
      case Dense::self_q:
        block = "_self", suffix = "q";
        break;
      case Dense::self_k:
        block = "_self", suffix = "k";
        break;
      case Dense::self_v:
        block = "_self", suffix = "v";
        break;
      case Dense::self_out:
        block = "_self", suffix = "o";
        break;
      case Dense::cross_q:
        block = "_context", suffix = "q";
        break;
      case Dense::cross_k:
        block = "_context", suffix = "k";
        break;
      case Dense::cross_v:
        block = "_context", suffix = "v";
        break;
      case Dense::cross_out:
        block = "_context", suffix = "o";
        break;
      case Dense::fc1:
        block = "_ffn", suffix = "1";
        break;
      case Dense::fc2:
        block = "_ffn", suffix = "2";
        break;
    }
    return {w.take(at + block + "_W" + suffix, {in, out}).t(),
            w.take(at + block + "_b" + suffix, {1, out}).view({out})};
  }
  explicit MarianLayout(bool ssru = false) : ssru_(ssru) {}
  std::pair<torch::Tensor, torch::Tensor> norm(Weights& w, bool decoder, int64_t i, Sublayer part,
                                               int64_t d) const override {
    const std::string at = (decoder ? "decoder_l" : "encoder_l") + std::to_string(i + 1);
    const char* self = decoder && ssru_ ? "_rnn_ffn" : "_self_Wo";
    const std::string name = at + (part == Sublayer::self    ? self
                                   : part == Sublayer::cross ? "_context_Wo"
                                                             : "_ffn_ffn");
    return {w.take(name + "_ln_scale", {1, d}).view({d}), w.take(name + "_ln_bias", {1, d}).view({d})};
  }
  // decoder_l<i + 1>_rnn_W [d, d] (no bias), _Wf [d, d] and _bf [1, d]: y = x W.
  std::pair<torch::Tensor, torch::Tensor> ssru(Weights& w, int64_t i, int64_t d) const override {
    const std::string at = "decoder_l" + std::to_string(i + 1) + "_rnn";
    return {torch::cat({w.take(at + "_W", {d, d}).t(), w.take(at + "_Wf", {d, d}).t()}, 0),  // [2d, d]
            torch::cat({torch::zeros({d}), w.take(at + "_bf", {1, d}).view({d})})};          // [2d]
  }

 private:
  bool ssru_ = false;
};

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

// A Marian .npz as the import driver reads it: Marian's layout, and its embeddings and output layer (a legacy
// [d, rows] output matrix, or the [rows, d] transposed one). It has nothing besides.
class MarianSource : public Source {
 public:
  const Layout& layout() const override { return layout_; }
  // Once config.model is known: an SSRU decoder's layers have other names.
  void name_layers() { layout_ = MarianLayout(config.model.decoder_autoreg == config::DecoderAutoreg::ssru); }
  void fill_rest(Filler&, model::Transformer&) override {}
  Embeddings embeddings(Weights& w, const config::ModelConfig& m, int64_t rows) override {
    const int64_t d = m.d_model;
    Embeddings e;
    e.src_embed = w.take(m.share_embeddings ? "Wemb" : "encoder_Wemb", {rows, d});  // [rows, d]
    if (!m.share_embeddings) e.tgt_embed = w.take("decoder_Wemb", {rows, d});
    if (w.has("decoder_ff_logit_out_b")) e.bias = w.take("decoder_ff_logit_out_b", {1, rows}).view({rows});
    if (!m.tie_output) {
      e.output = w.has("decoder_ff_logit_out_W") ? w.take("decoder_ff_logit_out_W", {d, rows}).t()  // legacy
                                                 : w.take("decoder_ff_logit_out_Wt", {rows, d});
    }
    return e;
  }
  std::string unplaced(const std::string& name) const override { return marian_architecture(name); }

 private:
  MarianLayout layout_;
};

}  // namespace

Imported import_marian(const fs::path& npz, const fs::path& decoder_yml) {
  const fs::path dir = decoder_yml.parent_path();
  const MarianYaml decoder(decoder_yml.string(), read_yaml(decoder_yml, read_file(decoder_yml)));
  MarianSource source;
  source.weights = std::make_unique<Weights>("model.yml");
  Weights& w = *source.weights;
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
  // Marian reads a relative path from its working directory, or beside decoder.yml with relative-paths: the one
  // that exists, else the file's name beside decoder.yml (a model directory moved since it was trained).
  auto resolve = [&](const std::string& name) {
    const fs::path p(name);
    if (p.is_absolute()) return p;
    std::vector<fs::path> tried = {dir / p, dir / p.filename()};
    if (!decoder.get<bool>("relative-paths", false)) tried.insert(tried.begin(), p);
    for (const fs::path& t : tried) {
      if (fs::exists(t)) return t;
    }
    return tried.front();
  };
  Vocabulary& v = source.vocabulary;
  v.pieces = marian_vocabulary(resolve(vocab_files[0]));
  if (resolve(vocab_files[1]) != resolve(vocab_files[0]) && marian_vocabulary(resolve(vocab_files[1])) != v.pieces) {
    decoder.refuse("the source and target vocabularies differ: separate vocabularies are not supported");
  }
  const auto rows = int64_t(v.pieces.size());
  v.ids.eos = id_of(v.pieces, "</s>", resolve(vocab_files[0]));
  v.ids.unk = id_of(v.pieces, "<unk>", resolve(vocab_files[0]));
  v.ids.pad = int32_t(rows);
  v.ids.bos = int32_t(rows + 1);
  source.added = {{"<pad>", "<mtx-pad>", -1, kAddedPieceBias, "mtx's padding"},
                  {"<s>", "<mtx-start>", -1, kAddedPieceBias, "Marian's zero-vector decoder start"}};
  auto spm_for = [&](const std::string& vocab, const char* fallback) {
    const fs::path p = resolve(vocab);
    const std::string ext = p.extension().string();
    return read_file((ext == ".spm" || ext == ".model") ? p : dir / fallback);
  };
  v.source_spm = spm_for(vocab_files[0], "source.spm");
  v.target_spm = spm_for(vocab_files[1], "target.spm");

  source.config = marian_config(model_yml);
  source.name_layers();
  // Marian's search with decoder.yml's settings, and Marian's defaults where it has none.
  config::DecodeConfig& search = source.config.decode;
  search.beam = std::max(1, decoder.get<int>("beam-size", 12));
  search.alpha = 0;
  search.normalize = decoder.get<double>("normalize", 0.0);
  search.word_penalty = decoder.get<double>("word-penalty", 0.0);
  search.max_length_factor = decoder.get<double>("max-length-factor", 3.0);
  search.shrink_beam = true;
  search.allow_unk = decoder.get<bool>("allow-unk", false);
  search.nbest = std::min(search.nbest, search.beam);
  source.path = npz;
  // (transformer-guided-alignment-layer is written whether or not guided alignment was trained)
  if (model_yml.get<std::string>("guided-alignment", "none") != "none") {
    source.notes.push_back("guided alignment trains an attention head; it adds no weights: translation is the same");
  }
  return build_imported(source);
}

}  // namespace mtx::bundle
