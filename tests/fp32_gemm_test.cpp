// mtx's packed float kernel (model/fp32_gemm.h) and its use by Linear at inference.
#include "mtx/model/fp32_gemm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "mtx/model/linear.h"
#include "mtx/util/cpu_isa.h"

using namespace mtx;

#define MTX_REQUIRE_KERNEL()                                                                      \
  do {                                                                                            \
    if (!model::fp32::PackedLinear::available()) {                                                \
      GTEST_SKIP() << "the kernels run below avx2 (or MTX_FP32_GEMM=blas keeps LibTorch's BLAS)"; \
    }                                                                                             \
  } while (0)

// The kernel gives the reference's numbers bit for bit over the shapes its tiling has edges at: outputs not a
// multiple of its 32-wide panels or 16-lane halves, inputs past one 256-deep pass (the running sums go through
// the output between passes), rows not a multiple of its 8-row tiles, rows in several chunks; a row alone gives
// what it gives in a batch, on one thread or two.
TEST(Fp32Gemm, KernelMatchesTheReferenceExactly) {
  MTX_REQUIRE_KERNEL();
  const int threads = at::get_num_threads();
  for (const mtx::cpu::Isa isa : mtx::cpu::runnable()) {
    if (isa < mtx::cpu::Isa::avx2) continue;
    mtx::cpu::ScopedIsa level(isa);  // every kernel this CPU runs
    const std::string kernel = model::fp32::PackedLinear::kernel();
    torch::manual_seed(3);
    struct Shape {
      int64_t out, in;
    };
    for (const Shape s :
         {Shape{1, 5}, Shape{16, 16}, Shape{17, 256}, Shape{33, 257}, Shape{48, 3}, Shape{100, 600}, Shape{40, 1100}}) {
      const torch::Tensor w = torch::randn({s.out, s.in});  // [out, in]
      for (const bool with_bias : {true, false}) {
        const torch::Tensor bias = with_bias ? torch::randn({s.out}) : torch::Tensor();
        const model::fp32::PackedLinear layer(w, bias);
        for (const int64_t rows : {1, 5, 7, 8, 9, 12, 21, 203}) {                // 203: chunks of rows where in >= 600
          const torch::Tensor x = torch::randn({rows, s.in});                    // [rows, in]
          const torch::Tensor want = model::fp32::reference_linear(w, bias, x);  // [rows, out]
          for (const int t : {1, 2}) {
            at::set_num_threads(t);
            const torch::Tensor y = layer.forward(x);  // [rows, out]
            ASSERT_TRUE(torch::equal(y, want))
                << kernel << ": " << s.out << "x" << s.in << ", " << rows << " rows, bias " << with_bias << ", " << t
                << " threads: max diff " << (y - want).abs().max().item<float>();
          }
          const int64_t r = rows - 1;
          EXPECT_TRUE(torch::equal(layer.forward(x.narrow(0, r, 1))[0], want[r])) << kernel << ": row " << r;
        }
      }
    }
    at::set_num_threads(threads);
    const model::fp32::PackedLinear layer(torch::randn({8, 12}), torch::Tensor());
    const torch::Tensor x = torch::randn({2, 3, 12});  // leading dimensions are kept
    EXPECT_TRUE(torch::equal(layer.forward(x).view({6, 8}), layer.forward(x.view({6, 12})))) << kernel;
  }
}

// Told that x is mostly zeros (ReLU's outputs), the kernel skips the products with them and still gives the
// reference's numbers bit for bit: tiles of rows whose columns are all zero or not, a last shorter tile, inputs
// past one pass (1100) and past two (2100: a middle pass), passes with no column left, rows in several chunks
// (203), one thread or two, and inputs too dense to skip; a NaN input reaches its row's outputs.
TEST(Fp32Gemm, MostlyZeroInputsGiveTheSameNumbers) {
  MTX_REQUIRE_KERNEL();
  const int threads = at::get_num_threads();
  for (const mtx::cpu::Isa isa : mtx::cpu::runnable()) {
    if (isa < mtx::cpu::Isa::avx2) continue;
    mtx::cpu::ScopedIsa level(isa);
    const std::string kernel = model::fp32::PackedLinear::kernel();
    torch::manual_seed(5);
    for (const auto& [out, in] :
         std::vector<std::pair<int64_t, int64_t>>{{256, 1024}, {33, 1100}, {20, 2100}, {17, 600}, {40, 7}}) {
      const torch::Tensor w = torch::randn({out, in});  // [out, in]
      const torch::Tensor bias = torch::randn({out});
      const model::fp32::PackedLinear layer(w, bias);
      for (const int64_t rows : {1, 5, 6, 7, 12, 13, 203}) {
        for (const double kept : {0.0, 0.1, 0.5, 1.0}) {
          torch::Tensor x = torch::relu(torch::randn({rows, in})) * (torch::rand({rows, in}) < kept);  // [rows, in]
          if (kept == 0.5) x.narrow(1, 0, std::min<int64_t>(in, 1024)).zero_();  // a first pass with no column
          const torch::Tensor want = model::fp32::reference_linear(w, bias, x);  // [rows, out]
          for (const int t : {1, 2}) {
            at::set_num_threads(t);
            const torch::Tensor y = layer.forward(x, /*mostly_zeros=*/true);  // [rows, out]
            ASSERT_TRUE(torch::equal(y, want))
                << kernel << ": " << out << "x" << in << ", " << rows << " rows, " << kept << " kept, " << t
                << " threads: max diff " << (y - want).abs().max().item<float>();
          }
        }
      }
    }
    at::set_num_threads(threads);
    const model::fp32::PackedLinear layer(torch::randn({40, 300}), torch::randn({40}));
    torch::Tensor x = torch::relu(torch::randn({7, 300})) * (torch::rand({7, 300}) < 0.1);  // [7, in]
    x[4][123] = std::numeric_limits<float>::quiet_NaN();
    const torch::Tensor y = layer.forward(x, true);  // [7, 40]
    EXPECT_TRUE(torch::isnan(y[4]).all().item<bool>()) << kernel << ": a NaN input is not skipped";
    EXPECT_TRUE(torch::isfinite(y.narrow(0, 0, 4)).all().item<bool>()) << kernel;
  }
}

// On AVX2 the products with zeros are skipped indeed: an infinite weight that meets only zeros (0 x inf = NaN)
// does not reach the outputs, where every product runs (mostly_zeros false) it does.
TEST(Fp32Gemm, MostlyZeroInputsSkipTheirProductsOnAvx2) {
  MTX_REQUIRE_KERNEL();
  if (!mtx::cpu::runs(mtx::cpu::Isa::avx2, mtx::cpu_features())) GTEST_SKIP() << "no AVX2 here";
  mtx::cpu::ScopedIsa avx2(mtx::cpu::Isa::avx2);
  torch::manual_seed(6);
  torch::Tensor w = torch::randn({64, 512});  // [out, in]
  w.index_put_({3, 100}, std::numeric_limits<float>::infinity());
  const model::fp32::PackedLinear layer(w, torch::Tensor());
  torch::Tensor x = torch::relu(torch::randn({12, 512})) * (torch::rand({12, 512}) < 0.1);  // [12, in]
  x.select(1, 100).zero_();
  EXPECT_TRUE(torch::isfinite(layer.forward(x, true)).all().item<bool>());
  EXPECT_TRUE(torch::isnan(layer.forward(x, false)[0][3]).item<bool>());
}

// A packed Linear runs on the pack at inference, and never on a stale one: after an optimizer step, a load
// (copy_) or a move of the weight, its output is the new weight's, on LibTorch's BLAS until packed again.
TEST(Fp32Gemm, LinearRunsOnThePackUntilItsWeightChanges) {
  MTX_REQUIRE_KERNEL();
  torch::manual_seed(8);
  model::Linear lin(300, 40);
  const torch::Tensor x = torch::randn({6, 300});  // [6, in]
  auto packed_output = [&] {
    torch::NoGradGuard no_grad;
    return lin->forward(x);
  };
  auto reference = [&] { return model::fp32::reference_linear(lin->weight.detach(), lin->bias.detach(), x); };
  lin->pack_fp32();
  EXPECT_TRUE(torch::equal(packed_output(), reference())) << "the packed kernel runs at inference";

  // Training: gradients on, so the pack is never used; the optimizer's in-place update makes it stale.
  torch::optim::Adam adam(lin->parameters(), torch::optim::AdamOptions(0.1));
  adam.zero_grad();
  lin->forward(x).pow(2).sum().backward();
  adam.step();
  const torch::Tensor after_step = packed_output();
  EXPECT_TRUE(torch::allclose(after_step, torch::addmm(lin->bias, x, lin->weight.t()).detach(), 1e-4, 1e-5))
      << "after an optimizer step: the updated weights";
  lin->pack_fp32();
  EXPECT_TRUE(torch::equal(packed_output(), reference())) << "packed again";

  {
    torch::NoGradGuard no_grad;
    lin->weight.copy_(torch::randn({40, 300}));  // a load
    lin->bias.zero_();
  }
  EXPECT_TRUE(torch::allclose(packed_output(), torch::matmul(x, lin->weight.t()).detach(), 1e-4, 1e-5))
      << "after a load";
}

// The float kernel runs at the avx2 level and wider: a narrower level (MTX_CPU_ISA, or cpu::ScopedIsa here)
// sends packed layers back to the BLAS at their next call, with the BLAS's numbers.
TEST(Fp32Gemm, ANarrowerIsaRunsTheBlas) {
  if (!mtx::cpu::runs(mtx::cpu::Isa::avx2, mtx::cpu_features())) GTEST_SKIP() << "no AVX2 here";
  mtx::cpu::ScopedIsa avx2(mtx::cpu::Isa::avx2);
  if (!model::fp32::PackedLinear::available()) GTEST_SKIP() << "MTX_FP32_GEMM=blas";
  torch::manual_seed(3);
  model::Linear layer(48, 40);
  layer->pack_fp32();
  const torch::Tensor x = torch::randn({5, 48});  // [5, in]
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(
      torch::equal(layer->forward(x), model::fp32::reference_linear(layer->weight.detach(), layer->bias.detach(), x)));
  mtx::cpu::ScopedIsa generic(mtx::cpu::Isa::generic);
  EXPECT_FALSE(model::fp32::PackedLinear::available());
  EXPECT_TRUE(torch::equal(layer->forward(x), torch::nn::functional::linear(x, layer->weight, layer->bias)));
}
