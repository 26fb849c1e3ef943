#include "mtx/util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "mtx/util/errors.h"

namespace fs = std::filesystem;

namespace mtx {
namespace {

void fsync_path(const fs::path& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) throw Error("cannot open '" + path.string() + "' to sync: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0 && !directory) {
    throw Error("fsync of '" + path.string() + "' failed: " + std::strerror(errno));
  }
}

}  // namespace

void write_file_atomic(const fs::path& path, const std::function<void(std::ostream&)>& write) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create directory '" + dir.string() + "': " + ec.message());
  const fs::path tmp = dir / ("." + path.filename().string() + ".tmp." + std::to_string(::getpid()));
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) throw Error("cannot write '" + tmp.string() + "': " + std::strerror(errno));
      write(out);
      out.flush();
      if (!out) throw Error("write to '" + tmp.string() + "' failed (disk full?)");
    }
    fsync_path(tmp, false);
    fs::rename(tmp, path, ec);
    if (ec) throw Error("cannot rename '" + tmp.string() + "' to '" + path.string() + "': " + ec.message());
    fsync_path(dir, true);
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
}

void write_file_atomic(const fs::path& path, std::string_view content) {
  write_file_atomic(path, [&](std::ostream& out) { out.write(content.data(), std::streamsize(content.size())); });
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot read '" + path.string() + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw DataError("error while reading '" + path.string() + "'");
  return ss.str();
}

}  // namespace mtx
