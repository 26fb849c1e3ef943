#include "mtx/util/hash.h"

#include <openssl/evp.h>

#include <fstream>
#include <vector>

#include "mtx/util/errors.h"

namespace mtx {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
  if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("SHA-256: OpenSSL could not start a digest");
  }
}

Sha256& Sha256::update(const void* data, size_t size) {
  if (size > 0 && EVP_DigestUpdate(ctx_.get(), data, size) != 1) {
    throw std::runtime_error("SHA-256: OpenSSL could not update a digest");
  }
  return *this;
}

std::array<uint8_t, 32> Sha256::digest() {
  std::array<uint8_t, 32> out{};
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(ctx_.get(), out.data(), &n) != 1 || n != out.size()) {
    throw std::runtime_error("SHA-256: OpenSSL could not finish a digest");
  }
  return out;
}

std::string Sha256::hex() {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t byte : digest()) {
    s += digits[byte >> 4];
    s += digits[byte & 15];
  }
  return s;
}

std::string sha256_hex(std::string_view text) { return Sha256().update(text).hex(); }

std::string base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), int(bytes.size()));
  out.resize(size_t(n));
  return out;
}

std::string sha256_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot read '" + path.string() + "'");
  Sha256 h;
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    h.update(buf.data(), size_t(in.gcount()));
  }
  if (in.bad()) throw DataError("error while reading '" + path.string() + "'");
  return h.hex();
}

}  // namespace mtx
