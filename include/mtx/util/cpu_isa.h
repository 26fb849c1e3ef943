// The instruction-set level of mtx's CPU kernels: one enum, detected once, capped by MTX_CPU_ISA, and chosen
// inside a process by tests (ScopedIsa). The one place that decides which kernel variant runs. No LibTorch.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mtx {

// What the CPU and the operating system offer (x86-64; all false elsewhere).
struct CpuFeatures {
  bool avx = false, avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false, avx512vnni = false;
  bool avx_vnni = false;  // the VEX-encoded VNNI of CPUs without AVX-512 (Alder Lake and later, Zen 5)
};
// Read once from the CPU (cpuid, with the OS's support for the register state).
const CpuFeatures& cpu_features();

namespace cpu {

// From narrowest to widest; a cap at one level allows every level before it that the CPU runs.
//   generic      plain C++ (and LibTorch's own kernels)
//   neon         aarch64's Advanced SIMD
//   avx2         AVX2 with FMA
//   avx_vnni     AVX2 with FMA and AVX-VNNI (u8 x s8 dot products on 256 bits)
//   avx512       AVX-512 F/BW/DQ/VL
//   avx512_vnni  AVX-512 with VNNI
enum class Isa { generic, neon, avx2, avx_vnni, avx512, avx512_vnni };

const char* name(Isa isa);
// "avx2", "AVX2", "avx512-vnni" and "avx512_vnni" all parse; nullopt for an unknown name.
std::optional<Isa> parse(const std::string& name);
// Every level's name, in order, for messages.
std::string names();

// Whether a CPU with `features` runs `isa`.
bool runs(Isa isa, const CpuFeatures& features);
// The widest level <= `cap` that a CPU with `features` runs.
Isa best(const CpuFeatures& features, Isa cap = Isa::avx512_vnni);
// Every level this CPU runs, narrowest first.
std::vector<Isa> runnable();

// The widest level this CPU runs.
Isa detected();
// The level the kernels run at: detected() capped by MTX_CPU_ISA (read once; an unknown name throws
// ConfigError listing the names, a level this CPU does not run logs a warning and is not used), or the level
// a ScopedIsa chose. Cheap: kernels ask it at every call.
Isa isa();
// Whether MTX_CPU_ISA narrowed the level.
bool capped();

// For tests and benchmarks: runs the kernels at `isa` while it lives (not thread-safe against kernels
// running on other threads). Throws Error when this CPU does not run `isa`.
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa);
  ~ScopedIsa();
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;

 private:
  int previous_;
};

}  // namespace cpu
}  // namespace mtx
