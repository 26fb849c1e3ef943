// GFLOP/s of a float Linear at inference on the shapes of a decoder step: LibTorch's BLAS (addmm, which packs the
// weight on every call) against mtx's packed kernel (fp32_gemm.h) at the level util/cpu_isa.h picks, interleaved,
// best of 5 rounds each; then mtx's int8 kernel (int8_gemm.h) on the same shapes, in giga multiply-adds per second
// (GOP/s counts two per multiply-add, as for float). On an AVX-512 CPU, MTX_CPU_ISA=avx2 with OPENBLAS_CORETYPE=Haswell
// compares both at AVX2.
//   ninja -C build mtx_linear_rate && build/bin/mtx_linear_rate [threads]
//   build/bin/mtx_linear_rate --steps [searches]   (whole decoder steps, weights not in cache)
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "mtx/model/fp32_gemm.h"
#include "mtx/model/int8_gemm.h"
#include "mtx/model/linear.h"

namespace {

double seconds_per_call(const std::function<void()>& fn, double flops) {
  for (int i = 0; i < 3; ++i) fn();
  const int reps = std::max(5, int(2e9 / flops));  // about 2 GFLOP per measurement
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
}

// Whole decoder steps as translation runs them: every layer of a 3-layer, 256-wide decoder (self qkv, self out,
// cross q, cross out, ffn up, ffn down) and the 8000-piece vocabulary, each with its own weights (21 MB in float),
// one after another, so that each layer's weights come from L3 or memory as in a search. `searches` run such steps
// at once on the same weights, one thread each (mtx translate --workers). Prints G(FL)OP/s per search, best of 5.
template <typename Layer>
void decoder_steps(int searches, const char* name) {
  torch::set_num_threads(1);
  const int64_t shapes[][2] = {{768, 256}, {256, 256}, {256, 256}, {256, 256}, {1024, 256}, {256, 1024}};
  std::vector<std::pair<Layer, int64_t>> layers;  // and its input width
  double flops_per_row = 0;
  const auto add = [&](int64_t out, int64_t in) {
    const torch::Tensor w = torch::randn({out, in}) * 0.05, b = torch::randn({out});  // [out, in], [out]
    if constexpr (std::is_same_v<Layer, mtx::model::fp32::PackedLinear>) {
      layers.emplace_back(Layer(w, b), in);
    } else {
      layers.emplace_back(Layer(mtx::model::int8::quantize(w), b), in);
    }
    flops_per_row += 2.0 * double(out * in);
  };
  for (int layer = 0; layer < 3; ++layer) {
    for (const auto& s : shapes) add(s[0], s[1]);
  }
  add(8000, 256);
  std::printf("%s decoder steps, %d search(es) at once, one thread each: per search, best of 5 rounds\n", name,
              searches);
  std::printf("%6s %9s\n", "rows", "G(FL)OP/s");
  for (const int64_t n : {5, 16, 40, 128, 256}) {
    const torch::Tensor x256 = torch::randn({n, 256}), x1024 = torch::randn({n, 1024});  // [n, 256], [n, 1024]
    const auto step = [&] {
      for (const auto& layer : layers) layer.first.forward(layer.second == 1024 ? x1024 : x256);
    };
    double best = 1e9;
    for (int round = 0; round < 5; ++round) {
      std::vector<double> took(static_cast<size_t>(searches), 0.0);
      std::vector<std::thread> pool;
      for (int i = 0; i < searches; ++i) {
        pool.emplace_back([&, i] { took[size_t(i)] = seconds_per_call(step, flops_per_row * double(n)); });
      }
      for (auto& t : pool) t.join();
      for (const double t : took) best = std::min(best, t);
    }
    std::printf("%6lld %9.1f\n", static_cast<long long>(n), flops_per_row * double(n) / best / 1e9);
  }
}

}  // namespace

int main(int argc, char** argv) {
  torch::NoGradGuard no_grad;
  if (!mtx::model::fp32::PackedLinear::available()) {
    std::printf("mtx's float kernel does not run here (below avx2, or MTX_FP32_GEMM says blas): nothing to compare\n");
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--steps") {
    const int searches = argc > 2 ? std::atoi(argv[2]) : 1;
    decoder_steps<mtx::model::fp32::PackedLinear>(searches, "float");
    if (mtx::model::int8::KernelLinear::available()) decoder_steps<mtx::model::int8::KernelLinear>(searches, "int8");
    return 0;
  }
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  torch::set_num_threads(threads);
  struct Shape {
    const char* name;
    int64_t out, in;
  };
  const Shape shapes[] = {
      {"qkv", 768, 256}, {"attn out", 256, 256}, {"ffn up", 1024, 256}, {"ffn down", 256, 1024}, {"vocab", 8000, 256}};
  std::printf("%d threads; GFLOP/s, best of 5 rounds (blas = torch::addmm, packed = mtx's %s kernel)\n", threads,
              mtx::model::fp32::PackedLinear::kernel());
  std::printf("%-9s %6s %9s %9s %7s\n", "layer", "rows", "blas", "packed", "ratio");
  for (const Shape& s : shapes) {
    const torch::Tensor w = torch::randn({s.out, s.in}) * 0.05;  // [out, in]
    const torch::Tensor b = torch::randn({s.out});               // [out]
    const mtx::model::fp32::PackedLinear packed(w, b);
    for (const int64_t n : {5, 40, 256, 1280, 4096}) {
      const torch::Tensor x = torch::randn({n, s.in});  // [n, in]
      const double flops = 2.0 * double(n) * double(s.out) * double(s.in);
      double blas = 1e9, mine = 1e9;
      for (int round = 0; round < 5; ++round) {
        blas = std::min(blas, seconds_per_call([&] { torch::addmm(b, x, w.t()); }, flops));
        mine = std::min(mine, seconds_per_call([&] { packed.forward(x); }, flops));
      }
      std::printf("%-9s %6lld %9.1f %9.1f %6.2fx\n", s.name, static_cast<long long>(n), flops / blas / 1e9,
                  flops / mine / 1e9, blas / mine);
    }
  }
  if (!mtx::model::int8::KernelLinear::available()) return 0;
  std::printf("\nint8: GOP/s of mtx's %s kernel (quantizing the input included), best of 5 rounds\n",
              mtx::model::int8::KernelLinear::kernel());
  std::printf("%-9s %6s %9s\n", "layer", "rows", "int8");
  for (const Shape& s : shapes) {
    const mtx::model::int8::KernelLinear layer(mtx::model::int8::quantize(torch::randn({s.out, s.in})),
                                               torch::randn({s.out}));
    for (const int64_t n : {5, 40, 256, 1280, 4096}) {
      const torch::Tensor x = torch::randn({n, s.in});  // [n, in]
      const double ops = 2.0 * double(n) * double(s.out) * double(s.in);
      double best = 1e9;
      for (int round = 0; round < 5; ++round) best = std::min(best, seconds_per_call([&] { layer.forward(x); }, ops));
      std::printf("%-9s %6lld %9.1f\n", s.name, static_cast<long long>(n), ops / best / 1e9);
    }
  }
  return 0;
}
