// import_hf: a Hugging Face encoder-decoder of the BART family as an mtx bundle (bundle/import.h). The family's
// mapping (layers, embeddings, positions, output) is written once; each architecture, registered by config.json's
// model_type, says how its config maps onto mtx's model options, where its tokenizer is and how it keeps its
// positions (as CTranslate2's BartLoader and its MarianMT, M2M100 and MBart loaders do).
#include "mtx/bundle/import.h"

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include "import_weights.h"
#include "mtx/bundle/export.h"
#include "mtx/model/param_names.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/errors.h"

namespace mtx::bundle {

using namespace detail;
namespace names = model::names;

namespace {

// The start token's output row is its own with the bias this much lower (import.h).
constexpr double kStartBiasOffset = 30;

// The BART family's names: layer i of a stack is "model.encoder.layers.<i>" / "model.decoder.layers.<i>", with
// q_proj, k_proj, v_proj and out_proj under self_attn and encoder_attn, fc1, fc2, and self_attn_layer_norm,
// encoder_attn_layer_norm and final_layer_norm; matrices [out, in].
class BartLayout : public Layout {
 public:
  std::pair<torch::Tensor, torch::Tensor> dense(Weights& w, bool decoder, int64_t i, Dense part, int64_t out,
                                                int64_t in) const override {
    static const std::map<Dense, const char*> kNames = {{Dense::self_q, "self_attn.q_proj"},
                                                        {Dense::self_k, "self_attn.k_proj"},
                                                        {Dense::self_v, "self_attn.v_proj"},
                                                        {Dense::self_out, "self_attn.out_proj"},
                                                        {Dense::cross_q, "encoder_attn.q_proj"},
                                                        {Dense::cross_k, "encoder_attn.k_proj"},
                                                        {Dense::cross_v, "encoder_attn.v_proj"},
                                                        {Dense::cross_out, "encoder_attn.out_proj"},
                                                        {Dense::fc1, "fc1"},
                                                        {Dense::fc2, "fc2"}};
    const std::string name = layer(decoder, i) + kNames.at(part);
    return {w.take(name + ".weight", {out, in}), w.take(name + ".bias", {out})};
  }
  std::pair<torch::Tensor, torch::Tensor> norm(Weights& w, bool decoder, int64_t i, Sublayer part,
                                               int64_t d) const override {
    const std::string name = layer(decoder, i) + (part == Sublayer::self    ? "self_attn_layer_norm"
                                                  : part == Sublayer::cross ? "encoder_attn_layer_norm"
                                                                            : "final_layer_norm");
    return {w.take(name + ".weight", {d}), w.take(name + ".bias", {d})};
  }
  static std::string stack(bool decoder) { return decoder ? "model.decoder." : "model.encoder."; }

 private:
  static std::string layer(bool decoder, int64_t i) { return stack(decoder) + "layers." + std::to_string(i) + "."; }
};

config::Activation activation_of(const HfConfig& hf) {
  const auto name = hf.get<std::string>("activation_function", "gelu");
  if (name == "relu") return config::Activation::relu;
  if (name == "gelu") return config::Activation::gelu;
  if (name == "swish" || name == "silu") return config::Activation::swish;
  if (name == "quick_gelu") return config::Activation::gelu_sigmoid;
  hf.refuse("activation_function '" + name + "' is not one mtx has (relu, gelu, swish/silu, quick_gelu)");
}

// One architecture of the family.
class HfArchitecture {
 public:
  virtual ~HfArchitecture() = default;
  virtual const char* name() const = 0;  // for messages: "MarianMT"
  // The model options config.json implies beyond the family's (norms, positions, embedding scale); refuses what
  // mtx cannot run.
  virtual void configure(const HfConfig& hf, config::ModelConfig& m) const = 0;
  // The tokenizer files of `dir` for a model of `rows` embedding rows.
  virtual Vocabulary vocabulary(const fs::path& dir, const HfConfig& hf, int64_t rows) const = 0;
  // The position tables: learned ones taken, computed ones checked against mtx's where the file holds a copy.
  virtual void positions(Weights& w, Filler& target, model::Transformer& model, const config::ModelConfig& m) const = 0;
  // Why a parameter nobody took has no place in mtx (from its name).
  virtual std::string unplaced(const std::string&) const { return "a layer of an architecture mtx cannot run"; }
};

// The options every architecture of the family reads alike.
config::ModelConfig family_config(const HfConfig& hf) {
  if (hf.positive("encoder_attention_heads") != hf.positive("decoder_attention_heads")) {
    hf.refuse("encoder_attention_heads and decoder_attention_heads differ; mtx uses one count");
  }
  if (hf.positive("encoder_ffn_dim") != hf.positive("decoder_ffn_dim")) {
    hf.refuse("encoder_ffn_dim and decoder_ffn_dim differ; mtx uses one width");
  }
  config::ModelConfig m;
  m.d_model = int(hf.positive("d_model"));
  m.heads = int(hf.positive("encoder_attention_heads"));
  m.encoder_layers = int(hf.positive("encoder_layers"));
  m.decoder_layers = int(hf.positive("decoder_layers"));
  m.ffn_dim = int(hf.positive("encoder_ffn_dim"));
  m.dropout = hf.get<double>("dropout", 0.1);
  m.attention_dropout = hf.get<double>("attention_dropout", 0.0);
  m.activation_dropout = hf.get<double>("activation_dropout", 0.0);
  m.max_len = int(hf.positive("max_position_embeddings"));
  m.activation = activation_of(hf);
  m.share_embeddings = hf.get<bool>("share_encoder_decoder_embeddings", true);
  m.tie_output = hf.get<bool>("tie_word_embeddings", true);
  m.output_bias = m.tie_output;  // final_logits_bias (zeros where the file has none); an untied projection has one
  return m;
}

// A JSON object of piece -> id (vocab.json, or a tokenizer.json's BPE vocabulary) into `pieces`.
void place_pieces(const json& vocab, const fs::path& path, std::vector<std::string>& pieces, std::vector<bool>& seen) {
  if (!vocab.is_object()) throw DataError(path.string() + ": not a JSON object of pieces and ids");
  const auto rows = int64_t(pieces.size());
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
}

// Pieces no file names (a vocab_size rounded up) get unused names.
void fill_gaps(std::vector<std::string>& pieces, const std::vector<bool>& seen) {
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!seen[i]) pieces[i] = "<mtx-unused-" + std::to_string(i) + ">";
  }
}

// --- MarianMT: post-norm, MarianMT's sinusoid (sines, then cosines), vocab.json with source.spm and target.spm.
class MarianMT : public HfArchitecture {
 public:
  const char* name() const override { return "MarianMT"; }
  void configure(const HfConfig& hf, config::ModelConfig& m) const override {
    for (const char* key : {"normalize_before", "add_final_layer_norm", "normalize_embedding", "layernorm_embedding"}) {
      if (hf.get<bool>(key, false)) hf.refuse(std::string(key) + " is set: mtx's MarianMT is post-norm only");
    }
    if (hf.get<bool>("static_position_embeddings", true) == false) {
      hf.refuse("learned position embeddings: MarianMT's are sinusoidal");
    }
    m.norm = config::Norm::post;
    m.positions = config::Positions::sinusoidal_halves;
    m.scale_embeddings = hf.get<bool>("scale_embedding", false);
  }
  Vocabulary vocabulary(const fs::path& dir, const HfConfig& hf, int64_t rows) const override {
    const JsonFile tokenizer_config = JsonFile::optional(dir / "tokenizer_config.json");
    if (tokenizer_config.get<bool>("separate_vocabs", false)) {
      tokenizer_config.refuse(
          "separate_vocabs: separate source and target vocabularies are not supported (one vocab.json)");
    }
    Vocabulary v;
    v.pieces.resize(size_t(rows));
    std::vector<bool> seen(size_t(rows), false);
    const fs::path path = dir / "vocab.json";
    place_pieces(read_json(path), path, v.pieces, seen);
    fill_gaps(v.pieces, seen);
    v.ids.unk = id_of(v.pieces, "<unk>", path);
    v.ids.pad = hf.id("pad_token_id");
    v.ids.eos = hf.id("eos_token_id");
    v.source_spm = read_file(dir / "source.spm");
    v.target_spm = read_file(dir / "target.spm");
    if (!tokenizer_config.get<std::string>("source_lang", "").empty()) {
      v.notes.push_back(
          "MarianTokenizer's Moses punctuation normalisation (sacremoses) is not applied; sentencepiece's is");
    }
    return v;
  }
  void positions(Weights& w, Filler&, model::Transformer& model, const config::ModelConfig& m) const override {
    // MarianMT computes its tables (files may hold a copy): sines, then cosines, of mtx's sinusoidal_halves.
    for (const char* table : {"model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"}) {
      if (!w.has(table)) continue;
      const torch::Tensor theirs = w.take(table, {m.max_len, m.d_model});
      const double diff = (theirs - model->positions->table).abs().max().item<double>();
      if (diff > 1e-5) {
        throw DataError(std::string(table) + " differs from MarianMT's sinusoid by " + std::to_string(diff) +
                        ": positions mtx cannot reproduce");
      }
    }
  }
};

// --- The fairseq multilingual models: pre-norm with final layer norms, a start from </s> and the target
// language's code forced first, sentencepiece pieces under fairseq's ids, language codes after them.

// A tokenizer.json (the tokenizers library's file; transformers 5 saves it alone): its model's vocabulary
// (BPE: piece -> id; Unigram: [piece, score] in id order) and its added tokens.
void tokenizer_json_pieces(const fs::path& path, std::vector<std::string>& pieces, std::vector<bool>& seen) {
  const json doc = read_json(path);
  const auto refuse = [&](const std::string& what) { throw DataError(path.string() + ": " + what); };
  if (!doc.contains("model") || !doc.at("model").is_object() || !doc.at("model").contains("vocab")) {
    refuse("no 'model.vocab'");
  }
  const json& vocab = doc.at("model").at("vocab");
  if (vocab.is_array()) {  // Unigram
    json as_object = json::object();
    for (size_t i = 0; i < vocab.size(); ++i) {
      if (!vocab[i].is_array() || vocab[i].empty() || !vocab[i][0].is_string()) {
        refuse("'model.vocab' entry " + std::to_string(i) + " is not [piece, score]");
      }
      as_object[vocab[i][0].get<std::string>()] = i;
    }
    place_pieces(as_object, path, pieces, seen);
  } else {
    place_pieces(vocab, path, pieces, seen);
  }
  if (doc.contains("added_tokens") && doc.at("added_tokens").is_array()) {
    for (const json& t : doc.at("added_tokens")) {
      if (!t.is_object() || !t.contains("id") || !t.at("id").is_number_integer() || !t.contains("content") ||
          !t.at("content").is_string()) {
        refuse("an 'added_tokens' entry lacks an integer 'id' or a string 'content'");
      }
      const auto id = t.at("id").get<int64_t>();
      if (id < 0 || id >= int64_t(pieces.size())) {
        refuse("added token '" + t.at("content").get<std::string>() + "' has id " + std::to_string(id) +
               ", outside the model's " + std::to_string(pieces.size()) + " embedding rows");
      }
      pieces[size_t(id)] = t.at("content").get<std::string>();  // an added token wins over the model's piece
      seen[size_t(id)] = true;
    }
  }
}

// The language codes a directory's tokenizer_config.json or special_tokens_map.json lists (transformers'
// additional_special_tokens; extra_special_tokens in version 5), in order; empty when neither does.
std::vector<std::string> listed_codes(const fs::path& dir) {
  for (const char* file : {"tokenizer_config.json", "special_tokens_map.json"}) {
    const fs::path path = dir / file;
    if (!fs::exists(path)) continue;
    const json doc = read_json(path);
    for (const char* key : {"additional_special_tokens", "extra_special_tokens"}) {
      if (!doc.contains(key) || !doc.at(key).is_array()) continue;
      std::vector<std::string> out;
      for (const json& t : doc.at(key)) {
        if (t.is_string()) out.push_back(t.get<std::string>());
        if (t.is_object() && t.contains("content") && t.at("content").is_string())
          out.push_back(t.at("content").get<std::string>());
      }
      if (!out.empty()) return out;
    }
  }
  return {};
}

// M2M100Tokenizer's own lists (its language_codes setting: "m2m100", the default, or "wmt21"), as tokens.
std::vector<std::string> m2m100_codes(const JsonFile& tokenizer_config) {
  static const std::map<std::string, const char*> kLists = {
      {"m2m100",
       "af am ar ast az ba be bg bn br bs ca ceb cs cy da de el en es et fa ff fi fr fy ga gd gl gu ha he hi hr ht hu "
       "hy "
       "id ig ilo is it ja jv ka kk km kn ko lb lg ln lo lt lv mg mk ml mn mr ms my ne nl no ns oc or pa pl ps pt ro "
       "ru "
       "sd si sk sl so sq sr ss su sv sw ta th tl tn tr uk ur uz vi wo xh yi yo zh zu"},
      {"wmt21", "en ha is ja cs ru zh de"}};
  const auto name = tokenizer_config.get<std::string>("language_codes", "m2m100");
  const auto it = kLists.find(name);
  if (it == kLists.end()) tokenizer_config.refuse("language_codes '" + name + "' is not m2m100 or wmt21");
  std::vector<std::string> out;
  std::istringstream words(it->second);
  for (std::string w; words >> w;) out.push_back("__" + w + "__");
  return out;
}

// The fairseq families' tokenizers. NLLB's and mBART-50's: fairseq's <s> <pad> </s> <unk> at 0-3, sentencepiece
// piece k (k >= 3) at k + 1, the language codes after the pieces, <mask> last. M2M100's: vocab.json's ids, the
// codes (__de__) after them. A tokenizer.json, where present, gives every id as transformers reads them.
// `code`: a language code piece's pattern, its first group the code users name (NLLB's deu_Latn, M2M100's __de__ ->
// de, mBART-50's de_DE).
Vocabulary fairseq_vocabulary(const fs::path& dir, const HfConfig& hf, int64_t rows, bool vocab_json,
                              const std::regex& code) {
  Vocabulary v;
  v.pieces.resize(size_t(rows));
  std::vector<bool> seen(size_t(rows), false);
  const fs::path spm_path = dir / "sentencepiece.bpe.model";
  const bool has_spm = fs::exists(spm_path);
  if (!has_spm) {
    throw DataError(spm_path.string() + " is missing: mtx cuts text with the model's sentencepiece model" +
                    (fs::exists(dir / "tokenizer.json")
                         ? std::string(" (tokenizer.json alone, as transformers 5 saves a tokenizer, does not hold it)")
                         : std::string()) +
                    "; copy sentencepiece.bpe.model from the model's Hub repository into " + dir.string());
  }
  v.source_spm = v.target_spm = read_file(spm_path);
  if (fs::exists(dir / "tokenizer.json")) {
    tokenizer_json_pieces(dir / "tokenizer.json", v.pieces, seen);
  } else {
    std::vector<std::string> codes = listed_codes(dir);
    if (codes.empty() && vocab_json) codes = m2m100_codes(JsonFile::optional(dir / "tokenizer_config.json"));
    if (codes.empty()) {
      throw DataError((dir / "tokenizer_config.json").string() +
                      ": no language codes (additional_special_tokens), and no tokenizer.json: save the tokenizer "
                      "with transformers' save_pretrained");
    }
    int64_t next = 0;
    if (vocab_json) {
      place_pieces(read_json(dir / "vocab.json"), dir / "vocab.json", v.pieces, seen);
      next = int64_t(std::count(seen.begin(), seen.end(), true));
    } else {
      const auto spm = tokenizer::SpmModel::from_bytes(v.source_spm);
      const std::vector<std::string> specials = {"<s>", "<pad>", "</s>", "<unk>"};
      for (size_t i = 0; i < specials.size(); ++i) {
        v.pieces[i] = specials[i];
        seen[i] = true;
      }
      for (int32_t k = 3; k < spm->vocab_size(); ++k) {
        if (k + 1 >= rows) throw DataError(spm_path.string() + ": more pieces than config.json's vocab_size");
        v.pieces[size_t(k + 1)] = spm->piece(k);
        seen[size_t(k + 1)] = true;
      }
      next = spm->vocab_size() + 1;
    }
    if (!vocab_json) codes.push_back("<mask>");  // fairseq's last piece (M2M100's vocab.json has its own)
    for (const std::string& code : codes) {
      if (next >= rows) throw DataError(hf.path().string() + ": vocab_size has no room for the language codes");
      v.pieces[size_t(next)] = code;
      seen[size_t(next++)] = true;
    }
  }
  fill_gaps(v.pieces, seen);
  std::smatch match;
  for (size_t i = 0; i < v.pieces.size(); ++i) {
    if (std::regex_match(v.pieces[i], match, code)) v.languages.emplace_back(match[1].str(), int32_t(i));
  }
  if (v.languages.empty()) {
    throw DataError(dir.string() + ": no language codes among the tokenizer's pieces (a multilingual model's, " +
                    "such as deu_Latn, __de__ or de_DE)");
  }
  v.ids.unk = id_of(v.pieces, "<unk>", spm_path);
  v.ids.pad = hf.id("pad_token_id");
  v.ids.eos = hf.id("eos_token_id");
  return v;
}

// M2M100 and NLLB-200 (both model_type m2m_100): fairseq's sinusoid (mtx's sinusoidal_marian) counted from
// pad id + 1, not saved in the file.
class M2M100 : public HfArchitecture {
 public:
  const char* name() const override { return "M2M100/NLLB"; }
  void configure(const HfConfig& hf, config::ModelConfig& m) const override {
    m.norm = config::Norm::pre;
    m.positions = config::Positions::sinusoidal_marian;
    m.position_offset = int(hf.id("pad_token_id")) + 1;
    m.scale_embeddings = hf.get<bool>("scale_embedding", true);
  }
  Vocabulary vocabulary(const fs::path& dir, const HfConfig& hf, int64_t rows) const override {
    const bool m2m100 = fs::exists(dir / "vocab.json");  // NLLB's tokenizer has none
    static const std::regex kNllb("([a-z]{3}_[A-Z][a-z]{3})"), kM2M100("__([a-z]{2,3})__");
    Vocabulary v = fairseq_vocabulary(dir, hf, rows, m2m100, m2m100 ? kM2M100 : kNllb);
    // NllbTokenizer(legacy_behaviour=True) puts the source's code after its </s>.
    v.code_after_eos =
        !m2m100 && JsonFile::optional(dir / "tokenizer_config.json").get<bool>("legacy_behaviour", false);
    if (v.code_after_eos) v.notes.push_back("the legacy NLLB source layout (pieces </s> code: legacy_behaviour)");
    return v;
  }
  void positions(Weights& w, Filler&, model::Transformer&, const config::ModelConfig&) const override {
    for (const char* table : {"model.encoder.embed_positions.weights", "model.decoder.embed_positions.weights"}) {
      if (w.has(table)) w.skip(table);  // older files keep the computed table
    }
  }
};

// mBART (mBART-50): learned positions from row 2, one table per stack, and a layer norm on the embeddings.
class MBart : public HfArchitecture {
 public:
  const char* name() const override { return "mBART"; }
  void configure(const HfConfig& hf, config::ModelConfig& m) const override {
    m.norm = config::Norm::pre;
    m.positions = config::Positions::learned;
    m.position_offset = 2;  // MBartLearnedPositionalEmbedding's offset
    m.share_positions = false;
    m.embedding_norm = true;
    m.scale_embeddings = hf.get<bool>("scale_embedding", false);
  }
  Vocabulary vocabulary(const fs::path& dir, const HfConfig& hf, int64_t rows) const override {
    static const std::regex kMBart50("([a-z]{2}_[A-Z]{2})");
    return fairseq_vocabulary(dir, hf, rows, false, kMBart50);
  }
  void positions(Weights& w, Filler& target, model::Transformer&, const config::ModelConfig& m) const override {
    const int64_t rows = m.max_len + m.position_offset;
    target.put(names::join(names::join(names::kPositions, names::kPositionsEmbedding), "weight"),
               w.take("model.encoder.embed_positions.weight", {rows, m.d_model}));
    target.put(names::join(names::join(names::kTgtPositions, names::kPositionsEmbedding), "weight"),
               w.take("model.decoder.embed_positions.weight", {rows, m.d_model}));
  }
};

// The architectures by config.json's model_type.
const std::map<std::string, std::shared_ptr<const HfArchitecture>>& architectures() {
  static const std::map<std::string, std::shared_ptr<const HfArchitecture>> kAll = {
      {"marian", std::make_shared<MarianMT>()},
      {"m2m_100", std::make_shared<M2M100>()},
      {"mbart", std::make_shared<MBart>()}};
  return kAll;
}

// A Hugging Face directory as the import driver reads it: the family's layout, its final and embedding norms,
// the architecture's positions, and the embeddings and output under the family's names.
class HfSource : public Source {
 public:
  explicit HfSource(const HfArchitecture& arch) : arch_(arch) {}
  const Layout& layout() const override { return layout_; }
  void fill_rest(Filler& target, model::Transformer& model) override {
    const config::ModelConfig& m = config.model;
    const int64_t d = m.d_model;
    auto norm = [&](const std::string& to, const std::string& from) {
      target.put(names::join(to, "weight"), weights->take(from + ".weight", {d}));
      target.put(names::join(to, "bias"), weights->take(from + ".bias", {d}));
    };
    if (m.norm == config::Norm::pre) {
      norm(names::kEncoderNorm, BartLayout::stack(false) + "layer_norm");
      norm(names::kDecoderNorm, BartLayout::stack(true) + "layer_norm");
    }
    if (m.embedding_norm) {
      norm(names::kEncoderEmbedNorm, BartLayout::stack(false) + "layernorm_embedding");
      norm(names::kDecoderEmbedNorm, BartLayout::stack(true) + "layernorm_embedding");
    }
    arch_.positions(*weights, target, model, m);
  }
  Embeddings embeddings(Weights& w, const config::ModelConfig& m, int64_t rows) override {
    const int64_t d = m.d_model;
    Embeddings e;
    const std::string src_name = w.has("model.shared.weight") || !w.has("model.encoder.embed_tokens.weight")
                                     ? "model.shared.weight"
                                     : "model.encoder.embed_tokens.weight";
    e.src_embed = w.take(src_name, {rows, d});  // [rows, d]
    if (m.share_embeddings) {
      for (const char* tied :
           {"model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"}) {
        w.skip(tied);
      }
    } else {
      e.tgt_embed = w.take("model.decoder.embed_tokens.weight", {rows, d});  // [rows, d]
      if (src_name != "model.shared.weight") w.skip("model.shared.weight");
    }
    if (w.has("final_logits_bias")) e.bias = w.take("final_logits_bias", {1, rows}).view({rows});  // [rows]
    if (m.tie_output) {
      w.skip("lm_head.weight");
    } else {
      e.output = w.take("lm_head.weight", {rows, d});
    }
    return e;
  }
  std::string unplaced(const std::string& name) const override { return arch_.unplaced(name); }

 private:
  const HfArchitecture& arch_;
  BartLayout layout_;
};

}  // namespace

const std::vector<ImportFormat>& import_formats() {
  static const std::vector<ImportFormat> kFormats = {
      {"hf", "a Hugging Face directory (config.json, the weights, the tokenizer's files)", nullptr,
       [](const fs::path& input, const ImportOptions& o) { return import_hf(input, o); }},
      {"marian", "a Marian model's .npz", "the model's decoder.yml, which names its vocabularies",
       [](const fs::path& input, const ImportOptions& o) { return import_marian(input, o.config); }}};
  return kFormats;
}

Imported import_model(const std::string& format, const fs::path& input, const ImportOptions& options) {
  for (const ImportFormat& f : import_formats()) {
    if (format != f.name) continue;
    if (f.config && options.config.empty()) {
      throw ConfigError("import from " + format + " needs its config file: " + f.config);
    }
    return f.import(input, options);
  }
  std::string known;
  for (const ImportFormat& f : import_formats()) known += (known.empty() ? "" : ", ") + std::string(f.name);
  throw ConfigError("import: '" + format + "' is not a format mtx imports (" + known + ")");
}

std::vector<std::string> hf_model_types() {
  std::vector<std::string> out;
  for (const auto& [type, arch] : architectures()) out.push_back(type);
  return out;
}

Imported import_hf(const fs::path& dir, const ImportOptions& options) {
  if (!fs::exists(dir)) throw NotFoundError(dir.string() + ": not found (a Hugging Face model's directory)");
  if (!fs::is_directory(dir)) throw DataError(dir.string() + ": not a directory (a Hugging Face model)");
  const HfConfig hf(dir / "config.json");
  const auto type = hf.get<std::string>("model_type", "");
  const auto found = architectures().find(type);
  if (found == architectures().end()) {
    std::string known;
    for (const std::string& t : hf_model_types()) known += (known.empty() ? "" : ", ") + t;
    hf.refuse("model_type '" + type + "' is not one mtx imports (" + known + ")");
  }
  const HfArchitecture& arch = *found->second;
  const int64_t rows = hf.positive("vocab_size");
  if (hf.has("decoder_vocab_size") && hf.get<int64_t>("decoder_vocab_size") != rows) {
    hf.refuse("decoder_vocab_size differs from vocab_size: separate vocabularies are not supported");
  }
  const JsonFile generation = JsonFile::optional(dir / "generation_config.json");
  HfSource source(arch);
  config::Config& c = source.config;
  c.model = family_config(hf);
  arch.configure(hf, c.model);
  c.tokenizer.joint = false;
  c.tokenizer.vocab_size = int(rows + 1);
  c.decode.beam = std::max(1, generation.get<int>("num_beams", c.decode.beam));
  config::validate(c);
  source.vocabulary = arch.vocabulary(dir, hf, rows);
  source.vocabulary.ids.bos = int32_t(rows);  // mtx's start piece, appended (import.h)
  const int32_t start = hf.has("decoder_start_token_id") ? hf.id("decoder_start_token_id") : source.vocabulary.ids.pad;
  if (start < 0 || start >= rows)
    hf.refuse("decoder_start_token_id " + std::to_string(start) + " is outside the vocabulary");
  source.added.push_back(
      {"<s>", "<mtx-start>", start, -kStartBiasOffset,
       std::string("mtx's decoder start, ") + arch.name() + "'s id " + std::to_string(start) + " in all but its name"});
  source.weights = std::make_unique<Weights>(hf_weights(dir, options.python));
  source.path = dir;
  if (!source.vocabulary.languages.empty()) {
    source.notes.push_back(std::to_string(source.vocabulary.languages.size()) +
                           " languages (mtx info --ckpt lists them): translate with --source-lang and --target-lang");
  }
  return build_imported(source);
}

}  // namespace mtx::bundle
