#include "test_utils.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <zlib.h>

#include "mtx/util/cpu_isa.h"
#include "mtx/util/system.h"

#include <sys/wait.h>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace mtx::test {

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  path_ = fs::temp_directory_path() / ("mtx-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
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

CommandResult run_mtx(const std::string& args, const std::string& env) {
  // args may hold further shell after the mtx command: the group captures all of its output.
  const std::string cmd = "{ " + env + (env.empty() ? "" : " ") + std::string(MTX_BINARY) + " " + args + "; } 2>&1";
  CommandResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string venv_python(const std::string& modules) {
  std::string py = (fs::path(MTX_SOURCE_DIR) / ".venv" / "bin" / "python").string();
  if (const char* env = std::getenv("MTX_TEST_PYTHON"); env && *env) py = env;
  if (!fs::exists(py)) return "";
  const std::string cmd = "'" + py + "' -c 'import " + modules + "' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0 ? py : "";
}

fs::path cache_dir(const std::string& name) {
  if (const char* env = std::getenv("MTX_TEST_CACHE"); env && *env) return fs::path(env) / name;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "mtx" / name;
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "mtx" / name;
  return fs::path(MTX_SOURCE_DIR) / "data" / "cache" / name;
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

mtx::train::TrainSummary train_run(const mtx::config::Config& config, const std::filesystem::path& run_dir,
                                   std::optional<mtx::train::CheckpointContent> resume) {
  return mtx::train::Trainer(mtx::train::RunSettings{config, run_dir, std::move(resume), std::nullopt}).run();
}

mtx::config::Config toy_setup(const TempDir& tmp) {
  const char* de[] = {"ein Hund läuft", "zwei Männer spielen Fußball", "eine Frau liest ein Buch",
                      "Kinder spielen im Park", "ein Mann fährt Fahrrad"};
  const char* en[] = {"a dog runs", "two men play soccer", "a woman reads a book", "children play in the park",
                      "a man rides a bike"};
  std::string tde, ten, vde, ven;
  for (int i = 0; i < 300; ++i) {
    tde += std::string(de[i % 5]) + (i % 7 == 0 ? " heute" : "") + "\n";
    ten += std::string(en[i % 5]) + (i % 7 == 0 ? " today" : "") + "\n";
  }
  for (int i = 0; i < 20; ++i) {
    vde += std::string(de[(i + 2) % 5]) + "\n";
    ven += std::string(en[(i + 2) % 5]) + "\n";
  }
  tde += "ein sehr sehr sehr sehr sehr sehr langer Satz\n";  // dropped by the filter below
  ten += "a long one\n";
  mtx::test::write_gzip(tmp / "data" / "train.de.gz", tde);
  mtx::test::write_gzip(tmp / "data" / "train.en.gz", ten);
  mtx::test::write_text(tmp / "data" / "val.de", vde);
  mtx::test::write_text(tmp / "data" / "val.en", ven);
  mtx::config::Config c;
  c.data.dir = (tmp / "data").string();
  c.data.cache_dir = (tmp / "cache").string();
  c.data.test = "";
  c.data.filter_max_tokens = 6;
  c.tokenizer.vocab_size = 300;
  c.model.max_len = 64;
  c.model.d_model = 32;
  c.model.heads = 4;
  c.model.encoder_layers = 1;
  c.model.decoder_layers = 1;
  c.model.ffn_dim = 64;
  c.train.max_tokens = 256;
  c.train.threads = 2;
  return c;
}

}  // namespace mtx::test

// The test binary's main: gtest's, after the same OpenBLAS kernel choice the mtx binary makes (so in-process
// tests and the CLI tests they compare with run the same kernels, and neither the slow fallback ones).
int main(int argc, char** argv) {
  mtx::select_blas_kernels(argv);
  // ctest's Isa.<level> runs (MTX_ISA_LEVEL_RUN=1): a level that caps nothing here runs the kernels at the CPU's
  // widest level, as the plain run does, so it is skipped (exit 77, ctest's SKIP_RETURN_CODE) rather than run twice.
  const char* level_run = std::getenv("MTX_ISA_LEVEL_RUN");
  if (level_run && std::string(level_run) == "1" && !mtx::cpu::capped()) {
    std::printf("MTX_CPU_ISA runs the kernels at %s, this CPU's widest level, as the plain run does: skipped\n",
                mtx::cpu::name(mtx::cpu::isa()));
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
