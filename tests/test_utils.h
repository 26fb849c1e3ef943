// Shared test helpers: temp directories, the Multi30k location, small generated fixtures.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "mtx/config/config.h"
#include "mtx/train/trainer.h"

namespace mtx::test {

// A fresh directory under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

void write_text(const std::filesystem::path& path, const std::string& content);
void write_gzip(const std::filesystem::path& path, const std::string& content);

// Multi30k directory (env MTX_DATA_DIR, else <source>/data/multi30k). Tests that need it fail with
// a message saying how to fetch it, unless MTX_ALLOW_MISSING_DATA=1 (then they skip).
std::filesystem::path multi30k_dir();
bool have_multi30k();

// The project's .venv python (env MTX_TEST_PYTHON overrides it) when it imports every module of `modules` (a
// comma-separated Python import list, e.g. "numpy, safetensors"); "" when it is missing or lacks one.
std::string venv_python(const std::string& modules);

// Where tests keep what is slow to make and is keyed by its recipe (models an oracle trains): env MTX_TEST_CACHE,
// else $XDG_CACHE_HOME/mtx or ~/.cache/mtx, beside pip's cache, so that a fresh clone finds what an earlier one
// made; <source>/data/cache when there is no home. Returns <that>/<name>.
std::filesystem::path cache_dir(const std::string& name);

// Runs the mtx binary under test with `args` (which may go on with more shell) and optional leading
// environment assignments; captures stdout and stderr together.
// Whether this build runs under AddressSanitizer (scripts/sanitize.sh's build).
constexpr bool sanitized() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

struct CommandResult {
  int code = -1;       // exit status (-1: killed or not run)
  std::string output;  // stdout and stderr
};
CommandResult run_mtx(const std::string& args, const std::string& env = "");

// A small German/English corpus under tmp/data (gzip train of 301 pairs, one dropped by the length
// filter; plain val of 20) and a config for it with a tiny model and its cache under tmp/cache.
mtx::config::Config toy_setup(const TempDir& tmp);

// Trains `config` into `run_dir` as a new run, or with `resume` (the run's last.pt) continues it with
// `config`'s settings as given (without train::resume_run's checks of what a resume may change).
mtx::train::TrainSummary train_run(const mtx::config::Config& config, const std::filesystem::path& run_dir,
                                   std::optional<mtx::train::CheckpointContent> resume = std::nullopt);

// The message of the E that `fn` throws ("" when it throws none). Every mtx error at a config or
// I/O boundary must be one line and exit with code 2; this checks both.
template <class E, class F>
std::string boundary_error(F fn) {
  try {
    fn();
  } catch (const E& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "message must be one line";
    return e.what();
  }
  return "";
}

}  // namespace mtx::test

// Inside a TEST: skip or fail (see multi30k_dir) when Multi30k is not available.
#define MTX_REQUIRE_MULTI30K()                                                                 \
  do {                                                                                         \
    if (!::mtx::test::have_multi30k()) {                                                       \
      if (const char* allow = std::getenv("MTX_ALLOW_MISSING_DATA"); allow && *allow == '1') { \
        GTEST_SKIP() << "Multi30k not found at " << ::mtx::test::multi30k_dir();               \
      }                                                                                        \
      FAIL() << "Multi30k not found at " << ::mtx::test::multi30k_dir()                        \
             << ": run scripts/get_multi30k.sh data/multi30k (or set MTX_DATA_DIR)";           \
    }                                                                                          \
  } while (0)
