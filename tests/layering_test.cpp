// The architecture's rules, read from docs/design.md's `layers` block and checked on the sources: which
// areas each area may include, the inference code that never reaches train/ (directly or through any header
// it includes), and the areas that include no LibTorch header.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = MTX_SOURCE_DIR;

// docs/design.md's ```layers block: "name: word word ..." per line, '#' comments.
std::map<std::string, std::vector<std::string>> design_rules() {
  std::ifstream in(kRoot / "docs" / "design.md");
  std::map<std::string, std::vector<std::string>> rules;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (!inside) {
      inside = line.rfind("```layers", 0) == 0;
      continue;
    }
    if (line.rfind("```", 0) == 0) break;
    line = line.substr(0, line.find('#'));
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream words(line.substr(colon + 1));
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    auto& list = rules[name];
    for (std::string w; words >> w;) list.push_back(w);
  }
  return rules;
}

std::vector<std::string> included(const fs::path& file, const std::regex& pattern) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, pattern)) out.push_back(m[1]);
  }
  return out;
}

// The mtx headers a file includes ("mtx/..." only), as paths under include/.
std::vector<std::string> mtx_includes(const fs::path& file) {
  static const std::regex include(R"re(^\s*#\s*include\s*"(mtx/[^"]+)")re");
  return included(file, include);
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

// The sources of an area: include/mtx/<area>/ and src/<area>/, recursively (the Python package's: python/src/).
std::vector<fs::path> area_files(const std::string& area) {
  std::vector<fs::path> files;
  for (const fs::path& dir : {kRoot / "include" / "mtx" / area, kRoot / "src" / area, kRoot / area / "src"}) {
    if (!fs::exists(dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
  }
  return files;
}

// An `inference:` entry: an area, or one file under the root.
std::vector<fs::path> entry_files(const std::string& entry) {
  if (entry.find('/') != std::string::npos) {
    return fs::exists(kRoot / entry) ? std::vector<fs::path>{kRoot / entry} : std::vector<fs::path>{};
  }
  return area_files(entry);
}

// A cycle among the areas that `rules` lets include each other ("a -> b -> a"), or "" when there is none.
std::string area_cycle(const std::map<std::string, std::vector<std::string>>& rules) {
  std::map<std::string, int> state;  // 1: on the current path, 2: done
  std::vector<std::string> path;
  std::function<std::string(const std::string&)> visit = [&](const std::string& area) -> std::string {
    state[area] = 1;
    path.push_back(area);
    const auto it = rules.find(area);
    if (it != rules.end()) {
      for (const std::string& next : it->second) {
        if (next == area || !rules.count(next)) continue;
        if (state[next] == 1) {
          std::string cycle;
          for (auto p = std::find(path.begin(), path.end(), next); p != path.end(); ++p) cycle += *p + " -> ";
          return cycle + next;
        }
        if (state[next] == 0) {
          const std::string found = visit(next);
          if (!found.empty()) return found;
        }
      }
    }
    path.pop_back();
    state[area] = 2;
    return "";
  };
  for (const auto& [area, allowed] : rules) {
    if (state[area] == 0) {
      const std::string found = visit(area);
      if (!found.empty()) return found;
    }
  }
  return "";
}

}  // namespace

TEST(Layering, DesignDeclaresEveryArea) {
  const auto rules = design_rules();
  ASSERT_TRUE(rules.count("inference") && rules.count("no-torch")) << "docs/design.md has no complete layers block";
  for (const fs::path& dir : {kRoot / "include" / "mtx", kRoot / "src"}) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.is_directory()) {
        EXPECT_TRUE(rules.count(e.path().filename().string())) << e.path() << ": not in design.md";
      }
    }
  }
}

TEST(Layering, AreasIncludeOnlyWhatDesignAllows) {
  static const std::regex area_of(R"re(^mtx/([a-z_0-9]+)/)re");
  int checked = 0;
  for (const auto& [area, allowed] : design_rules()) {
    if (area == "inference" || area == "no-torch") continue;
    const std::set<std::string> ok(allowed.begin(), allowed.end());
    for (const auto& file : area_files(area)) {
      for (const std::string& h : mtx_includes(file)) {
        std::smatch m;
        ASSERT_TRUE(std::regex_search(h, m, area_of)) << file << ": " << h;
        ++checked;
        EXPECT_TRUE(m[1] == area || ok.count(m[1])) << file.lexically_relative(kRoot) << " includes " << h
                                                    << ", but docs/design.md does not let " << area << " use " << m[1];
      }
    }
  }
  EXPECT_GT(checked, 100) << "the sources moved: update this test";
}

TEST(Layering, InferenceNeverIncludesTrain) {
  auto rules = design_rules();
  std::vector<fs::path> files;
  for (const auto& entry : rules["inference"]) {
    const auto more = entry_files(entry);
    files.insert(files.end(), more.begin(), more.end());
  }
  ASSERT_GE(files.size(), 8u) << "the inference sources moved: update docs/design.md";
  for (const auto& f : files) {
    for (const auto& [header, chain] : closure(f)) EXPECT_NE(header.rfind("mtx/train/", 0), 0u) << chain;
  }
}

TEST(Layering, NoTorchAreasIncludeNoLibTorchHeader) {
  static const std::regex system_include(R"re(^\s*#\s*include\s*<([^>]+)>)re");
  auto rules = design_rules();
  int files = 0;
  for (const auto& area : rules["no-torch"]) {
    for (const auto& file : area_files(area)) {
      ++files;
      for (const std::string& h : included(file, system_include)) {
        for (const char* torch : {"torch/", "ATen/", "c10/"}) {
          EXPECT_NE(h.rfind(torch, 0), 0u) << file.lexically_relative(kRoot) << " includes <" << h << ">";
        }
      }
    }
  }
  EXPECT_GT(files, 0);
}

TEST(Layering, TheCheckSeesIncludesThroughHeaders) {
  // A header that the closure must follow: translator.h reaches model/transformer.h through its own includes.
  bool found = false;
  for (const auto& [header, chain] : closure(kRoot / "src/cli/cmd_translate.cpp"))
    found |= header == "mtx/model/transformer.h";
  EXPECT_TRUE(found);
}

TEST(Layering, ThePythonPackageUsesTheLibraryAndNothingUsesIt) {
  const auto rules = design_rules();
  ASSERT_TRUE(rules.count("python")) << "docs/design.md's layers block has no python area";
  EXPECT_FALSE(area_files("python").empty()) << "python/src holds the binding";
  for (const auto& [area, allowed] : rules) {
    EXPECT_EQ(std::count(allowed.begin(), allowed.end(), "python"), 0) << area << " may not use the Python package";
  }
  for (const auto& file : area_files("python")) {
    std::ifstream in(file);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find("src/cli/"), std::string::npos) << file << ": the package uses the library, not the CLI";
  }
}

// No area reaches itself through others: the layers block allows no cycle (util <-> config and plot <-> train
// once did), and AreasIncludeOnlyWhatDesignAllows holds the sources to it.
TEST(Layering, TheAreasFormNoCycle) {
  auto rules = design_rules();
  rules.erase("inference");
  rules.erase("no-torch");
  ASSERT_GT(rules.size(), 8u) << "docs/design.md has no complete layers block";
  EXPECT_EQ(area_cycle(rules), "") << "docs/design.md's layers block lets these areas include each other";
  // The check itself finds the cycles that were there.
  EXPECT_EQ(area_cycle({{"util", {"config"}}, {"config", {"util"}}}), "config -> util -> config");
  EXPECT_EQ(area_cycle({{"plot", {"util", "train"}}, {"train", {"plot", "util"}}, {"util", {}}}),
            "plot -> train -> plot");
  EXPECT_EQ(area_cycle({{"a", {"b"}}, {"b", {"c"}}, {"c", {}}}), "");
}
