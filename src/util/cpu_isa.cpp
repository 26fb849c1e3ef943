#include "mtx/util/cpu_isa.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>

#include "mtx/util/errors.h"
#include "mtx/util/logging.h"

namespace mtx {

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
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
    f.avx512vnni = __builtin_cpu_supports("avx512vnni");
#if defined(__clang__) && __clang_major__ < 16
    f.avx_vnni = false;  // clang 14's libgcc-compatible check has no "avxvnni"
#else
    f.avx_vnni = __builtin_cpu_supports("avxvnni");
#endif
#endif
    return f;
  }();
  return features;
}

namespace cpu {
namespace {

constexpr Isa kAll[] = {Isa::generic, Isa::neon, Isa::avx2, Isa::avx_vnni, Isa::avx512, Isa::avx512_vnni};

// -1: no ScopedIsa; else the chosen level.
std::atomic<int> g_scoped{-1};

Isa from_environment() {
  const Isa found = detected();
  const char* env = std::getenv("MTX_CPU_ISA");
  if (!env || !*env) return found;
  const std::optional<Isa> cap = parse(env);
  if (!cap) {
    throw ConfigError(std::string("MTX_CPU_ISA: unknown instruction-set level '") + env + "'; use one of " + names());
  }
  const Isa chosen = best(cpu_features(), *cap);
  if (!runs(*cap, cpu_features())) {
    log::warn("MTX_CPU_ISA={}: this CPU does not run {}; the kernels run at {}", env, name(*cap), name(chosen));
  }
  return chosen;
}

}  // namespace

const char* name(Isa isa) {
  switch (isa) {
    case Isa::generic:
      return "generic";
    case Isa::neon:
      return "neon";
    case Isa::avx2:
      return "avx2";
    case Isa::avx_vnni:
      return "avx_vnni";
    case Isa::avx512:
      return "avx512";
    case Isa::avx512_vnni:
      return "avx512_vnni";
  }
  return "?";
}

std::optional<Isa> parse(const std::string& text) {
  std::string key;
  for (const char c : text) key += c == '-' ? '_' : char(std::tolower(static_cast<unsigned char>(c)));
  for (const Isa isa : kAll) {
    if (key == name(isa)) return isa;
  }
  return std::nullopt;
}

std::string names() {
  std::string out;
  for (const Isa isa : kAll) out += std::string(out.empty() ? "" : ", ") + name(isa);
  return out;
}

bool runs(Isa isa, const CpuFeatures& f) {
  const bool avx2 = f.avx && f.avx2 && f.fma;
  const bool avx512 = avx2 && f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl;
  switch (isa) {
    case Isa::generic:
      return true;
    case Isa::neon:
#if defined(__aarch64__)
      return true;
#else
      return false;
#endif
    case Isa::avx2:
      return avx2;
    case Isa::avx_vnni:
      return avx2 && f.avx_vnni;
    case Isa::avx512:
      return avx512;
    case Isa::avx512_vnni:
      return avx512 && f.avx512vnni;
  }
  return false;
}

Isa best(const CpuFeatures& features, Isa cap) {
  Isa found = Isa::generic;
  for (const Isa isa : kAll) {
    if (isa <= cap && runs(isa, features)) found = isa;
  }
  return found;
}

std::vector<Isa> runnable() {
  std::vector<Isa> out;
  for (const Isa isa : kAll) {
    if (runs(isa, cpu_features())) out.push_back(isa);
  }
  return out;
}

Isa detected() {
  static const Isa found = best(cpu_features());
  return found;
}

Isa isa() {
  const int scoped = g_scoped.load(std::memory_order_relaxed);
  if (scoped >= 0) return Isa(scoped);
  static const Isa chosen = from_environment();
  return chosen;
}

bool capped() {
  const char* env = std::getenv("MTX_CPU_ISA");
  return env && *env && isa() != detected();
}

ScopedIsa::ScopedIsa(Isa isa) : previous_(g_scoped.load()) {
  if (!runs(isa, cpu_features())) {
    throw Error(std::string("this CPU does not run the ") + name(isa) + " kernels");
  }
  g_scoped.store(int(isa));
}

ScopedIsa::~ScopedIsa() { g_scoped.store(previous_); }

}  // namespace cpu
}  // namespace mtx
