// What the process runs on: LibTorch version, the BLAS that torch's matrix multiply calls, CUDA,
// thread settings, memory use. Warns (once) when matmul runs on the slow reference BLAS.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "mtx/util/cpu_isa.h"
#include "mtx/util/device.h"

namespace mtx {

struct RuntimeInfo {
  std::string mtx_version;    // e.g. "0.1.0"
  std::string torch_version;  // e.g. "1.13.1"
  std::string blas;           // e.g. "OpenBLAS 0.3.21 (openmp)" or "reference BLAS (/usr/lib/.../blas/libblas.so.3)"
  bool blas_is_reference = false;
  CudaInfo cuda;          // compiled in, devices, runtime version
  int threads = 0;        // torch intra-op threads
  std::string allocator;  // "tcmalloc" (linked into mtx) or "glibc malloc"
};

RuntimeInfo runtime_info();

// OpenBLAS (Debian bookworm's 0.3.21) picks its kernels from the CPU's model number; on CPUs it does not
// know, such as virtual "Intel(R) Xeon(R) Processor" models, it falls back to its Prescott (SSE3) kernels,
// which make training several times slower (docs/building.md). The choice is made when the library loads, so only
// OPENBLAS_CORETYPE in the environment of a new process can change it.
//
// The core to ask for instead, given the core OpenBLAS chose (openblas_get_corename(), any case) and the
// instruction sets the CPU and OS offer; "" when nothing should change (a recognised core, or no better
// kernels for this CPU). The generic fallbacks (Prescott, ...) are replaced by the CPU's family, and the AVX2
// kernels (Haswell, Zen) by SkylakeX's where the CPU has AVX-512.
std::string better_blas_core(const std::string& chosen_core, const CpuFeatures& cpu);

// Called first thing in main(): when torch's BLAS is OpenBLAS running its fallback kernels and neither
// OPENBLAS_CORETYPE nor MTX_BLAS_CORE is set, re-executes this program (same arguments, same open files)
// with OPENBLAS_CORETYPE naming the CPU's real kernel family, and MTX_BLAS_CORE recording that mtx did it
// (runtime_info() reports it). Returns (doing nothing) when not needed or when the re-exec fails.
// MTX_BLAS_CORE=off switches this off.
void select_blas_kernels(char** argv);

// Logs a clear warning the first time it is called in a process if matmul uses the reference BLAS, or
// OpenBLAS kernels narrower than the CPU's because OPENBLAS_CORETYPE was set outside mtx.
void warn_if_slow_blas();

// A thread-count setting resolved: 0 means one per usable CPU (util/cpus.h).
int resolve_threads(int threads);

// Sets torch's intra-op threads (0 = one per core) and, the first time, warns as warn_if_slow_blas().
void set_threads(int threads);

// From the calling thread on, LibTorch's CPU kernels and the BLAS called from this thread run on it
// alone (OpenMP's thread count and MKL's local one for this thread; other threads keep theirs). For a
// thread of mtx's own that runs one of several searches at once.
void use_one_thread_here();

// Peak resident set size of this process so far, in bytes (0 if unknown).
int64_t peak_rss_bytes();

// What the allocator holds, where it is tcmalloc (gperftools' C API, found at run time; `known` false under
// another allocator): bytes the program has allocated, bytes the page heap keeps free and mapped for reuse, and
// bytes mapped in all (free or not, less what was handed back).
struct HeapFigures {
  bool known = false;
  int64_t allocated = 0, free = 0, mapped = 0;
};
HeapFigures heap_figures();

// Hands the allocator's free pages back to the system (tcmalloc's page heap; glibc's malloc_trim otherwise).
// Tensors of many shapes leave free spans that later requests of other sizes cannot reuse, so a long-running
// process calls it now and then to keep its resident set to what it uses. Thread-safe; costs a system call per
// free span.
void release_free_memory();

// For a long-running process: caps what tcmalloc's per-thread caches hold in all (to 4 MiB; its default is
// 32 MiB, which a server's many threads fill over hours). Nothing under another allocator.
void limit_allocator_caches();

// Directory of the running executable.
std::filesystem::path executable_dir();

}  // namespace mtx
