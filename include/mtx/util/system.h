// What the process runs on: LibTorch version, the BLAS that torch's matrix multiply calls, CUDA,
// thread settings, memory use. Warns (once) when matmul runs on the slow reference BLAS.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "mtx/util/device.h"

namespace mtx {

struct RuntimeInfo {
  std::string mtx_version;    // e.g. "0.1.0"
  std::string torch_version;  // e.g. "1.13.1"
  std::string blas;           // e.g. "OpenBLAS 0.3.21 (openmp)" or "reference BLAS (/usr/lib/.../blas/libblas.so.3)"
  bool blas_is_reference = false;
  CudaInfo cuda;               // compiled in, devices, runtime version
  int threads = 0;            // torch intra-op threads
  std::string allocator;      // "tcmalloc" (linked into mtx) or "glibc malloc"
};

RuntimeInfo runtime_info();

// Logs a clear warning the first time it is called in a process if matmul uses the reference BLAS.
void warn_if_reference_blas();

// A thread-count setting resolved: 0 means one per core.
int resolve_threads(int threads);

// Sets torch's intra-op threads (0 = one per core).
void set_threads(int threads);

// Peak resident set size of this process so far, in bytes (0 if unknown).
int64_t peak_rss_bytes();

// Directory of the running executable.
std::filesystem::path executable_dir();

}  // namespace mtx
