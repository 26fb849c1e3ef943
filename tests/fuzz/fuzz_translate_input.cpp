// translate's input line handling (stdin through fd_line_source): any bytes, any line cap. Lines come out
// one per input line, at most the cap long, as the input line's beginning (whole UTF-8 characters when
// cut) without one trailing '\r'.
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "mtx/decode/stream.h"
#include "mtx/util/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t cap = 4 + data[0] % 61;  // small caps, so that cutting is exercised
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const int fd = ::memfd_create("mtx-fuzz-stdin", 0);
  if (fd < 0) return 0;
  if (!input.empty() && ::write(fd, input.data(), input.size()) != ssize_t(input.size())) mtx::fuzz::broken("memfd");
  ::lseek(fd, 0, SEEK_SET);
  auto source = mtx::decode::fd_line_source(fd, cap);
  std::vector<std::string> expected = mtx::fuzz::split_all(input, '\n');
  if (!expected.empty() && expected.back().empty()) expected.pop_back();  // a final '\n' ends the last line
  std::string line;
  size_t n = 0;
  while (source->next(line)) {
    if (n >= expected.size()) mtx::fuzz::broken("more lines out than in");
    std::string want = expected[n++];
    if (line.size() > cap) mtx::fuzz::broken("a line longer than the cap");
    if (want.size() <= cap) {
      if (!want.empty() && want.back() == '\r') want.pop_back();
      if (line != want) mtx::fuzz::broken("a short line changed");
      continue;
    }
    if (want.compare(0, line.size(), line) != 0) mtx::fuzz::broken("a cut line is not the line's beginning");
    const std::string kept = want.substr(0, cap);
    if (mtx::utf8::is_valid(want) && (!mtx::utf8::is_valid(line) || kept.size() - line.size() > 4)) {
      mtx::fuzz::broken("a cut line of valid UTF-8 is not whole characters");
    }
  }
  if (n != expected.size()) mtx::fuzz::broken("fewer lines out than in");
  ::close(fd);
  return 0;
}
