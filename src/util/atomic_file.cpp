#include "mtx/util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "mtx/util/errors.h"
#include "mtx/util/faults.h"

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
      if (!out) throw Error("writing '" + path.string() + "' failed (disk full? " + std::strerror(errno) + ")");
    }
    fsync_path(tmp, false);
    static std::atomic<int64_t> writes{0};
    if (fault::fires("crash_in_write", ++writes)) ::_exit(137);
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

void copy_file_atomic(const fs::path& from, const fs::path& to) {
  const fs::path dir = to.has_parent_path() ? to.parent_path() : fs::path(".");
  const fs::path tmp = dir / ("." + to.filename().string() + ".tmp." + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove(tmp, ec);
  if (::link(from.c_str(), tmp.c_str()) == 0) {
    fs::rename(tmp, to, ec);
    if (ec) {
      fs::remove(tmp);
      throw Error("cannot rename '" + tmp.string() + "' to '" + to.string() + "': " + ec.message());
    }
    fsync_path(dir, true);
    return;
  }
  std::ifstream in(from, std::ios::binary);
  if (!in) throw Error("cannot read '" + from.string() + "': " + std::strerror(errno));
  write_file_atomic(to, [&](std::ostream& out) {
    if (in.peek() != std::char_traits<char>::eof()) out << in.rdbuf();
  });
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const std::string message = "cannot read '" + path.string() + "': " + std::strerror(errno);
    if (errno == ENOENT) throw NotFoundError(message);
    throw DataError(message);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw DataError("error while reading '" + path.string() + "'");
  return ss.str();
}

}  // namespace mtx
