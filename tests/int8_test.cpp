// int8 inference: the weight quantization, the packed layer (close to float, a row's result the same in any
// batch), batch-invariant translations, and int8 bundles that load back exactly what was quantized.
#include "mtx/model/linear.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "mtx/bundle/bundle.h"
#include "mtx/data/prepare.h"
#include "mtx/decode/translator.h"
#include "mtx/model/int8_gemm.h"
#include "mtx/util/cpu_isa.h"
#include "mtx/util/errors.h"
#include "test_utils.h"

#if defined(__x86_64__)
#include "../src/model/cpu/int8_kernels.h"
#endif

using namespace mtx;

namespace {

bool have_engine() { return !model::int8::engine().empty(); }

#define MTX_REQUIRE_INT8_ENGINE()                                                    \
  do {                                                                               \
    if (!have_engine()) GTEST_SKIP() << "this LibTorch has no quantized CPU engine"; \
  } while (0)

struct Int8Toy {
  test::TempDir tmp;
  config::Config config;
  std::optional<tokenizer::Tokenizer> tok;
  model::Transformer model{nullptr};

  explicit Int8Toy(bool tie_output = true) {
    config = test::toy_setup(tmp);
    config.model.tie_output = tie_output;
    tok = data::prepare_data(config).tokenizer;
    torch::manual_seed(5);
    model = bundle::build_model(config, *tok);
    model->eval();
  }
  decode::Translator translator(int beam, int batch_tokens = 4096) {
    decode::TranslateOptions o;
    o.search.beam = beam;
    o.search.batch_tokens = batch_tokens;
    return decode::Translator(model, *tok, o);
  }
};

const std::vector<std::string> kInt8Lines = {"ein Hund läuft", "zwei Männer spielen Fußball im Park heute", "Kinder",
                                             "eine Frau liest ein Buch", "ein Mann fährt Fahrrad und ein Hund läuft"};

}  // namespace

TEST(Int8, WeightsQuantizePerRowAndRequantizeExactly) {
  torch::manual_seed(1);
  torch::Tensor w = torch::randn({6, 40});
  w[2].mul_(100);  // rows of very different magnitude keep their own scales
  w[4].zero_();    // an all-zero row stays zero
  const model::int8::Weight q = model::int8::quantize(w);
  EXPECT_EQ(q.values.scalar_type(), torch::kChar);
  EXPECT_EQ(q.values.sizes(), w.sizes());
  const torch::Tensor absmax = q.values.to(torch::kInt).abs().amax(1);  // [6]
  for (int r = 0; r < 6; ++r) EXPECT_EQ(absmax[r].item<int>(), r == 4 ? 0 : 127) << "row " << r;
  const torch::Tensor back = model::int8::dequantize(q);
  const torch::Tensor err = (back - w).abs();  // [6, 40]
  EXPECT_TRUE((err <= q.scales.unsqueeze(1) * 0.5001).all().item<bool>()) << "rounding error beyond half a step";
  // A stored int8 bundle keeps dequantized weights; quantizing them again must give the same int8 values.
  const model::int8::Weight again = model::int8::quantize(back);
  EXPECT_TRUE(torch::equal(again.values, q.values));
  EXPECT_TRUE(torch::allclose(again.scales, q.scales, 1e-6, 0));
}

TEST(Int8, PackedLinearIsCloseToFloatAndEachRowIsBatchIndependent) {
  MTX_REQUIRE_INT8_ENGINE();
  torch::manual_seed(2);
  const torch::Tensor w = torch::randn({48, 64}) * 0.1;  // [out, in]
  const torch::Tensor bias = torch::randn({48});
  const model::int8::PackedLinear layer(model::int8::quantize(w), bias);
  torch::Tensor x = torch::randn({9, 64});
  x[3].mul_(50);    // a row far larger than the others: with one per-batch activation scale the small rows
  x[5].mul_(0.01);  // would lose their resolution (and their result would depend on this row being there)
  const torch::Tensor y = layer.forward(x);                             // [9, 48]
  const torch::Tensor ref = torch::nn::functional::linear(x, w, bias);  // [9, 48]
  for (int64_t r = 0; r < 9; ++r) {
    const double rel = ((y[r] - ref[r]).norm() / (ref[r] - bias).norm()).item<double>();
    EXPECT_LT(rel, 0.03) << "row " << r;
    const torch::Tensor alone = layer.forward(x.narrow(0, r, 1));  // [1, 48]
    EXPECT_TRUE(torch::equal(alone[0], y[r])) << "row " << r << " differs when computed alone";
  }
  // Leading dimensions are kept: [3, 3, 64] -> [3, 3, 48], the same numbers.
  EXPECT_TRUE(torch::equal(layer.forward(x.view({3, 3, 64})).view({9, 48}), y));
}

TEST(Int8, RowsQuantizeByTheirOwnMaximumRoundingHalfToEven) {
  const torch::Tensor x = torch::tensor({1.0f, -2.0f, 0.5f, 4.0f, 0.0f, 0.0f, 0.0f, 0.0f}).view({2, 4});
  const auto [q, scales] = model::int8::quantize_rows(x, 8);
  // 127 / 4 = 31.75 per unit: 31.75, -63.5 (to even: -64), 15.875, 127; the zero row stays zero with scale 0.
  EXPECT_TRUE(torch::equal(q[0], torch::tensor({32, -64, 16, 127}, torch::kChar))) << q[0];
  EXPECT_TRUE(torch::equal(q[1], torch::zeros({4}, torch::kChar)));
  EXPECT_FLOAT_EQ(scales[0].item<float>(), 4.0f / 127.0f);
  EXPECT_EQ(scales[1].item<float>(), 0.0f);
  // 7 bits: 63 / 4 = 15.75 per unit: 15.75, -31.5 (to even: -32), 7.875, 63.
  const auto [q7, scales7] = model::int8::quantize_rows(x, 7);
  EXPECT_TRUE(torch::equal(q7[0], torch::tensor({16, -32, 8, 63}, torch::kChar))) << q7[0];
  EXPECT_FLOAT_EQ(scales7[0].item<float>(), 4.0f / 63.0f);
  EXPECT_THROW(model::int8::quantize_rows(x, 6), c10::Error);
  // The reference int8 linear is within the quantization error of float.
  torch::manual_seed(3);
  const torch::Tensor w = torch::randn({24, 40}) * 0.2, bias = torch::randn({24}), xs = torch::randn({5, 40});
  const torch::Tensor y = model::int8::reference_linear(model::int8::quantize(w), bias, xs, 8);  // [5, 24]
  const torch::Tensor ref = torch::nn::functional::linear(xs, w, bias);                          // [5, 24]
  EXPECT_LT(((y - ref).norm() / (ref - bias).norm()).item<double>(), 0.03);
}

// mtx's int8 kernels (AVX-512 VNNI; AVX2, without VNNI; plain C++) give the reference's numbers bit for bit, at every
// level this CPU runs, over the shapes their tiling has edges at: outputs not a multiple of the 32-wide panels or their
// 16-lane halves, inputs not a multiple of 4 or 16, rows not a multiple of the 8- or 4-row tiles; rows alone give
// what they give in a batch. Both activation widths: 8 bits, and 7 (the AVX2 kernel's int16 sums of two groups),
// over inputs of an odd and an even number of 4-input groups.
TEST(Int8, KernelsMatchTheReferenceExactly) {
  if (!model::int8::KernelLinear::available()) GTEST_SKIP() << "MTX_INT8_ENGINE picks LibTorch's engine";
  for (const cpu::Isa isa : cpu::runnable()) {
    for (const int bits : {8, 7}) {
      cpu::ScopedIsa level(isa);
      const std::string kernel =
          model::int8::KernelLinear::kernel() + std::string(", ") + std::to_string(bits) + " bits";
      torch::manual_seed(4);
      struct Shape {
        int64_t out, in;
      };
      for (const Shape s :
           {Shape{1, 5}, Shape{16, 16}, Shape{17, 64}, Shape{33, 3}, Shape{48, 256}, Shape{100, 1023}, Shape{40, 12}}) {
        torch::Tensor w = torch::randn({s.out, s.in}) * 0.1;  // [out, in]
        w[0].mul_(30);
        const model::int8::Weight q = model::int8::quantize(w);
        for (const bool with_bias : {true, false}) {
          const torch::Tensor bias = with_bias ? torch::randn({s.out}) : torch::Tensor();
          const model::int8::KernelLinear layer(q, bias, bits);
          for (const int64_t rows : {1, 3, 7, 8, 9, 33}) {
            torch::Tensor x = torch::randn({rows, s.in}) * 2;  // [rows, in]
            x[0].zero_();                                      // a zero row: the bias alone
            if (rows > 2) x[2].mul_(1000);
            const torch::Tensor y = layer.forward(x);                                    // [rows, out]
            const torch::Tensor want = model::int8::reference_linear(q, bias, x, bits);  // [rows, out]
            ASSERT_TRUE(torch::equal(y, want))
                << kernel << ": " << s.out << "x" << s.in << ", " << rows << " rows, bias " << with_bias
                << ": max diff " << (y - want).abs().max().item<float>();
            const int64_t r = rows - 1;
            EXPECT_TRUE(torch::equal(layer.forward(x.narrow(0, r, 1))[0], y[r])) << kernel << ": row " << r;
          }
        }
      }
      // Leading dimensions are kept, and a model's int8 layers run on this kernel.
      const model::int8::KernelLinear layer(model::int8::quantize(torch::randn({8, 12})), torch::Tensor());
      const torch::Tensor x = torch::randn({2, 3, 12});
      EXPECT_TRUE(torch::equal(layer.forward(x).view({6, 8}), layer.forward(x.view({6, 12})))) << kernel;
      EXPECT_EQ(model::int8::engine(), model::int8::KernelLinear::kernel());
    }
  }
}

// A NaN in a row is left out of the row's maximum at every level, wherever it stands against the maximum: before
// or after it, in the same vector lane or another, in a whole vector or the tail past the last one (widths off and
// on the 8- and 16-float vectors). A kernel that lets a NaN replace a lane's running maximum quantizes the row
// against a smaller scale (seen at avx512_vnni: 0.19 off in a 1100-wide row whose last value was NaN).
TEST(Int8, ANaNNeverHidesTheRowMaximum) {
  if (!model::int8::KernelLinear::available()) GTEST_SKIP() << "MTX_INT8_ENGINE picks LibTorch's engine";
  torch::manual_seed(5);
  for (const cpu::Isa isa : cpu::runnable()) {
    cpu::ScopedIsa level(isa);
    for (const int64_t in : {7, 16, 17, 36, 48}) {
      torch::Tensor w = torch::randn({40, in}) * 0.1;  // [out, in]
      const model::int8::Weight q = model::int8::quantize(w);
      const torch::Tensor bias = torch::randn({40});
      // One row per (maximum at m, NaN at n), m != n: [in * (in - 1), in].
      torch::Tensor x = torch::rand({in * (in - 1), in}) * 2 - 1;
      int64_t row = 0;
      for (int64_t m = 0; m < in; ++m) {
        for (int64_t n = 0; n < in; ++n) {
          if (m == n) continue;
          x[row][m] = (row % 2 ? -3.0 : 3.0);
          x[row][n] = std::nan("");
          ++row;
        }
      }
      for (const int bits : {8, 7}) {
        const model::int8::KernelLinear layer(q, bias, bits);
        const torch::Tensor want = model::int8::reference_linear(q, bias, x, bits);  // [rows, 40]
        for (const bool mostly_zeros : {false, true}) {
          const torch::Tensor y = layer.forward(x, mostly_zeros);  // [rows, 40]
          ASSERT_TRUE(torch::equal(y, want))
              << cpu::name(isa) << ": width " << in << ", " << bits << " bits, mostly_zeros " << mostly_zeros
              << ": max diff " << (y - want).abs().max().item<float>();
        }
      }
    }
  }
}

// ReLU's outputs (mostly zeros) through the products that skip zeros (the avx2 kernel, 7-bit activations): the
// reference's numbers bit for bit, at every density (a whole chunk dense falls back to the dense kernel), every
// tile height (tails of 1-5 rows), input widths off the 32-byte blocks and output widths off the panels, rows of
// zeros and NaN, and every activation and weight at its largest. At every level: elsewhere the flag changes nothing.
TEST(Int8, MostlyZeroInputsGiveTheReferenceNumbers) {
  if (!model::int8::KernelLinear::available()) GTEST_SKIP() << "MTX_INT8_ENGINE picks LibTorch's engine";
  torch::manual_seed(12);
  struct Shape {
    int64_t out, in;
  };
  for (const cpu::Isa isa : cpu::runnable()) {
    cpu::ScopedIsa level(isa);
    for (const Shape s : {Shape{256, 1024}, Shape{100, 1100}, Shape{33, 36}, Shape{7, 7}}) {
      torch::Tensor w = torch::randn({s.out, s.in}) * 0.1;  // [out, in]
      const model::int8::Weight q = model::int8::quantize(w);
      const torch::Tensor bias = torch::randn({s.out});
      const model::int8::KernelLinear layer(q, bias, 7);
      for (const int64_t rows : {1, 5, 6, 7, 13, 50, 203, 800}) {
        for (const double density : {0.0, 0.03, 0.12, 0.4, 1.0}) {
          torch::Tensor x = torch::relu(torch::randn({rows, s.in})) *
                            torch::rand({rows, s.in}).lt(density).to(torch::kFloat);      // [rows, in]
          if (density == 0.12) x.mul_(torch::randint(0, 2, {rows, s.in}).mul(2).sub(1));  // signed values too
          if (rows > 3) x[3].zero_();
          if (rows > 4 && density > 0.1) x[4][s.in - 1] = std::nan("");
          const torch::Tensor y = layer.forward(x, /*mostly_zeros=*/true);          // [rows, out]
          const torch::Tensor want = model::int8::reference_linear(q, bias, x, 7);  // [rows, out]
          ASSERT_TRUE(torch::equal(y, want))
              << cpu::name(isa) << ": " << s.out << "x" << s.in << ", " << rows << " rows, density " << density
              << ": max diff " << (y - want).abs().max().item<float>();
        }
      }
    }
    // The largest values: |q| = 63 against weights of +-127, two groups' pair sums in one int16.
    torch::Tensor w = torch::ones({40, 64});  // [40, in]
    w.narrow(0, 20, 20).fill_(-1.0);
    const model::int8::Weight q = model::int8::quantize(w);
    const model::int8::KernelLinear layer(q, torch::Tensor(), 7);
    torch::Tensor x = torch::ones({9, 64});  // [9, in]
    x[1].fill_(-1.0);
    x.narrow(1, 8, 40).zero_();
    EXPECT_TRUE(torch::equal(layer.forward(x, true), model::int8::reference_linear(q, torch::Tensor(), x, 7)))
        << cpu::name(isa);
  }
}

#if defined(__x86_64__)
// The gathering behind those skipped products (a kernel's own interface, src/model/cpu/int8_kernels.h): per tile of
// 6 rows exactly the columns nonzero in some row, ascending, padded to 8 with column 0 and zeros, each row's values
// at them, and whether the tile holds a negative value.
TEST(Int8, SparseColumnsAreTheNonzeroColumnsOfEachTile) {
  if (cpu::detected() < cpu::Isa::avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  namespace k = model::int8::kernels;
  torch::manual_seed(3);
  for (const int64_t in_pad : {8, 64, 1024, 1100}) {
    const int64_t rows = 15;  // tiles of 6, 6 and 3 rows
    torch::Tensor q = torch::randint(-63, 64, {rows, in_pad}, torch::kChar) *
                      torch::rand({rows, in_pad}).lt(0.08).to(torch::kChar);  // [rows, in_pad]
    q.narrow(0, 0, 6).abs_();                                                 // the first tile: no negative value
    q.narrow(0, 12, 3).zero_();                                               // the last: all zero
    const int64_t tiles = 3, columns = tiles * (in_pad + 8);
    std::vector<int32_t> ks(size_t(columns), -1);
    std::vector<int8_t> values(size_t(columns * k::kSparseRows + 8), 99);
    std::vector<uint8_t> negative(tiles, 9);
    std::vector<int64_t> begin(tiles + 1, -1);
    std::vector<uint32_t> masks(size_t(in_pad / 32 + 1));
    const int64_t kept = k::sparse_columns_avx2(q.data_ptr<int8_t>(), rows, in_pad, ks.data(), values.data(),
                                                negative.data(), begin.data(), masks.data());
    int64_t want_kept = 0;
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t height = std::min<int64_t>(6, rows - 6 * t);
      const torch::Tensor tile = q.narrow(0, 6 * t, height);                // [height, in_pad]
      const torch::Tensor nonzero = tile.ne(0).any(0).nonzero().flatten();  // [found]
      const int64_t found = nonzero.numel(), count = begin[size_t(t + 1)] - begin[size_t(t)];
      want_kept += found;
      ASSERT_EQ(count, (found + 7) / 8 * 8) << "in " << in_pad << ", tile " << t;
      EXPECT_EQ(negative[size_t(t)], tile.lt(0).any().item<bool>() ? 1 : 0) << "tile " << t;
      for (int64_t i = 0; i < count; ++i) {
        const int32_t col = ks[size_t(begin[size_t(t)] + i)];
        EXPECT_EQ(col, i < found ? nonzero[i].item<int64_t>() : 0) << "in " << in_pad << ", tile " << t << ", " << i;
        for (int64_t r = 0; r < 6; ++r) {
          const int8_t v = values[size_t(begin[size_t(t)] * 6 + r * count + i)];
          EXPECT_EQ(v, i < found && r < height ? tile[r][col].item<int8_t>() : 0)
              << "tile " << t << ", row " << r << ", " << i;
        }
      }
    }
    EXPECT_EQ(kept, want_kept);
    if (in_pad >= 64) {
      EXPECT_LT(kept, tiles * in_pad / 2) << "most columns are zero in every row of a tile";
    }
  }
}
#endif

// The largest products: every activation at +-127 against weights at +-127. Without VNNI, vpmaddubsw adds pairs
// of u8 x s8 products into int16 and saturates there; a kernel that feeds it q + 128 (up to 255) loses these
// sums. The kernels' sums stay exact at every level.
TEST(Int8, KernelsDoNotSaturateAtTheLargestValues) {
  if (!model::int8::KernelLinear::available()) GTEST_SKIP() << "MTX_INT8_ENGINE picks LibTorch's engine";
  const int64_t in = 64;
  torch::Tensor w = torch::full({6, in}, 1.0);  // [6, in]
  w[1].fill_(-1.0);
  w[2].copy_(torch::arange(in).remainder(2).mul(2).sub(1));        // +-1 alternating
  w[3].copy_(torch::arange(in).remainder(4).lt(2).mul(2).sub(1));  // pairs of +1, pairs of -1
  w[4].narrow(0, 0, in / 2).fill_(-1.0);
  w[5].fill_(0.5);
  w[5][0] = 1.0;
  const model::int8::Weight q = model::int8::quantize(w);
  ASSERT_EQ(q.values[0][0].item<int8_t>(), 127);
  torch::Tensor x = torch::ones({4, in});  // [4, in]: q = +-127 throughout
  x[1].fill_(-1.0);
  x[2].copy_(torch::arange(in).remainder(2).mul(2).sub(1));
  x[3].copy_(torch::arange(in).remainder(4).lt(2).mul(-2).add(1));
  const torch::Tensor many = x.repeat({9, 1});  // [36, in]: a call of many rows (oneDNN's, where it runs)
  for (const cpu::Isa isa : cpu::runnable()) {
    for (const int bits : {8, 7}) {  // 7: +-63 activations, two groups' pair sums in one int16
      for (const torch::Tensor& xs : {x, many}) {
        cpu::ScopedIsa level(isa);
        const model::int8::KernelLinear layer(q, torch::Tensor(), bits);
        const torch::Tensor y = layer.forward(xs), want = model::int8::reference_linear(q, torch::Tensor(), xs, bits);
        EXPECT_TRUE(torch::equal(y, want))
            << model::int8::KernelLinear::kernel() << ", " << bits << " bits, " << xs.size(0) << " rows: max diff "
            << (y - want).abs().max().item<float>() << "\n"
            << y << want;
      }
    }
  }
}

// The same largest values through int8::PackedLinear, on whatever engine this run picks (mtx's kernels, or
// LibTorch's under MTX_INT8_ENGINE=libtorch, as ctest's Int8.OnLibTorchEngine runs): within quantization error
// of the float product. LibTorch's x86 engines without VNNI saturate here with 8-bit activations (a relative
// error of 0.3 and more); they get 7-bit ones there.
TEST(Int8, TheLargestValuesStayCloseToFloatOnEveryEngine) {
  MTX_REQUIRE_INT8_ENGINE();
  const int64_t in = 64;
  torch::Tensor w = torch::ones({3, in});  // [3, in]
  w[1].copy_(torch::arange(in).remainder(2).mul(2).sub(1));
  w[2].fill_(-1.0);
  const model::int8::Weight q = model::int8::quantize(w);
  torch::Tensor x = torch::ones({3, in});  // [3, in]
  x[1].copy_(torch::arange(in).remainder(2).mul(-2).add(1));
  x[2].fill_(-1.0);
  const model::int8::PackedLinear layer(q, torch::Tensor());
  const torch::Tensor y = layer.forward(x);                                                // [3, 3]
  const torch::Tensor ref = torch::nn::functional::linear(x, model::int8::dequantize(q));  // [3, 3]
  EXPECT_LT(((y - ref).norm() / ref.norm()).item<double>(), 0.03) << model::int8::engine() << "\n" << y << ref;
}

TEST(Int8, TranslationsDoNotDependOnTheBatch) {
  MTX_REQUIRE_INT8_ENGINE();
  Int8Toy toy;
  toy.model->quantize_int8(/*include_output=*/true);
  ASSERT_TRUE(toy.model->is_int8());
  for (const int beam : {1, 5}) {
    const auto together = toy.translator(beam).translate(kInt8Lines);
    const auto tiny_batches = toy.translator(beam, 12).translate(kInt8Lines);
    for (size_t i = 0; i < kInt8Lines.size(); ++i) {
      const auto alone = toy.translator(beam).translate({kInt8Lines[i]});
      EXPECT_EQ(together[i].hypotheses[0].tokens, alone[0].hypotheses[0].tokens)
          << "beam " << beam << ": " << kInt8Lines[i];
      EXPECT_NEAR(together[i].hypotheses[0].score, alone[0].hypotheses[0].score, 1e-4) << kInt8Lines[i];
      EXPECT_EQ(tiny_batches[i].hypotheses[0].tokens, alone[0].hypotheses[0].tokens) << kInt8Lines[i];
    }
  }
}

TEST(Int8, QuantizedModelRunsEveryLayerInt8AndStaysCloseToFloat) {
  MTX_REQUIRE_INT8_ENGINE();
  for (const bool tied : {true, false}) {
    Int8Toy toy(tied);
    const torch::Tensor src = torch::tensor({{5, 9, 14, 22, 3}}, torch::kLong);
    const torch::Tensor tgt = torch::tensor({{2, 7, 11, 30}}, torch::kLong);
    torch::NoGradGuard no_grad;
    const torch::Tensor ref = toy.model->forward(src, tgt);  // [1, 4, V]
    toy.model->quantize_int8(/*include_output=*/false);
    const torch::Tensor layers_only = toy.model->forward(src, tgt);
    toy.model->quantize_int8(/*include_output=*/true);  // adds the output projection
    const torch::Tensor all = toy.model->forward(src, tgt);
    EXPECT_FALSE(torch::equal(ref, layers_only));
    EXPECT_FALSE(torch::equal(layers_only, all)) << "the output projection was not quantized (tied " << tied << ")";
    EXPECT_LT(((all - ref).norm() / ref.norm()).item<double>(), 0.05) << "tied " << tied;
    int64_t int8_layers = 0;
    for (const auto& m : toy.model->modules(false)) {
      if (const auto* l = m->as<model::LinearImpl>()) {
        EXPECT_TRUE(l->is_int8());
        ++int8_layers;
      }
    }
    // 1 encoder layer (qkv, out, fc1, fc2) + 1 decoder layer (qkv, out, q, kv, out, fc1, fc2) (+ output)
    EXPECT_EQ(int8_layers, 4 + 7 + (tied ? 0 : 1));
    EXPECT_EQ(toy.model->tied_output_int8().defined(), tied);
  }
}

TEST(Int8, StoredInt8BundleLoadsBackWhatWasQuantized) {
  MTX_REQUIRE_INT8_ENGINE();
  for (const bool tied : {true, false}) {
    Int8Toy toy(tied);
    const auto float_path = toy.tmp / "float.pt";
    const auto int8_path = toy.tmp / "int8.pt";
    bundle::save_bundle(float_path, toy.config, *toy.tok, toy.model);
    bundle::Bundle b = bundle::load_bundle(float_path);
    bundle::quantize_int8(b);
    bundle::save_bundle(int8_path, b.config, *b.tokenizer, b.model);
    bundle::Bundle back = bundle::load_bundle(int8_path);
    ASSERT_TRUE(back.model->is_int8());
    EXPECT_TRUE(back.model->int8_output());
    EXPECT_EQ(back.weights_sha256, b.weights_sha256);
    const torch::Tensor src = torch::tensor({{5, 9, 14, 22, 3}}, torch::kLong);
    const torch::Tensor tgt = torch::tensor({{2, 7, 11, 30}}, torch::kLong);
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::equal(back.model->forward(src, tgt), b.model->forward(src, tgt))) << "tied " << tied;
    // The quantized layers are stored as int8: at least 2 of every 4 bytes of their weights are saved (a tied
    // output projection's int8 copy of the embedding costs 1 byte per element; norms and embeddings stay float).
    int64_t quantized = 0;
    for (const auto& m : back.model->modules(false)) {
      if (const auto* l = m->as<model::LinearImpl>()) quantized += l->weight.numel();
    }
    EXPECT_LT(int64_t(std::filesystem::file_size(int8_path)) + 2 * quantized,
              int64_t(std::filesystem::file_size(float_path)))
        << "tied " << tied;
  }
}

TEST(Int8, Int8BundleOnAnotherDeviceIsRefusedWithAMessage) {
  MTX_REQUIRE_INT8_ENGINE();
  Int8Toy toy;
  bundle::save_bundle(toy.tmp / "f.pt", toy.config, *toy.tok, toy.model);
  bundle::Bundle b = bundle::load_bundle(toy.tmp / "f.pt");
  bundle::quantize_int8(b);
  bundle::save_bundle(toy.tmp / "q.pt", b.config, *b.tokenizer, b.model);
  const std::string msg =
      test::boundary_error<ConfigError>([&] { bundle::load_bundle(toy.tmp / "q.pt", torch::Device(torch::kCUDA)); });
  EXPECT_NE(msg.find("runs on the CPU"), std::string::npos) << msg;
}

namespace {

// What a model holds in float parameter storage (a released weight's placeholder holds one element).
int64_t float_bytes(model::Transformer& m) {
  int64_t n = 0;
  for (const auto& p : m->parameters()) n += int64_t(p.storage().nbytes());
  return n;
}

}  // namespace

TEST(Int8, InferenceLoadingKeepsOneCopyAndChangesNoNumber) {
  // load_for_inference drops every float weight a pack duplicates (int8 layers, the tied output projection's
  // embedding, and float layers packed for mtx's kernels): the numbers must be exactly load_bundle's.
  for (const bool tied : {true, false}) {
    for (const bool int8 : {false, true}) {
      if (int8 && !have_engine()) continue;
      Int8Toy toy(tied);
      const auto path = toy.tmp / "model.pt";
      bundle::save_bundle(path, toy.config, *toy.tok, toy.model);
      bundle::Bundle full = bundle::load_bundle(path);
      if (int8) bundle::quantize_int8(full);
      const auto int8_path = toy.tmp / "int8.pt";
      if (int8) bundle::save_bundle(int8_path, full.config, *full.tokenizer, full.model);
      const std::string what = std::string(tied ? "tied" : "untied") + (int8 ? " int8" : " float");
      std::vector<bundle::Bundle> lean = bundle::load_for_inference({int8 ? int8_path : path});
      ASSERT_EQ(lean.size(), 1u);
      model::Transformer m = lean[0].model;
      full.model->eval();
      full.model->pack_fp32();
      // The hash is over the same values, rebuilt from the packs.
      EXPECT_EQ(bundle::weights_sha256(m), full.weights_sha256) << what;
      EXPECT_EQ(m->parameter_count(), full.model->parameter_count()) << what;
      const bool packs = int8 || model::fp32::PackedLinear::available();
      if (packs) {
        EXPECT_LT(float_bytes(m) * 3, float_bytes(full.model)) << what << ": float weights were not released";
      }
      EXPECT_EQ(m->embedding_released(), tied && packs && (!int8 || full.model->tied_output_int8().defined())) << what;
      const torch::Tensor src = torch::tensor({{5, 9, 14, 22, 3}, {7, 8, 3, 1, 1}}, torch::kLong);
      const torch::Tensor tgt = torch::tensor({{2, 7, 11, 30}, {2, 6, 1, 1}}, torch::kLong);
      {
        torch::NoGradGuard no_grad;
        EXPECT_TRUE(torch::equal(m->forward(src, tgt), full.model->forward(src, tgt))) << what;
      }
      decode::TranslateOptions o;
      o.search.beam = 3;
      const auto a = decode::Translator(m, *lean[0].tokenizer, o).translate(kInt8Lines);
      const auto b = decode::Translator(full.model, *full.tokenizer, o).translate(kInt8Lines);
      for (size_t i = 0; i < kInt8Lines.size(); ++i) {
        EXPECT_EQ(a[i].hypotheses[0].tokens, b[i].hypotheses[0].tokens) << what << ": " << kInt8Lines[i];
        EXPECT_EQ(a[i].hypotheses[0].score, b[i].hypotheses[0].score) << what << ": " << kInt8Lines[i];
      }
      if (!packs) continue;
      // At the generic level (no float kernel) a released float layer runs on its rebuilt weight: the same
      // numbers as the unreleased model there.
      {
        cpu::ScopedIsa generic(cpu::Isa::generic);
        torch::NoGradGuard no_grad;
        EXPECT_TRUE(torch::allclose(m->forward(src, tgt), full.model->forward(src, tgt), 1e-5, 1e-5)) << what;
      }
      // Inference only: it cannot be saved (or cloned) as if its weights were there.
      try {
        bundle::save_bundle(toy.tmp / "again.pt", lean[0].config, *lean[0].tokenizer, m);
        ADD_FAILURE() << what << ": an inference-only model was saved";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("for inference only"), std::string::npos) << e.what();
      }
      EXPECT_THROW(m->clone(), c10::Error) << what;
    }
  }
}

TEST(Int8, AnInt8BundleDoesNotStoreTheEmbeddingItsTiedOutputHolds) {
  MTX_REQUIRE_INT8_ENGINE();
  Int8Toy toy(/*tie_output=*/true);
  const auto path = toy.tmp / "int8.pt";
  toy.model->quantize_int8(/*include_output=*/true);
  bundle::save_bundle(path, toy.config, *toy.tok, toy.model);
  const int64_t embedding = toy.model->tgt_embed->weight.numel() * 4;
  bundle::Bundle back = bundle::load_bundle(path);
  EXPECT_TRUE(torch::equal(back.model->tgt_embed->weight, toy.model->tgt_embed->weight));
  // Saved again, the file is no larger: the embedding (float, 4 bytes an element) is not in it.
  const auto again = toy.tmp / "again.pt";
  bundle::save_bundle(again, back.config, *back.tokenizer, back.model);
  EXPECT_EQ(std::filesystem::file_size(again), std::filesystem::file_size(path));
  Int8Toy float_toy(/*tie_output=*/true);
  bundle::save_bundle(toy.tmp / "float.pt", float_toy.config, *float_toy.tok, float_toy.model);
  EXPECT_LT(int64_t(std::filesystem::file_size(path)) + embedding / 2,
            int64_t(std::filesystem::file_size(toy.tmp / "float.pt")));
}
