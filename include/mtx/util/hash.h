// SHA-256 (FIPS 180-4) for content hashes: cache keys, tokenizer identity, checkpoint checksums.
// Incremental (update/hex) or one-shot over a string or a file.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace mtx {

class Sha256 {
 public:
  Sha256();
  Sha256& update(const void* data, size_t size);
  Sha256& update(std::string_view text) { return update(text.data(), text.size()); }
  // Finishes the digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> digest();
  std::string hex();

 private:
  void compress(const uint8_t* block);
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::string_view text);
// Hash of a file's bytes; throws DataError when it cannot be read.
std::string sha256_file(const std::filesystem::path& path);

}  // namespace mtx
