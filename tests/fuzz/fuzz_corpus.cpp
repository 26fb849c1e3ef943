// The corpus reader, plain and gzip: the input as a plain file, the same bytes gzip-compressed (both must
// read alike: the same lines or both a DataError), and the raw bytes under a .gz name (a damaged or
// non-gzip .gz file). Then read_parallel with length filters over two files cut from the input.
#include <zlib.h>

#include "fuzz_util.h"
#include "mtx/data/corpus.h"
#include "mtx/util/errors.h"

namespace {

std::vector<std::string> read_or_error(const std::filesystem::path& p, bool& failed) {
  try {
    failed = false;
    return mtx::data::read_lines(p);
  } catch (const mtx::DataError&) {
    failed = true;
    return {};
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto plain = mtx::fuzz::write_scratch("corpus.txt", bytes);
  const auto gz = mtx::fuzz::scratch() / "corpus.txt.gz";
  {
    gzFile f = gzopen(gz.c_str(), "wb");
    if (size > 0) gzwrite(f, data, unsigned(size));
    gzclose(f);
  }
  bool plain_failed = false, gz_failed = false;
  const auto a = read_or_error(plain, plain_failed);
  const auto b = read_or_error(gz, gz_failed);
  if (plain_failed != gz_failed || a != b) mtx::fuzz::broken("a file and its gzip copy read differently");
  try {
    mtx::data::read_lines(mtx::fuzz::write_scratch("raw.gz", bytes));
  } catch (const mtx::DataError&) {
  }
  const size_t half = size / 2;
  const auto src = mtx::fuzz::write_scratch("pair.de", bytes.substr(0, half));
  const auto tgt = mtx::fuzz::write_scratch("pair.en", bytes.substr(half));
  mtx::data::LengthFilter filter;
  filter.min_tokens = size % 3;
  filter.max_tokens = int(size % 17);
  filter.max_ratio = size % 2 ? 1.5 : 0.0;
  try {
    const auto pc = mtx::data::read_parallel(src, tgt, filter);
    if (pc.src.size() != pc.tgt.size() || pc.stats.kept != pc.size() || pc.stats.read < pc.stats.kept) {
      mtx::fuzz::broken("read_parallel's counts disagree");
    }
  } catch (const mtx::DataError&) {
  }
  return 0;
}
