// Encoded (token id) corpora in flat memory, and their binary cache format.
// Sequences hold subword ids only: BOS/EOS are added when batches are built.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace mtx::data {

struct IdSpan {
  const int32_t* data = nullptr;
  size_t size = 0;
  const int32_t* begin() const { return data; }
  const int32_t* end() const { return data + size; }
  int32_t operator[](size_t i) const { return data[i]; }
};

// Many id sequences in one buffer (offsets_[i]..offsets_[i+1]).
class TokenSeqs {
 public:
  void push_back(const int32_t* ids, size_t n);
  void push_back(const std::vector<int32_t>& ids) { push_back(ids.data(), ids.size()); }
  void reserve(size_t sequences, size_t tokens);
  size_t size() const { return offsets_.size() - 1; }
  IdSpan operator[](size_t i) const { return {ids_.data() + offsets_[i], size_t(offsets_[i + 1] - offsets_[i])}; }
  size_t length(size_t i) const { return size_t(offsets_[i + 1] - offsets_[i]); }
  size_t total_tokens() const { return ids_.size(); }
  const std::vector<int32_t>& ids() const { return ids_; }
  const std::vector<uint64_t>& offsets() const { return offsets_; }
  void assign(std::vector<int32_t> ids, std::vector<uint64_t> offsets);  // checks consistency

 private:
  std::vector<int32_t> ids_;
  std::vector<uint64_t> offsets_{0};
};

// Aligned source and target sequences of one split.
struct EncodedCorpus {
  TokenSeqs src;
  TokenSeqs tgt;
  size_t truncated = 0;  // sequences cut to the model's maximum length while encoding
  size_t size() const { return src.size(); }
};

// Binary cache file: magic, version, counts, offsets, ids (little-endian host layout).
void save_corpus(const EncodedCorpus& corpus, const std::filesystem::path& path);
// Throws DataError when the file is missing, truncated or of another format version.
EncodedCorpus load_corpus(const std::filesystem::path& path);

}  // namespace mtx::data
