// Shared by the libFuzzer targets: a scratch directory per process and input splitting. A target lets
// mtx::Error (the errors mtx reports to users in one line) pass and treats anything else -- another
// exception, a sanitizer report, a broken invariant (abort) -- as a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace mtx::fuzz {

inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("mtx-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch(), ec);
    });
    return d;
  }();
  return dir;
}

inline std::filesystem::path write_scratch(const std::string& name, std::string_view bytes) {
  const auto path = scratch() / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
  return path;
}

// Splits at `sep` (all pieces, empty ones included).
inline std::vector<std::string> split_all(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = s.find(sep, start);
    out.emplace_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

// A broken invariant: say which and abort (libFuzzer saves the input).
[[noreturn]] inline void broken(const char* what) {
  std::fprintf(stderr, "mtx fuzz: invariant broken: %s\n", what);
  std::abort();
}

}  // namespace mtx::fuzz
