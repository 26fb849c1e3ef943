// Subword tokenizer over sentencepiece (unigram or BPE, joint or per side), lossless by construction
// (identity normalisation, whitespace kept, byte fallback), with pad/unk/bos/eos ids fixed.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
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

// One sentencepiece model, held by the shim. Encode/decode are thread-safe.
class SpmModel {
 public:
  // Loads from the serialized model (the bytes of a .model file); throws DataError if malformed.
  static std::shared_ptr<const SpmModel> from_bytes(std::string bytes);
  // Trains on `text` (sentences separated by '\n') with sentencepiece trainer flags (no input or
  // model_prefix: nothing touches the disk, so equal inputs give byte-identical models).
  static std::shared_ptr<const SpmModel> train(const std::vector<std::pair<std::string, std::string>>& flags,
                                               std::string_view text);
  ~SpmModel();
  SpmModel(const SpmModel&) = delete;
  SpmModel& operator=(const SpmModel&) = delete;

  std::vector<int32_t> encode(std::string_view text) const;
  void encode(std::string_view text, std::vector<int32_t>& ids) const;  // replaces ids
  std::string decode(const std::vector<int32_t>& ids) const;
  std::string decode(const int32_t* ids, size_t n) const;
  std::string piece(int32_t id) const;
  int32_t vocab_size() const { return vocab_size_; }
  SpecialIds special_ids() const { return special_; }
  const std::string& bytes() const { return bytes_; }
  const std::string& sha256() const { return sha256_; }

 private:
  SpmModel(mtx_spm* handle, std::string bytes);
  mtx_spm* handle_;
  std::string bytes_;
  std::string sha256_;
  int32_t vocab_size_ = 0;
  SpecialIds special_;
};

class Tokenizer {
 public:
  // Trains on the training sentences of each side: one model over both when settings.joint, else
  // one per side. Deterministic for a given text, settings and settings.train_threads.
  static Tokenizer train(const config::TokenizerConfig& settings, const std::vector<std::string>& src_lines,
                         const std::vector<std::string>& tgt_lines);
  // Reads tokenizer.json and its model files from `dir`; throws DataError naming what is wrong.
  static Tokenizer load(const std::filesystem::path& dir);
  // Builds from model bytes (e.g. embedded in a checkpoint); tgt_bytes empty when joint.
  static Tokenizer from_bytes(std::string src_bytes, std::string tgt_bytes);

  // Writes tokenizer.json and the model files (atomically) into `dir`.
  void save(const std::filesystem::path& dir) const;

  const SpmModel& src() const { return *src_; }
  const SpmModel& tgt() const { return *tgt_; }
  bool joint() const { return src_ == tgt_; }
  SpecialIds special_ids() const { return src_->special_ids(); }
  // Identity of the tokenizer: sha256 over the model bytes and the special ids.
  std::string hash() const;
  // Summary for logs and `mtx info`: type, sizes, ids, hash.
  nlohmann::json describe() const;

 private:
  Tokenizer(std::shared_ptr<const SpmModel> src, std::shared_ptr<const SpmModel> tgt);
  std::shared_ptr<const SpmModel> src_;
  std::shared_ptr<const SpmModel> tgt_;
};

// Where the sentencepiece shim was loaded from and in which namespace mode ("isolated"/"shared").
std::string shim_description();

}  // namespace mtx::tokenizer
