#include "mtx/model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>
#include <mutex>

#include "mtx/util/parallel.h"

namespace mtx::model {
namespace {

// SplitMix64's finaliser: a bijective mix with full avalanche; (seed, index) -> 64 random bits.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void fill_mask(float* out, int64_t begin, int64_t end, uint64_t seed, uint32_t threshold, float scale) {
  // Element i is kept when the top 32 bits of its hash are >= threshold = p * 2^32.
  for (int64_t i = begin; i < end; ++i) {
    const uint32_t r = uint32_t(mix64(seed + uint64_t(i) * 0x9e3779b97f4a7c15ULL) >> 32);
    out[i] = r >= threshold ? scale : 0.0f;
  }
}

uint64_t draw_seed() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<at::CPUGeneratorImpl>()->random64();
}

}  // namespace

torch::Tensor dropout_mask(at::IntArrayRef sizes, double p, uint64_t seed) {
  TORCH_CHECK(p >= 0 && p < 1, "dropout: p must be in [0, 1), got ", p);
  torch::Tensor mask = torch::empty(sizes, torch::kFloat);
  float* out = mask.data_ptr<float>();
  const auto threshold = uint32_t(std::min(std::ldexp(p, 32), 4294967295.0));
  const auto scale = float(1.0 / (1.0 - p));
  // Each element's fate is a function of (seed, index): the same mask on any number of threads.
  parallel_for(mask.numel(), 1 << 15, at::get_num_threads(),
               [&](int64_t begin, int64_t end) { fill_mask(out, begin, end, seed, threshold, scale); });
  return mask;
}

torch::Tensor dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p <= 0) return x;
  if (!x.device().is_cpu()) return torch::dropout(x, p, true);
  TORCH_CHECK(p < 1, "dropout: p must be below 1, got ", p);
  const torch::Tensor mask = dropout_mask(x.sizes(), p, draw_seed());  // [x's shape]
  return x * mask.to(x.scalar_type());
}

}  // namespace mtx::model
