// The subtitles reader and writer of doc/document.h on any bytes (fuzz_document.h).
#include "fuzz_document.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return mtx::fuzz::document(data, size, {mtx::doc::Format::srt, mtx::doc::Format::vtt});
}
