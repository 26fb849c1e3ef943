// The architecture's one-way arrows (../shared/DESIGN.md), checked on the sources: inference -- decode/,
// bundle/, and the CLI paths that translate, score, generate or draw from a model -- never includes train/,
// directly or through any header it includes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = MTX_SOURCE_DIR;

// The mtx headers a file includes ("mtx/..." only), as paths under include/.
std::vector<std::string> mtx_includes(const fs::path& file) {
  static const std::regex include(R"re(^\s*#\s*include\s*"(mtx/[^"]+)")re");
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, include)) out.push_back(m[1]);
  }
  return out;
}

// Every mtx header reachable from `file`, each with the chain that reaches it.
std::vector<std::pair<std::string, std::string>> closure(const fs::path& file) {
  std::vector<std::pair<std::string, std::string>> reached;  // header, chain
  std::set<std::string> seen;
  std::vector<std::pair<fs::path, std::string>> todo{{file, file.lexically_relative(kRoot).string()}};
  while (!todo.empty()) {
    const auto [f, chain] = todo.back();
    todo.pop_back();
    for (const std::string& h : mtx_includes(f)) {
      if (!seen.insert(h).second) continue;
      reached.emplace_back(h, chain + " -> " + h);
      todo.emplace_back(kRoot / "include" / h, chain + " -> " + h);
    }
  }
  return reached;
}

std::vector<fs::path> inference_sources() {
  std::vector<fs::path> files;
  for (const char* dir :
       {"include/mtx/decode", "src/decode", "include/mtx/bundle", "src/bundle", "include/mtx/serve", "src/serve"}) {
    if (!fs::exists(kRoot / dir)) continue;
    for (const auto& e : fs::directory_iterator(kRoot / dir)) files.push_back(e.path());
  }
  for (const char* cli : {"cmd_translate.cpp", "cmd_eval.cpp", "cmd_generate.cpp", "cmd_plot.cpp", "cmd_serve.cpp",
                          "cmd_export.cpp", "cmd_quantize.cpp"}) {
    if (fs::exists(kRoot / "src/cli" / cli)) files.push_back(kRoot / "src/cli" / cli);
  }
  return files;
}

}  // namespace

TEST(Layering, InferenceNeverIncludesTrain) {
  const auto files = inference_sources();
  ASSERT_GE(files.size(), 8u) << "the inference sources moved: update this test";
  for (const auto& f : files) {
    for (const auto& [header, chain] : closure(f)) {
      EXPECT_NE(header.rfind("mtx/train/", 0), 0u) << chain;
    }
  }
}

TEST(Layering, TheCheckSeesIncludesThroughHeaders) {
  // A header that the closure must follow: translator.h reaches model/transformer.h through its own includes.
  bool found = false;
  for (const auto& [header, chain] : closure(kRoot / "src/cli/cmd_translate.cpp"))
    found |= header == "mtx/model/transformer.h";
  EXPECT_TRUE(found);
}
