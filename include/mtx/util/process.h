// Child processes and scratch directories, for the commands that hand work to Python converters (export to
// CTranslate2, import of pickled weights).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace mtx {

// Runs args[0] (searched in PATH) with stdout/stderr inherited; returns its exit status (127: not found).
// Throws Error when no process can be started.
int run_process(const std::vector<std::string>& args);

// A fresh directory under the system temp dir ("mtx-<what>-<pid>-<random>"), removed with everything in it when
// this goes out of scope.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& what);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace mtx
