#include "mtx/data/dataset.h"

#include <cstring>
#include <fstream>

#include "mtx/util/atomic_file.h"
#include "mtx/util/errors.h"

namespace fs = std::filesystem;

namespace mtx::data {
namespace {

constexpr char kCorpusMagic[8] = {'M', 'T', 'X', 'C', 'O', 'R', 'P', '1'};
constexpr uint32_t kVersion = 1;

void write_seqs(std::ostream& out, const TokenSeqs& seqs) {
  const uint64_t n = seqs.size(), t = seqs.total_tokens();
  out.write(reinterpret_cast<const char*>(&n), sizeof n);
  out.write(reinterpret_cast<const char*>(&t), sizeof t);
  out.write(reinterpret_cast<const char*>(seqs.offsets().data()), std::streamsize((n + 1) * sizeof(uint64_t)));
  out.write(reinterpret_cast<const char*>(seqs.ids().data()), std::streamsize(t * sizeof(int32_t)));
}

TokenSeqs read_seqs(std::istream& in, const fs::path& path) {
  uint64_t n = 0, t = 0;
  in.read(reinterpret_cast<char*>(&n), sizeof n);
  in.read(reinterpret_cast<char*>(&t), sizeof t);
  if (!in || n > (uint64_t(1) << 40) || t > (uint64_t(1) << 40))
    throw DataError(path.string() + ": corrupt corpus header");
  std::vector<uint64_t> offsets(n + 1);
  std::vector<int32_t> ids(t);
  in.read(reinterpret_cast<char*>(offsets.data()), std::streamsize(offsets.size() * sizeof(uint64_t)));
  in.read(reinterpret_cast<char*>(ids.data()), std::streamsize(ids.size() * sizeof(int32_t)));
  if (!in) throw DataError(path.string() + ": truncated corpus file");
  TokenSeqs seqs;
  try {
    seqs.assign(std::move(ids), std::move(offsets));
  } catch (const Error& e) {
    throw DataError(path.string() + ": " + e.what());
  }
  return seqs;
}

}  // namespace

void TokenSeqs::push_back(const int32_t* ids, size_t n) {
  ids_.insert(ids_.end(), ids, ids + n);
  offsets_.push_back(ids_.size());
}

void TokenSeqs::reserve(size_t sequences, size_t tokens) {
  offsets_.reserve(sequences + 1);
  ids_.reserve(tokens);
}

void TokenSeqs::assign(std::vector<int32_t> ids, std::vector<uint64_t> offsets) {
  if (offsets.empty() || offsets.front() != 0 || offsets.back() != ids.size()) {
    throw Error("inconsistent token offsets");
  }
  for (size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] < offsets[i - 1]) throw Error("inconsistent token offsets");
  }
  ids_ = std::move(ids);
  offsets_ = std::move(offsets);
}

void save_corpus(const EncodedCorpus& corpus, const fs::path& path) {
  write_file_atomic(path, [&](std::ostream& out) {
    out.write(kCorpusMagic, sizeof kCorpusMagic);
    out.write(reinterpret_cast<const char*>(&kVersion), sizeof kVersion);
    const uint64_t truncated = corpus.truncated;
    out.write(reinterpret_cast<const char*>(&truncated), sizeof truncated);
    write_seqs(out, corpus.src);
    write_seqs(out, corpus.tgt);
  });
}

EncodedCorpus load_corpus(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot read '" + path.string() + "'");
  char magic[8];
  uint32_t version = 0;
  uint64_t truncated = 0;
  in.read(magic, sizeof magic);
  in.read(reinterpret_cast<char*>(&version), sizeof version);
  in.read(reinterpret_cast<char*>(&truncated), sizeof truncated);
  if (!in || std::memcmp(magic, kCorpusMagic, sizeof kCorpusMagic) != 0 || version != kVersion) {
    throw DataError(path.string() + ": not an mtx corpus file of version " + std::to_string(kVersion));
  }
  EncodedCorpus c;
  c.truncated = truncated;
  c.src = read_seqs(in, path);
  c.tgt = read_seqs(in, path);
  if (c.src.size() != c.tgt.size()) throw DataError(path.string() + ": source and target counts differ");
  return c;
}

}  // namespace mtx::data
