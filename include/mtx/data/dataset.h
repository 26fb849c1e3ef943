// Encoded (token id) corpora: built in flat memory, stored as shard files and read back memory-mapped, so a
// corpus larger than memory trains with the page cache behind it and ranks on one machine share its pages.
// Sequences hold subword ids only: BOS/EOS are added when batches are built.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
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

// A whole file mapped read-only.
class Mapping {
 public:
  explicit Mapping(const std::filesystem::path& path);  // throws DataError naming the file
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }
  // Drops this process's mapping of the pages read so far; they stay in the page cache, and a later read maps
  // them again.
  void release_pages() const;
  // Copies bytes [at, at + n) of the file without mapping them (pread); throws DataError naming the file.
  void read(uint64_t at, void* out, size_t n) const;

 private:
  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
};

struct EncodedCorpus;

// Many id sequences: in one owned buffer (offsets_[i]..offsets_[i+1]) while built, or views of mapped shards,
// every shard but the last holding exactly kShardPairs sequences.
class TokenSeqs {
 public:
  void push_back(const int32_t* ids, size_t n);
  void push_back(const std::vector<int32_t>& ids) { push_back(ids.data(), ids.size()); }
  void append(const TokenSeqs& other);  // both owned
  void reserve(size_t sequences, size_t tokens);
  void clear();
  size_t size() const { return size_; }
  IdSpan operator[](size_t i) const;
  size_t length(size_t i) const { return (*this)[i].size; }
  // Sequence i copied into `out`. A mapped corpus is read from its file, not through the mapping: a fault on a
  // mapping may map much more than the page read (a large folio of the page cache, up to 2 MB), so pairs read
  // at random through it would keep resident memory in proportion to the corpus. Batches are built this way.
  void read(size_t i, std::vector<int32_t>& out) const;
  size_t total_tokens() const { return total_; }
  bool mapped() const { return !parts_.empty(); }
  // Owned storage only (throws Error on a mapped one).
  const std::vector<int32_t>& ids() const;
  const std::vector<uint64_t>& offsets() const;
  void assign(std::vector<int32_t> ids, std::vector<uint64_t> offsets);  // checks consistency
  // Every id, in order (for tests and small corpora).
  std::vector<int32_t> all_ids() const;

 private:
  friend EncodedCorpus load_corpus(const std::vector<std::filesystem::path>& shards);
  struct Part {
    const uint64_t* offsets;  // [count + 1], offsets[0] == 0, offsets[count] == tokens
    const int32_t* ids;       // [tokens]
    size_t count;
    uint64_t tokens;
    std::shared_ptr<const Mapping> file;  // keeps the pointers above valid
  };
  [[noreturn]] void corrupt(const Part& part, size_t local) const;
  std::vector<int32_t> ids_;
  std::vector<uint64_t> offsets_{0};
  std::vector<Part> parts_;  // empty while owned
  size_t size_ = 0;
  uint64_t total_ = 0;
};

// Aligned source and target sequences of one split.
struct EncodedCorpus {
  TokenSeqs src;
  TokenSeqs tgt;
  size_t truncated = 0;  // sequences cut to the model's maximum length while encoding
  size_t size() const { return src.size(); }
  // The mapped shard files behind a loaded corpus (empty for one built in memory).
  std::vector<std::shared_ptr<const Mapping>> files;
  // Lets the kernel unmap the pages read so far (they stay in the page cache): resident memory then follows the
  // batches being built, not the corpus. No-op for a corpus in memory.
  void release_pages() const;
};

// Sequences per shard file: a split of more pairs is written as several shards.
constexpr size_t kShardPairs = size_t(1) << 20;

// Shard file, format 2 (little-endian host layout): a 64-byte header (magic "MTXSHRD2", version, pair and token
// counts, truncated count, a checksum of the header), source offsets [pairs + 1] and target offsets [pairs + 1]
// as uint64, then source ids and target ids as int32.
void save_corpus(const EncodedCorpus& corpus, const std::filesystem::path& path);
// Maps one shard file. Throws DataError naming the file when it is missing, of another format or version, its
// header is corrupt, or its size disagrees with its header -- before anything its header sizes is touched.
// An offset found corrupt later, when its sequence is read, is a DataError naming the file and the pair.
EncodedCorpus load_corpus(const std::filesystem::path& path);
// Maps shard files as one corpus, in order; every one but the last must hold kShardPairs pairs.
EncodedCorpus load_corpus(const std::vector<std::filesystem::path>& shards);

}  // namespace mtx::data
