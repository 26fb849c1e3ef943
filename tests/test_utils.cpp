#include "test_utils.h"

#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace mtx::test {

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  path_ = fs::temp_directory_path() /
          ("mtx-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(path_);
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void write_text(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

void write_gzip(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  gzFile f = gzopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + path.string());
  gzwrite(f, content.data(), unsigned(content.size()));
  gzclose(f);
}

fs::path multi30k_dir() {
  if (const char* env = std::getenv("MTX_DATA_DIR"); env && *env) return env;
  return fs::path(MTX_SOURCE_DIR) / "data" / "multi30k";
}

bool have_multi30k() {
  const fs::path d = multi30k_dir();
  for (const char* f : {"train.de.gz", "train.en.gz", "val.de.gz", "val.en.gz"}) {
    if (!fs::exists(d / f)) return false;
  }
  return true;
}

}  // namespace mtx::test
