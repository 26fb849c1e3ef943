// SHA-256 (FIPS 180-4) for content hashes: cache keys, tokenizer identity, checkpoint checksums.
// Incremental (update/hex) or one-shot over a string or a file. OpenSSL's libcrypto computes it (with the
// CPU's SHA instructions where it has them).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX

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
  std::unique_ptr<::evp_md_ctx_st, void (*)(::evp_md_ctx_st*)> ctx_;
};

std::string sha256_hex(std::string_view text);
// Standard base64 (RFC 4648, with '=' padding) of `bytes`, as OpenSSL's EVP_EncodeBlock writes it.
std::string base64(std::string_view bytes);
// Hash of a file's bytes; throws DataError when it cannot be read.
std::string sha256_file(const std::filesystem::path& path);

}  // namespace mtx
