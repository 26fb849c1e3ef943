#include "mtx/data/dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "mtx/util/atomic_file.h"
#include "mtx/util/errors.h"

namespace fs = std::filesystem;

namespace mtx::data {
namespace {

constexpr char kMagic[8] = {'M', 'T', 'X', 'S', 'H', 'R', 'D', '2'};
constexpr uint32_t kVersion = 2;
constexpr uint64_t kHeaderBytes = 64;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t pairs;
  uint64_t src_tokens;
  uint64_t tgt_tokens;
  uint64_t truncated;
  uint64_t reserved;
  uint64_t checksum;  // of the 56 bytes before it
};
static_assert(sizeof(Header) == kHeaderBytes, "the shard header is 64 bytes");

// FNV-1a over the header's other fields: a torn or overwritten header is caught before its counts are used.
uint64_t header_checksum(const Header& h) {
  const auto* p = reinterpret_cast<const uint8_t*>(&h);
  uint64_t x = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < offsetof(Header, checksum); ++i) x = (x ^ p[i]) * 0x100000001b3ull;
  return x;
}

// a * b + c, or false past 2^64.
bool mul_add(uint64_t a, uint64_t b, uint64_t c, uint64_t& out) {
  return !__builtin_mul_overflow(a, b, &out) && !__builtin_add_overflow(out, c, &out);
}

}  // namespace

Mapping::Mapping(const fs::path& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError("cannot open '" + path.string() + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw DataError("cannot stat '" + path.string() + "': " + std::strerror(err));
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw DataError("cannot map '" + path.string() + "': " + std::strerror(err));
    }
    data_ = static_cast<const uint8_t*>(p);
    // Lengths are read scattered over the file: no read-ahead.
    ::madvise(p, size_, MADV_RANDOM);
  }
  fd_ = fd;  // kept for read()
}

Mapping::~Mapping() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

void Mapping::read(uint64_t at, void* out, size_t n) const {
  if (at > size_ || n > size_ - at) {
    throw DataError(path_.string() +
                    ": read past the end of the file; delete the cache directory or run `mtx "
                    "prepare --force`");
  }
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = ::pread(fd_, p, n, off_t(at));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      throw DataError("cannot read '" + path_.string() + "': " + (got < 0 ? std::strerror(errno) : "unexpected end"));
    }
    p += got;
    at += uint64_t(got);
    n -= size_t(got);
  }
}

void Mapping::release_pages() const {
  if (data_) ::madvise(const_cast<uint8_t*>(data_), size_, MADV_DONTNEED);
}

void TokenSeqs::push_back(const int32_t* ids, size_t n) {
  if (mapped()) throw Error("TokenSeqs: cannot append to a mapped corpus");
  ids_.insert(ids_.end(), ids, ids + n);
  offsets_.push_back(ids_.size());
  ++size_;
  total_ += n;
}

void TokenSeqs::append(const TokenSeqs& other) {
  if (mapped() || other.mapped()) throw Error("TokenSeqs: cannot append mapped corpora");
  const uint64_t base = ids_.size();
  ids_.insert(ids_.end(), other.ids_.begin(), other.ids_.end());
  for (size_t i = 1; i < other.offsets_.size(); ++i) offsets_.push_back(base + other.offsets_[i]);
  size_ += other.size_;
  total_ += other.total_;
}

void TokenSeqs::reserve(size_t sequences, size_t tokens) {
  offsets_.reserve(sequences + 1);
  ids_.reserve(tokens);
}

void TokenSeqs::clear() { *this = TokenSeqs(); }

IdSpan TokenSeqs::operator[](size_t i) const {
  if (parts_.empty()) return {ids_.data() + offsets_[i], size_t(offsets_[i + 1] - offsets_[i])};
  const size_t p = i / kShardPairs, local = i % kShardPairs;
  const Part& part = parts_[p];
  const uint64_t b = part.offsets[local], e = part.offsets[local + 1];
  if (b > e || e > part.tokens) corrupt(part, local);
  return {part.ids + b, size_t(e - b)};
}

void TokenSeqs::read(size_t i, std::vector<int32_t>& out) const {
  if (parts_.empty()) {
    const IdSpan s = (*this)[i];
    out.assign(s.begin(), s.end());
    return;
  }
  const size_t p = i / kShardPairs, local = i % kShardPairs;
  const Part& part = parts_[p];
  const Mapping& file = *part.file;
  auto at = [&](const void* q) { return uint64_t(static_cast<const uint8_t*>(q) - file.data()); };
  uint64_t be[2];
  file.read(at(part.offsets + local), be, sizeof be);
  if (be[0] > be[1] || be[1] > part.tokens) corrupt(part, local);
  out.resize(size_t(be[1] - be[0]));
  file.read(at(part.ids + be[0]), out.data(), out.size() * sizeof(int32_t));
}

void TokenSeqs::corrupt(const Part& part, size_t local) const {
  throw DataError(part.file->path().string() + ": corrupt shard: the offsets of pair " + std::to_string(local) +
                  " lie outside its ids; delete the cache directory or run `mtx prepare --force`");
}

const std::vector<int32_t>& TokenSeqs::ids() const {
  if (mapped()) throw Error("TokenSeqs::ids: a mapped corpus has no owned buffer");
  return ids_;
}

const std::vector<uint64_t>& TokenSeqs::offsets() const {
  if (mapped()) throw Error("TokenSeqs::offsets: a mapped corpus has no owned buffer");
  return offsets_;
}

std::vector<int32_t> TokenSeqs::all_ids() const {
  if (!mapped()) return ids_;
  std::vector<int32_t> out;
  out.reserve(total_);
  for (size_t i = 0; i < size_; ++i) {
    const IdSpan s = (*this)[i];
    out.insert(out.end(), s.begin(), s.end());
  }
  return out;
}

void TokenSeqs::assign(std::vector<int32_t> ids, std::vector<uint64_t> offsets) {
  if (offsets.empty() || offsets.front() != 0 || offsets.back() != ids.size()) {
    throw Error("inconsistent token offsets");
  }
  for (size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] < offsets[i - 1]) throw Error("inconsistent token offsets");
  }
  *this = TokenSeqs();
  size_ = offsets.size() - 1;
  total_ = ids.size();
  ids_ = std::move(ids);
  offsets_ = std::move(offsets);
}

void EncodedCorpus::release_pages() const {
  for (const auto& f : files) f->release_pages();
}

void save_corpus(const EncodedCorpus& corpus, const fs::path& path) {
  if (corpus.src.mapped() || corpus.tgt.mapped()) throw Error("save_corpus: the corpus is already a shard");
  if (corpus.src.size() != corpus.tgt.size()) throw Error("save_corpus: source and target counts differ");
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.header_bytes = uint32_t(kHeaderBytes);
  h.pairs = corpus.size();
  h.src_tokens = corpus.src.total_tokens();
  h.tgt_tokens = corpus.tgt.total_tokens();
  h.truncated = corpus.truncated;
  h.checksum = header_checksum(h);
  write_file_atomic(path, [&](std::ostream& out) {
    out.write(reinterpret_cast<const char*>(&h), sizeof h);
    for (const TokenSeqs* s : {&corpus.src, &corpus.tgt}) {
      out.write(reinterpret_cast<const char*>(s->offsets().data()), std::streamsize(s->offsets().size() * 8));
    }
    for (const TokenSeqs* s : {&corpus.src, &corpus.tgt}) {
      out.write(reinterpret_cast<const char*>(s->ids().data()), std::streamsize(s->ids().size() * 4));
    }
  });
}

EncodedCorpus load_corpus(const fs::path& path) { return load_corpus(std::vector<fs::path>{path}); }

EncodedCorpus load_corpus(const std::vector<fs::path>& shards) {
  EncodedCorpus c;
  for (size_t k = 0; k < shards.size(); ++k) {
    const fs::path& path = shards[k];
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      throw DataError("'" + path.string() + "' not found; delete the cache directory or run `mtx prepare --force`");
    }
    auto file = std::make_shared<const Mapping>(path);
    const std::string name = path.string();
    Header h{};
    if (file->size() < kHeaderBytes)
      throw DataError(name + ": truncated shard (" + std::to_string(file->size()) + " bytes)");
    std::memcpy(&h, file->data(), sizeof h);
    if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kVersion) {
      throw DataError(name + ": not an mtx shard file of format " + std::to_string(kVersion) +
                      "; delete the cache directory or run `mtx prepare --force`");
    }
    if (h.header_bytes != kHeaderBytes || h.checksum != header_checksum(h)) {
      throw DataError(name + ": corrupt shard header; delete the cache directory or run `mtx prepare --force`");
    }
    uint64_t expected = 0, offsets_bytes = 0, ids_bytes = 0;
    const bool fits = mul_add(h.pairs + 1, 16, 0, offsets_bytes) && h.pairs + 1 > h.pairs &&
                      mul_add(h.src_tokens, 4, 0, ids_bytes) && mul_add(h.tgt_tokens, 4, ids_bytes, ids_bytes) &&
                      mul_add(1, offsets_bytes, kHeaderBytes, expected) && mul_add(1, ids_bytes, expected, expected);
    if (!fits || expected != file->size()) {
      throw DataError(name + ": truncated or corrupt shard: " + std::to_string(file->size()) + " bytes, its header (" +
                      std::to_string(h.pairs) + " pairs, " + std::to_string(h.src_tokens) + " + " +
                      std::to_string(h.tgt_tokens) + " tokens) says " + (fits ? std::to_string(expected) : "more") +
                      "; delete the cache directory or run `mtx prepare --force`");
    }
    if (k + 1 < shards.size() && h.pairs != kShardPairs) {
      throw DataError(name + ": a shard before the last holds " + std::to_string(h.pairs) + " pairs, not " +
                      std::to_string(kShardPairs));
    }
    const uint8_t* base = file->data();
    const auto* src_off = reinterpret_cast<const uint64_t*>(base + kHeaderBytes);
    const auto* tgt_off = src_off + h.pairs + 1;
    const auto* src_ids = reinterpret_cast<const int32_t*>(tgt_off + h.pairs + 1);
    const auto* tgt_ids = src_ids + h.src_tokens;
    if (src_off[0] != 0 || src_off[h.pairs] != h.src_tokens || tgt_off[0] != 0 || tgt_off[h.pairs] != h.tgt_tokens) {
      throw DataError(name +
                      ": corrupt shard: its offsets disagree with its header; delete the cache directory or "
                      "run `mtx prepare --force`");
    }
    c.src.parts_.push_back({src_off, src_ids, size_t(h.pairs), h.src_tokens, file});
    c.tgt.parts_.push_back({tgt_off, tgt_ids, size_t(h.pairs), h.tgt_tokens, file});
    c.src.size_ += h.pairs;
    c.tgt.size_ += h.pairs;
    c.src.total_ += h.src_tokens;
    c.tgt.total_ += h.tgt_tokens;
    c.truncated += h.truncated;
    c.files.push_back(std::move(file));
  }
  return c;
}

}  // namespace mtx::data
