// From a config to ready-to-batch data: locate the split files, train (or reuse) the tokenizer on a sample of the
// training split, stream every split through the tokenizer into shard files (or reuse the cache), and map them.
// Memory does not grow with the corpus. Caches are keyed by content hashes of the tokenizer, the data files and the
// settings, so a changed input is re-done and an unchanged one is not; a file's hash is stored and reused while its
// size, modification time, inode and sampled blocks are unchanged (PrepareOptions::force re-hashes).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "mtx/config/config.h"
#include "mtx/data/corpus.h"
#include "mtx/data/dataset.h"
#include "mtx/tokenizer/tokenizer.h"

namespace mtx::data {

struct SplitFiles {
  std::filesystem::path src;
  std::filesystem::path tgt;
};

// <data.dir>/<prefix>.<lang>.gz or <data.dir>/<prefix>.<lang>; throws DataError naming the key and
// the paths looked for, with a hint to fetch the data.
SplitFiles find_split(const config::DataConfig& data, const std::string& prefix, const std::string& key);

struct DataFiles {
  SplitFiles train;
  std::optional<SplitFiles> valid;  // absent when data.valid is ""
  std::optional<SplitFiles> test;   // absent when data.test is ""
};
// Checks that every configured split exists, before any long work starts.
DataFiles find_data_files(const config::DataConfig& data);

struct PreparedData {
  tokenizer::Tokenizer tokenizer;
  std::filesystem::path tokenizer_dir;  // holds tokenizer.json and the .model files
  std::filesystem::path corpus_dir;     // holds {train,valid,test}.bin and prepare.json
  EncodedCorpus train;
  std::optional<EncodedCorpus> valid;
  std::optional<EncodedCorpus> test;
  FilterStats filter;  // what the length filter dropped from train
  bool tokenizer_reused = false;
  bool corpus_reused = false;
};

struct PrepareOptions {
  bool force = false;  // re-train and re-encode even when the caches are valid
  int threads = 0;     // encoding/training threads (0 = all cores)
  // Use this tokenizer (e.g. the one embedded in a checkpoint being resumed) instead of training or
  // loading one; the encoded-corpus cache is still keyed by its hash.
  std::optional<tokenizer::Tokenizer> tokenizer;
};

PreparedData prepare_data(const config::Config& config, const PrepareOptions& options = {});

// Task lm: the text files data.train / data.valid / data.test in data.dir (as named, or with .gz added)
// encoded into token sequences (data/lm_text.h) with the configured (or given) tokenizer.
struct PreparedLmText {
  tokenizer::Tokenizer tokenizer;
  std::vector<int32_t> train;
  std::optional<std::vector<int32_t>> valid;  // absent when data.valid is ""
  std::optional<std::vector<int32_t>> test;   // absent when data.test is ""
};
// The file of one split: <data.dir>/<name>, else <data.dir>/<name>.gz; throws DataError naming the key.
std::filesystem::path find_text_file(const config::DataConfig& data, const std::string& name, const std::string& key);
PreparedLmText prepare_lm_text(const config::Config& config, const PrepareOptions& options = {});

// Up to `k` pairs of two files that pass `filter` (k = 0: all), a reservoir sample drawn with `seed` and given
// back in file order; files of at most k such pairs come back whole. With max_bytes > 0 the sample is cut to a
// seeded uniform subset whose sentences (both sides) hold at most max_bytes bytes. stats counts every pair read.
ParallelCorpus sample_pairs(const SplitFiles& files, const LengthFilter& filter, int64_t k, int64_t seed,
                            int64_t max_bytes = 0);

// Encodes parallel text: source and target ids, each cut to `max_len` - 1 tokens (room for EOS/BOS).
EncodedCorpus encode_corpus(const tokenizer::Tokenizer& tok, const ParallelCorpus& text, int max_len, int threads);

}  // namespace mtx::data
