#include "archive.h"

#include <minizip/ioapi.h>
#include <minizip/unzip.h>
#include <minizip/zip.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "mtx/util/errors.h"
#include "mtx/util/zip_entry.h"

namespace mtx::doc {
namespace {

// minizip's file functions over a string: read from `data`, or written into `out`.
struct MemoryFile {
  const std::string* data = nullptr;
  std::string* out = nullptr;
  uint64_t pos = 0;
  size_t size() const { return out ? out->size() : data->size(); }
};

voidpf open_buffer(voidpf opaque, const void*, int) { return opaque; }
uLong read_buffer(voidpf, voidpf stream, void* buf, uLong size) {
  auto* b = static_cast<MemoryFile*>(stream);
  const char* src = b->out ? b->out->data() : b->data->data();
  const uint64_t n = b->pos >= b->size() ? 0 : std::min<uint64_t>(size, b->size() - b->pos);
  std::memcpy(buf, src + b->pos, size_t(n));
  b->pos += n;
  return uLong(n);
}
uLong write_buffer(voidpf, voidpf stream, const void* buf, uLong size) {
  auto* b = static_cast<MemoryFile*>(stream);
  if (!b->out) return 0;
  if (b->pos + size > b->out->size()) b->out->resize(size_t(b->pos + size));
  std::memcpy(b->out->data() + b->pos, buf, size);
  b->pos += size;
  return size;
}
ZPOS64_T tell_buffer(voidpf, voidpf stream) { return static_cast<MemoryFile*>(stream)->pos; }
long seek_buffer(voidpf, voidpf stream, ZPOS64_T offset, int origin) {
  auto* b = static_cast<MemoryFile*>(stream);
  uint64_t base = 0;
  if (origin == ZLIB_FILEFUNC_SEEK_CUR) base = b->pos;
  if (origin == ZLIB_FILEFUNC_SEEK_END) base = b->size();
  if (base + offset > b->size() && !b->out) return -1;
  b->pos = base + offset;
  return 0;
}
int close_buffer(voidpf, voidpf) { return 0; }
int error_buffer(voidpf, voidpf) { return 0; }

zlib_filefunc64_def memory_file_functions(MemoryFile* buffer) {
  zlib_filefunc64_def f{};
  f.zopen64_file = open_buffer;
  f.zread_file = read_buffer;
  f.zwrite_file = write_buffer;
  f.ztell64_file = tell_buffer;
  f.zseek64_file = seek_buffer;
  f.zclose_file = close_buffer;
  f.zerror_file = error_buffer;
  f.opaque = buffer;
  return f;
}

// An entry name that could point outside a folder it were extracted into.
bool unsafe_name(const std::string& n) {
  if (n.empty() || n[0] == '/' || n.find('\\') != std::string::npos || n.find('\0') != std::string::npos) return true;
  if (n.size() >= 2 && n[1] == ':') return true;
  size_t start = 0;
  while (start <= n.size()) {
    const size_t end = std::min(n.find('/', start), n.size());
    if (n.compare(start, end - start, "..") == 0 && end - start == 2) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

std::vector<Entry> read_archive(const std::string& bytes, const std::string& name, const Limits& limits) {
  MemoryFile buffer{&bytes, nullptr, 0};
  zlib_filefunc64_def f = memory_file_functions(&buffer);
  std::unique_ptr<void, int (*)(unzFile)> zip(unzOpen2_64(name.c_str(), &f), unzClose);
  if (!zip) throw DataError(name + ": not a readable zip archive (damaged, or not this format)");
  unz_global_info64 global{};
  if (unzGetGlobalInfo64(zip.get(), &global) != UNZ_OK) throw DataError(name + ": damaged zip directory");
  if (global.number_entry > limits.max_entries) {
    throw DataError(name + ": " + std::to_string(global.number_entry) + " entries, more than the " +
                    std::to_string(limits.max_entries) + " a document may have");
  }
  std::vector<Entry> out;
  uint64_t inflated = 0;
  for (int rc = unzGoToFirstFile(zip.get()); rc != UNZ_END_OF_LIST_OF_FILE; rc = unzGoToNextFile(zip.get())) {
    if (rc != UNZ_OK)
      throw DataError(name + ": damaged zip directory after " + std::to_string(out.size()) + " entries");
    if (out.size() >= limits.max_entries) {
      throw DataError(name + ": more than the " + std::to_string(limits.max_entries) + " entries a document may have");
    }
    unz_file_info64 info{};
    char entry_name[1024] = {};
    if (unzGetCurrentFileInfo64(zip.get(), &info, entry_name, sizeof(entry_name) - 1, nullptr, 0, nullptr, 0) !=
        UNZ_OK) {
      throw DataError(name + ": damaged zip entry " + std::to_string(out.size() + 1));
    }
    if (info.size_filename >= sizeof(entry_name)) {
      throw DataError(name + ": entry " + std::to_string(out.size() + 1) + " has a name over 1023 bytes, refused");
    }
    Entry e;
    e.name.assign(entry_name, info.size_filename);
    const std::string where = name + ": entry " + e.name;
    if (unsafe_name(e.name)) throw DataError(where + ": an absolute or \"..\" path, refused");
    if (info.flag & 1) throw DataError(where + ": encrypted, cannot be translated");
    if (info.compression_method != 0 && info.compression_method != Z_DEFLATED) {
      throw DataError(where + ": compression method " + std::to_string(info.compression_method) + " is not supported");
    }
    if (info.uncompressed_size > limits.max_entry_bytes) {
      throw DataError(where + ": inflates to " + std::to_string(info.uncompressed_size) + " bytes, more than " +
                      std::to_string(limits.max_entry_bytes) + " (a zip bomb?)");
    }
    inflated += info.uncompressed_size;
    if (inflated > limits.max_inflated_bytes) {
      throw DataError(name + ": inflates to more than " + std::to_string(limits.max_inflated_bytes) +
                      " bytes in all (a zip bomb?)");
    }
    if (inflated > (uint64_t(1) << 20) && inflated / std::max<uint64_t>(bytes.size(), 1) > limits.max_ratio) {
      throw DataError(name + ": inflates more than " + std::to_string(limits.max_ratio) +
                      " times its size (a zip bomb?)");
    }
    e.stored = info.compression_method == 0;
    e.dos_date = info.dosDate;
    e.bytes.resize(size_t(info.uncompressed_size));
    // The directory's size is what is read: an entry that inflates to more fails its CRC.
    if (unzOpenCurrentFile(zip.get()) != UNZ_OK || !read_open_entry(zip.get(), e.bytes)) {
      throw DataError(where + ": damaged (its data or CRC does not match the archive's directory)");
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::string write_archive(const std::vector<Entry>& entries, const std::string& name) {
  std::string bytes;
  MemoryFile buffer{nullptr, &bytes, 0};
  zlib_filefunc64_def f = memory_file_functions(&buffer);
  zipFile zip = zipOpen2_64(name.c_str(), APPEND_STATUS_CREATE, nullptr, &f);
  if (!zip) throw Error(name + ": cannot write the archive");
  for (const Entry& e : entries) {
    zip_fileinfo info{};
    info.dosDate = e.dos_date;
    const int big = e.bytes.size() >= 0xffffffffu ? 1 : 0;
    const int method = e.stored ? 0 : Z_DEFLATED;
    const int level = e.stored ? 0 : Z_DEFAULT_COMPRESSION;
    bool ok = zipOpenNewFileInZip64(zip, e.name.c_str(), &info, nullptr, 0, nullptr, 0, nullptr, method, level, big) ==
              ZIP_OK;
    size_t done = 0;
    while (ok && done < e.bytes.size()) {
      const auto n = unsigned(std::min<size_t>(e.bytes.size() - done, 1u << 30));
      ok = zipWriteInFileInZip(zip, e.bytes.data() + done, n) == ZIP_OK;
      done += n;
    }
    ok = zipCloseFileInZip(zip) == ZIP_OK && ok;
    if (!ok) {
      zipClose(zip, nullptr);
      throw Error(name + ": cannot write entry " + e.name);
    }
  }
  if (zipClose(zip, nullptr) != ZIP_OK) throw Error(name + ": cannot finish the archive");
  return bytes;
}

}  // namespace mtx::doc
