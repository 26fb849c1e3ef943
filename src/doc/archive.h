// Zip archives in memory, within doc::Limits (private to src/doc/): the entries of an office document read whole,
// and the archive written back with each entry's name, order, method and time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mtx/doc/document.h"

namespace mtx::doc {

struct Entry {
  std::string name;
  std::string bytes;    // inflated
  bool stored = false;  // written without compression (ODF's mimetype must be)
  unsigned long dos_date = 0;
};

// Every entry of the archive `bytes` (`name` in errors). Throws DataError naming the file and the entry for a
// damaged archive or entry, an encrypted entry, an unsafe entry name (absolute, drive, backslash or ".."), and for
// anything past `limits`, before inflating it where the archive's directory already tells.
std::vector<Entry> read_archive(const std::string& bytes, const std::string& name, const Limits& limits);

// The archive of `entries`, in their order.
std::string write_archive(const std::vector<Entry>& entries, const std::string& name);

}  // namespace mtx::doc
