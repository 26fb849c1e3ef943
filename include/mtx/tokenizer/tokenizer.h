// Subword tokenizer over sentencepiece (unigram or BPE, joint or per side), lossless by construction
// (identity normalisation, whitespace kept, byte fallback), with pad/unk/bos/eos ids fixed; or, for the
// language-model tutorial, torchtext's basic_english words (WordModel).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mtx/config/config.h"

extern "C" {
typedef struct mtx_spm mtx_spm;
}

namespace mtx::tokenizer {

// Fixed for every tokenizer mtx trains; recorded in tokenizer.json and (later) in checkpoints.
struct SpecialIds {
  int32_t pad = 0;
  int32_t unk = 1;
  int32_t bos = 2;
  int32_t eos = 3;
};
bool operator==(const SpecialIds& a, const SpecialIds& b);

// A multilingual model's languages: each code and the id of its token, in the model's order.
using Languages = std::vector<std::pair<std::string, int32_t>>;
// The id of `code` among `languages`; ConfigError naming `what`, the code and the closest codes otherwise.
int32_t language_id(const Languages& languages, const std::string& code, const std::string& what);

// One side's text <-> ids model: a sentencepiece model (SpmModel) or the LM tutorial's word vocabulary
// (WordModel). Encode/decode are thread-safe; bytes() serialises the model (checkpoints embed them).
class Model {
 public:
  virtual ~Model() = default;
  virtual void encode(std::string_view text, std::vector<int32_t>& ids) const = 0;  // replaces ids
  std::vector<int32_t> encode(std::string_view text) const {
    std::vector<int32_t> ids;
    encode(text, ids);
    return ids;
  }
  virtual std::string decode(const int32_t* ids, size_t n) const = 0;
  std::string decode(const std::vector<int32_t>& ids) const { return decode(ids.data(), ids.size()); }
  virtual std::string piece(int32_t id) const = 0;
  int32_t vocab_size() const { return vocab_size_; }
  SpecialIds special_ids() const { return special_; }
  const std::string& bytes() const { return bytes_; }
  const std::string& sha256() const { return sha256_; }
  virtual std::string kind() const = 0;  // "sentencepiece" | "basic_english"

 protected:
  explicit Model(std::string bytes);
  std::string bytes_;
  std::string sha256_;
  int32_t vocab_size_ = 0;
  SpecialIds special_;
};

// One sentencepiece model, held by the shim.
class SpmModel : public Model {
 public:
  // Loads from the serialized model (the bytes of a .model file); throws DataError if malformed.
  static std::shared_ptr<const SpmModel> from_bytes(std::string bytes);
  // Trains on `text` (sentences separated by '\n') with sentencepiece trainer flags (no input or
  // model_prefix: nothing touches the disk, so equal inputs give byte-identical models).
  static std::shared_ptr<const SpmModel> train(const std::vector<std::pair<std::string, std::string>>& flags,
                                               std::string_view text);
  ~SpmModel() override;
  SpmModel(const SpmModel&) = delete;
  SpmModel& operator=(const SpmModel&) = delete;

  using Model::decode;
  using Model::encode;
  void encode(std::string_view text, std::vector<int32_t>& ids) const override;
  std::string decode(const int32_t* ids, size_t n) const override;
  std::string piece(int32_t id) const override;
  std::string kind() const override { return "sentencepiece"; }

 private:
  SpmModel(mtx_spm* handle, std::string bytes);
  mtx_spm* handle_;
};

// torchtext's basic_english: lowercase (Python's str.lower()), quotes and punctuation split off (`"`,
// `;`, `:` and `<br />` dropped), split on Unicode whitespace as str.split().
std::vector<std::string> basic_english(std::string_view line);

// The LM tutorial's vocabulary: every word of the training text seen at least `min_freq` times, most
// frequent first (ties in code-point order, as torchtext's build_vocab_from_iterator), after
// <pad> <unk> <s> <eos>; other words encode as <unk>. Decoding joins words with single spaces.
class WordModel : public Model {
 public:
  static std::shared_ptr<const WordModel> train(const std::vector<std::string>& lines, int min_freq);
  // From bytes(): "mtx-words 1\n" and one word per line, in id order; throws DataError if malformed.
  static std::shared_ptr<const WordModel> from_bytes(std::string bytes);
  static bool is_word_model(std::string_view bytes);

  using Model::decode;
  using Model::encode;
  void encode(std::string_view text, std::vector<int32_t>& ids) const override;
  std::string decode(const int32_t* ids, size_t n) const override;
  std::string piece(int32_t id) const override;
  std::string kind() const override { return "basic_english"; }

 private:
  WordModel(std::vector<std::string> words, std::string bytes);
  std::vector<std::string> words_;
  std::unordered_map<std::string, int32_t> index_;
};

// A sentencepiece model read through a vocabulary of its own: the ids are positions in `pieces` (Marian's and
// Hugging Face MarianMT's vocab.json / .yml, one map shared by a source and a target model), not the
// sentencepiece model's. Encoding maps each piece sentencepiece cuts to its vocabulary id (<unk>'s where the
// vocabulary lacks it); decoding maps ids back to pieces and lets sentencepiece join them (ids whose piece the
// model lacks decode as its unknown piece). Special ids are the vocabulary's, as given.
class VocabModel : public Model {
 public:
  // `languages`: a multilingual model's language codes (NLLB's deu_Latn, M2M100's de, mBART-50's de_DE) and the
  // ids of their tokens, which never decode to text. `code_after_eos`: the source's code goes after its </s>
  // (NLLB's legacy layout: pieces </s> code) rather than first (code pieces </s>).
  // Throws DataError naming what is wrong: a special id outside the vocabulary, a repeated piece.
  static std::shared_ptr<const VocabModel> create(std::shared_ptr<const SpmModel> spm, std::vector<std::string> pieces,
                                                  SpecialIds special, Languages languages = {},
                                                  bool code_after_eos = false);
  // From bytes(): "mtx-spm-vocab 1\n", one line of JSON (pieces, special ids), "\n", the sentencepiece model.
  static std::shared_ptr<const VocabModel> from_bytes(std::string bytes);
  static bool is_vocab_model(std::string_view bytes);

  using Model::decode;
  using Model::encode;
  void encode(std::string_view text, std::vector<int32_t>& ids) const override;
  std::string decode(const int32_t* ids, size_t n) const override;
  std::string piece(int32_t id) const override;
  std::string kind() const override { return "sentencepiece+vocabulary"; }
  const SpmModel& spm() const { return *spm_; }
  const Languages& languages() const { return languages_; }
  bool code_after_eos() const { return code_after_eos_; }

 private:
  VocabModel(std::shared_ptr<const SpmModel> spm, std::vector<std::string> pieces, SpecialIds special,
             Languages languages, bool code_after_eos, std::string bytes);
  Languages languages_;
  bool code_after_eos_ = false;
  std::shared_ptr<const SpmModel> spm_;
  std::vector<std::string> pieces_;
  std::vector<int32_t> from_spm_;  // sentencepiece id -> vocabulary id (unk where the vocabulary lacks the piece)
  std::vector<int32_t> to_spm_;    // vocabulary id -> sentencepiece id (its unk where the model lacks the piece)
};

class Tokenizer {
 public:
  // Trains on the training sentences of each side: one model over both when settings.joint, else
  // one per side. Deterministic for a given text, settings and settings.train_threads. Moving the lines in lets
  // it free them before sentencepiece trains.
  static Tokenizer train(const config::TokenizerConfig& settings, std::vector<std::string> src_lines,
                         std::vector<std::string> tgt_lines);
  // Reads tokenizer.json and its model files from `dir`; throws DataError naming what is wrong.
  static Tokenizer load(const std::filesystem::path& dir);
  // Builds from model bytes (e.g. embedded in a checkpoint); tgt_bytes empty when joint.
  static Tokenizer from_bytes(std::string src_bytes, std::string tgt_bytes);

  // Writes tokenizer.json and the model files (atomically) into `dir`.
  void save(const std::filesystem::path& dir) const;

  const Model& src() const { return *src_; }
  const Model& tgt() const { return *tgt_; }
  bool joint() const { return src_ == tgt_; }
  SpecialIds special_ids() const { return src_->special_ids(); }
  // The source side's language codes (a multilingual model's; empty otherwise).
  const Languages& languages() const;
  // A multilingual model's encoder input for `text` in the language whose code's token is `code`:
  // code pieces </s>, or pieces </s> code in NLLB's legacy layout (VocabModel::code_after_eos).
  std::vector<int32_t> encode_source(std::string_view text, int32_t code) const;
  bool code_after_eos() const;
  // Identity of the tokenizer: sha256 over the model bytes and the special ids.
  std::string hash() const;
  // Summary for logs and `mtx info`: type, sizes, ids, hash.
  nlohmann::json describe() const;

 private:
  Tokenizer(std::shared_ptr<const Model> src, std::shared_ptr<const Model> tgt);
  std::shared_ptr<const Model> src_;
  std::shared_ptr<const Model> tgt_;
};

// Where the sentencepiece shim was loaded from and in which namespace mode ("isolated"/"shared").
std::string shim_description();

}  // namespace mtx::tokenizer
