// Reading one entry of a zip archive through minizip: shared by the .npz reader (bundle/npz.cpp), the checks of a
// checkpoint's pickles and TorchScript (bundle/bundle.cpp) and the documents' archives (doc/archive.cpp).
#pragma once

#include <minizip/unzip.h>

#include <algorithm>
#include <string>

namespace mtx {

// Reads the entry opened last (unzOpenCurrentFile) into `bytes`, which the caller sized to the entry's
// uncompressed size, and closes it. True when every byte came and the entry's CRC matched.
inline bool read_open_entry(unzFile zip, std::string& bytes) {
  size_t got = 0;
  while (got < bytes.size()) {
    const int n = unzReadCurrentFile(zip, bytes.data() + got, unsigned(std::min<size_t>(bytes.size() - got, 1u << 30)));
    if (n <= 0) break;
    got += size_t(n);
  }
  // unzCloseCurrentFile checks the entry's CRC once all of it was read.
  return unzCloseCurrentFile(zip) == UNZ_OK && got == bytes.size();
}

}  // namespace mtx
