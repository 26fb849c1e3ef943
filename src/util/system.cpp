#include "mtx/util/system.h"

#include <dlfcn.h>
#include <link.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "mtx/util/cpus.h"
#include "mtx/util/logging.h"

namespace fs = std::filesystem;

namespace mtx {
namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The shared object that provides `symbol` under global lookup, resolved through symlinks
// (Debian's libblas.so.3 is an alternatives link to the chosen implementation).
std::string provider_of(const char* symbol) {
  void* addr = dlsym(RTLD_DEFAULT, symbol);
  if (!addr) return {};
  Dl_info info{};
  if (!dladdr(addr, &info) || !info.dli_fname) return {};
  std::error_code ec;
  const fs::path real = fs::canonical(info.dli_fname, ec);
  return ec ? std::string(info.dli_fname) : real.string();
}

struct BlasInfo {
  std::string name;
  bool reference = false;
  std::string narrow_core = {};  // OPENBLAS_CORETYPE set outside mtx to kernels narrower than this CPU's
  std::string better_core = {};  // ... and the ones mtx would choose
};

BlasInfo detect_blas() {
  if (at::hasMKL()) return {"Intel MKL (built into LibTorch)", false};
  const std::string lib = provider_of("sgemm_");
  if (lib.empty()) return {"none found (torch uses its own fallback gemm)", true};
  const std::string l = lower(lib);
  if (l.find("openblas") != std::string::npos) {
    std::string name = "OpenBLAS";
    using ConfigFn = char* (*)();
    if (auto fn = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) {
      name += std::string(" [") + fn() + "]";
    }
    const char* set_by_mtx = std::getenv("MTX_BLAS_CORE");
    const char* set_outside = std::getenv("OPENBLAS_CORETYPE");
    BlasInfo info;
    if (set_by_mtx && std::string(set_by_mtx) != "off") {
      name += std::string(" {OPENBLAS_CORETYPE=") + set_by_mtx +
              " set by mtx: OpenBLAS's own choice runs narrower kernels than this CPU has}";
    } else if (set_outside && !set_by_mtx) {
      info.better_core = better_blas_core(set_outside, cpu_features());
      if (!info.better_core.empty()) {
        info.narrow_core = set_outside;
        name += std::string(" {OPENBLAS_CORETYPE=") + set_outside + " set outside mtx; this CPU runs " +
                info.better_core + "'s kernels}";
      }
    }
    info.name = name + " (" + lib + ")";
    return info;
  }
  if (l.find("mkl") != std::string::npos) return {"Intel MKL (" + lib + ")", false};
  if (l.find("blis") != std::string::npos) return {"BLIS (" + lib + ")", false};
  if (l.find("atlas") != std::string::npos) return {"ATLAS (" + lib + ")", false};
  if (l.find("/blas/") != std::string::npos || l.find("refblas") != std::string::npos) {
    return {"reference BLAS (" + lib + ")", true};
  }
  return {"unknown BLAS (" + lib + ")", false};
}

const BlasInfo& blas_info() {
  static const BlasInfo info = detect_blas();
  return info;
}

}  // namespace

std::string better_blas_core(const std::string& chosen_core, const CpuFeatures& cpu) {
  const std::string chosen = lower(chosen_core);
  const bool avx512 = cpu.avx512f && cpu.avx512bw && cpu.avx512dq && cpu.avx512vl && cpu.avx2 && cpu.fma;
  // AVX2 kernels ("Haswell", "Zen") on a CPU with AVX-512: SkylakeX's are the wider ones (docs/building.md
  // has the measurement).
  if (avx512 && (chosen == "haswell" || chosen == "zen")) return "SkylakeX";
  // The generic fallbacks of OpenBLAS's DYNAMIC_ARCH build for an unrecognised x86-64 model.
  if (chosen != "prescott" && chosen != "core2" && chosen != "nehalem" && chosen != "katmai") return "";
  if (avx512) return "SkylakeX";
  if (cpu.avx2 && cpu.fma) return "Haswell";
  if (cpu.avx) return "Sandybridge";
  return "";
}

void select_blas_kernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("MTX_BLAS_CORE")) return;
  using CoreFn = char* (*)();
  auto corename = reinterpret_cast<CoreFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (!corename || !corename()) return;  // not OpenBLAS (MKL in the 2.x build, or another BLAS)
  const std::string core = better_blas_core(corename(), cpu_features());
  if (core.empty()) return;
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return;
  exe[n] = '\0';
  ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  ::setenv("MTX_BLAS_CORE", core.c_str(), 1);
  std::fflush(nullptr);
  ::execv(exe, argv);
  // Still here: the re-exec failed; go on with the fallback kernels (and the environment as it was).
  ::unsetenv("OPENBLAS_CORETYPE");
  ::unsetenv("MTX_BLAS_CORE");
}

RuntimeInfo runtime_info() {
  RuntimeInfo r;
  r.mtx_version = MTX_VERSION;
  r.torch_version = TORCH_VERSION;
  r.blas = blas_info().name;
  r.blas_is_reference = blas_info().reference;
  r.cuda = cuda_info();
  r.threads = at::get_num_threads();
  // tcmalloc exports tc_malloc; found in the process only when it is linked in (or preloaded).
  r.allocator = dlsym(RTLD_DEFAULT, "tc_malloc") != nullptr ? "tcmalloc" : "glibc malloc";
  return r;
}

void warn_if_slow_blas() {
  static std::once_flag once;
  std::call_once(once, [] {
    const BlasInfo& b = blas_info();
    if (b.reference) {
      log::warn(
          "torch's matrix multiply is running on {} -- expect training and decoding ~30x slower. "
          "Install OpenBLAS: apt-get install libopenblas0-openmp",
          b.name);
    }
    if (!b.narrow_core.empty()) {
      log::warn(
          "OPENBLAS_CORETYPE={} keeps OpenBLAS on narrower kernels than this CPU runs ({}'s: 1.65x the training "
          "speed on an AVX-512 AMD EPYC); unset OPENBLAS_CORETYPE to let mtx choose, or set it to {}",
          b.narrow_core, b.better_core, b.better_core);
    }
  });
}

int resolve_threads(int threads) { return threads > 0 ? threads : usable_cpus(); }

void set_threads(int threads) {
  // Explicit even for 0: Debian's LibTorch otherwise starts with OpenMP's default, which can be 1.
  at::set_num_threads(resolve_threads(threads));
  // Said here, where a command sets up its compute after checking its arguments and files: a command that
  // fails on its input says one line (the error), not a performance warning first.
  warn_if_slow_blas();
}

void use_one_thread_here() {
  // LibTorch sets a thread's OpenMP count from its global setting at the thread's first parallel call;
  // that has to happen first, or it would later undo the 1 below.
  at::internal::lazy_init_num_threads();
  // Looked up rather than linked: libgomp (both builds) and MKL (the 2.x wheel) come with LibTorch, and
  // OpenBLAS's OpenMP variant (the 1.13 build) follows the calling thread's OpenMP count.
  using SetThreads = void (*)(int);
  if (auto* omp = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) omp(1);
  // MKL's C entry point is MKL_Set_Num_Threads_Local (its header maps mkl_set_num_threads_local to it); the
  // lower-case symbol is the Fortran one, which takes a pointer (calling it with 1 crashed the 2.x build).
  using SetLocal = int (*)(int);
  if (auto* mkl = reinterpret_cast<SetLocal>(::dlsym(RTLD_DEFAULT, "MKL_Set_Num_Threads_Local"))) mkl(1);
}

int64_t peak_rss_bytes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return int64_t(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

namespace {

template <typename F>
F tcmalloc_function(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

HeapFigures heap_figures() {
  using Get = int (*)(const char*, size_t*);
  static const auto get = tcmalloc_function<Get>("MallocExtension_GetNumericProperty");
  HeapFigures h;
  size_t allocated = 0, free = 0, heap = 0, unmapped = 0;
  if (!get || !get("generic.current_allocated_bytes", &allocated) || !get("tcmalloc.pageheap_free_bytes", &free) ||
      !get("generic.heap_size", &heap) || !get("tcmalloc.pageheap_unmapped_bytes", &unmapped)) {
    return h;
  }
  h.known = true;
  h.allocated = int64_t(allocated);
  h.free = int64_t(free);
  h.mapped = int64_t(heap - std::min(heap, unmapped));
  return h;
}

void release_free_memory() {
  using Release = void (*)();
  static const auto release = tcmalloc_function<Release>("MallocExtension_ReleaseFreeMemory");
  if (release) {
    release();
  } else {
    malloc_trim(0);
  }
}

void limit_allocator_caches() {
  using Set = int (*)(const char*, size_t);
  static const auto set = tcmalloc_function<Set>("MallocExtension_SetNumericProperty");
  if (set) set("tcmalloc.max_total_thread_cache_bytes", size_t(4) << 20);
}

fs::path executable_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return fs::current_path();
  buf[n] = '\0';
  return fs::path(buf).parent_path();
}

}  // namespace mtx
