#include "mtx/util/system.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/resource.h>
#include <unistd.h>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <mutex>

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
    if (set_by_mtx && std::string(set_by_mtx) != "off") {
      name += std::string(" {OPENBLAS_CORETYPE=") + set_by_mtx + " set by mtx: OpenBLAS did not recognise this CPU}";
    }
    return {name + " (" + lib + ")", false};
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
  // The generic fallbacks of OpenBLAS's DYNAMIC_ARCH build for an unrecognised x86-64 model.
  const std::string chosen = lower(chosen_core);
  if (chosen != "prescott" && chosen != "core2" && chosen != "nehalem" && chosen != "katmai") return "";
  if (cpu.avx512f && cpu.avx512bw && cpu.avx512dq && cpu.avx512vl && cpu.avx2 && cpu.fma) return "SkylakeX";
  if (cpu.avx2 && cpu.fma) return "Haswell";
  if (cpu.avx) return "Sandybridge";
  return "";
}

CpuFeatures cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // libgcc's checks include the OS's support (XCR0) for the AVX and AVX-512 register state.
  __builtin_cpu_init();
  f.avx = __builtin_cpu_supports("avx");
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
#endif
  return f;
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

void warn_if_reference_blas() {
  static std::once_flag once;
  std::call_once(once, [] {
    const BlasInfo& b = blas_info();
    if (!b.reference) return;
    log::warn(
        "torch's matrix multiply is running on {} -- expect training and decoding ~30x slower. "
        "Install OpenBLAS: apt-get install libopenblas0-openmp",
        b.name);
  });
}

int resolve_threads(int threads) {
  return threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));
}

void set_threads(int threads) {
  // Explicit even for 0: Debian's LibTorch otherwise starts with OpenMP's default, which can be 1.
  at::set_num_threads(resolve_threads(threads));
}

int64_t peak_rss_bytes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return int64_t(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

fs::path executable_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return fs::current_path();
  buf[n] = '\0';
  return fs::path(buf).parent_path();
}

}  // namespace mtx
