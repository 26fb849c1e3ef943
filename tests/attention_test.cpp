#include "mtx/model/attention.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "mtx/model/masks.h"
#include "mtx/util/cpu_isa.h"

using namespace mtx::model;

namespace {

// Per-head, per-query reference: softmax over the allowed keys only.
torch::Tensor naive_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& mask) {
  const int64_t b = q.size(0), h = q.size(1), tq = q.size(2), tk = k.size(2);
  torch::Tensor out = torch::zeros_like(q);
  const torch::Tensor m = mask.expand({b, h, tq, tk});
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < h; ++j)
      for (int64_t t = 0; t < tq; ++t) {
        torch::Tensor s = torch::mv(k[i][j], q[i][j][t]) / std::sqrt(double(q.size(3)));  // [tk]
        s = s.masked_fill(m[i][j][t].logical_not(), -std::numeric_limits<double>::infinity());
        out[i][j][t] = torch::mv(v[i][j].t(), torch::softmax(s, 0));
      }
  return out;
}

}  // namespace

TEST(Attention, ExplicitPathMatchesANaiveReference) {
  torch::manual_seed(1);
  const torch::Tensor q = torch::randn({2, 3, 4, 8}, torch::kDouble);
  const torch::Tensor k = torch::randn({2, 3, 5, 8}, torch::kDouble);
  const torch::Tensor v = torch::randn({2, 3, 5, 8}, torch::kDouble);
  const torch::Tensor tokens = torch::tensor({1, 1, 1, 0, 0, 1, 1, 1, 1, 1}, torch::kLong).view({2, 5});
  const torch::Tensor mask = key_padding_mask(tokens, 0);
  const torch::Tensor got = attention(q, k, v, mask, 0.0, false, /*use_sdpa=*/false);
  EXPECT_TRUE(torch::allclose(got, naive_attention(q, k, v, mask), 1e-10, 1e-10));
}

// Incremental decoding's one-query path (float, CPU, no dropout): a fused loop over the cache, on strided inputs
// as the decoder hands them (heads split out of fused projections), with a padding mask and a fully masked row.
TEST(Attention, OneQueryPathMatchesANaiveReference) {
  torch::manual_seed(4);
  const torch::Tensor q = torch::randn({3, 1, 4, 20}).transpose(1, 2);  // [3, 4, 1, 20], not contiguous
  const torch::Tensor kv = torch::randn({3, 7, 2 * 4 * 20});            // fused K|V of 7 keys
  const auto parts = kv.chunk(2, -1);
  const torch::Tensor k = parts[0].view({3, 7, 4, 20}).transpose(1, 2);  // [3, 4, 7, 20], strided
  const torch::Tensor v = parts[1].view({3, 7, 4, 20}).transpose(1, 2);
  const torch::Tensor tokens =
      torch::tensor({1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, torch::kLong).view({3, 7});
  const torch::Tensor mask = key_padding_mask(tokens, 0);  // row 2: every key masked
  torch::NoGradGuard no_grad;
  const torch::Tensor got = attention(q, k, v, mask, 0.0, false, /*use_sdpa=*/false);  // [3, 4, 1, 20]
  const torch::Tensor want = naive_attention(q.to(torch::kDouble), k.to(torch::kDouble), v.to(torch::kDouble), mask);
  EXPECT_TRUE(torch::allclose(got.narrow(0, 0, 2).to(torch::kDouble), want.narrow(0, 0, 2), 1e-5, 1e-5));
  EXPECT_EQ(got[2].abs().max().item<float>(), 0.0f) << "a row with no key to attend to gives zeros";
  // Without a mask (the self-attention cache) and computed alone, a row gives the same numbers.
  const torch::Tensor all = attention(q, k, v, torch::Tensor(), 0.0, false, false);
  const torch::Tensor one =
      attention(q.narrow(0, 1, 1), k.narrow(0, 1, 1), v.narrow(0, 1, 1), torch::Tensor(), 0.0, false, false);
  EXPECT_TRUE(torch::equal(all.narrow(0, 1, 1), one));
  EXPECT_TRUE(torch::allclose(all.to(torch::kDouble),
                              naive_attention(q.to(torch::kDouble), k.to(torch::kDouble), v.to(torch::kDouble),
                                              torch::ones({1, 1, 1, 7}, torch::kBool)),
                              1e-5, 1e-5));
}

// The one-query loop gives the same floats at every instruction-set level this CPU runs (the vector levels score
// eight keys at once), for head sizes with and without a tail past a multiple of 8, key counts with and without a
// tail past a multiple of 8, masked keys among them, and keys whose scores are far apart.
TEST(Attention, OneQueryPathIsTheSameAtEveryLevel) {
  torch::NoGradGuard no_grad;
  for (const int64_t d : {8, 20, 32, 64}) {
    for (const int64_t t : {3, 8, 13, 40}) {
      torch::manual_seed(uint64_t(d * 100 + t));
      const torch::Tensor q = torch::randn({2, 4, 1, d}) * 3;    // [2, 4, 1, d]
      const torch::Tensor kv = torch::randn({2, t, 2 * 4 * d});  // fused K|V
      const auto parts = kv.chunk(2, -1);
      const torch::Tensor k = parts[0].view({2, t, 4, d}).transpose(1, 2);  // [2, 4, t, d], strided
      const torch::Tensor v = parts[1].view({2, t, 4, d}).transpose(1, 2);
      const torch::Tensor tokens = (torch::arange(2 * t).view({2, t}) % 5 != 3).to(torch::kLong);  // some pads
      const torch::Tensor mask = key_padding_mask(tokens, 0);
      torch::Tensor first;
      for (const mtx::cpu::Isa isa : mtx::cpu::runnable()) {
        mtx::cpu::ScopedIsa level(isa);
        const torch::Tensor got = torch::cat(
            {attention(q, k, v, mask, 0.0, false, false), attention(q, k, v, torch::Tensor(), 0.0, false, false)});
        if (!first.defined()) {
          first = got;
        } else {
          EXPECT_TRUE(torch::equal(got, first)) << "d " << d << ", " << t << " keys, level " << mtx::cpu::name(isa)
                                                << ": max diff " << (got - first).abs().max().item<float>();
        }
      }
    }
  }
}

TEST(Attention, SdpaAndExplicitPathsAgree) {
  if (!sdpa_available()) GTEST_SKIP() << "this LibTorch has no scaled_dot_product_attention (< 2.0)";
  torch::manual_seed(2);
  const torch::Tensor q = torch::randn({2, 4, 6, 16});
  const torch::Tensor k = torch::randn({2, 4, 6, 16});
  const torch::Tensor v = torch::randn({2, 4, 6, 16});
  const torch::Tensor tokens = torch::tensor({5, 5, 5, 5, 0, 0, 5, 5, 5, 5, 5, 5}, torch::kLong).view({2, 6});
  const torch::Tensor mask = decoder_self_mask(tokens, 0);
  const torch::Tensor a = attention(q, k, v, mask, 0.0, false, true);
  const torch::Tensor b = attention(q, k, v, mask, 0.0, false, false);
  EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-5));
}

TEST(Attention, CachedSelfAttentionEqualsTheCausalFullPass) {
  torch::manual_seed(3);
  SelfAttention attn(AttentionOptions(32, 4));
  attn->eval();
  const torch::Tensor x = torch::randn({2, 5, 32});  // [b, t, d]
  const torch::Tensor full = attn->forward(x, causal_mask(5, x.options()));
  SelfKV cache;
  for (int64_t t = 0; t < 5; ++t) {
    const torch::Tensor step = attn->forward(x.narrow(1, t, 1), torch::Tensor(), &cache);  // [b, 1, d]
    EXPECT_TRUE(torch::allclose(step.squeeze(1), full.select(1, t), 1e-5, 1e-6)) << "step " << t;
  }
  EXPECT_EQ(cache.k.size(2), 5);
}

TEST(Attention, FusedProjectionsHaveTheExpectedShapes) {
  SelfAttention self(AttentionOptions(64, 8));
  CrossAttention cross(AttentionOptions(64, 8));
  EXPECT_EQ(self->qkv->weight.sizes(), (std::vector<int64_t>{192, 64}));
  EXPECT_EQ(cross->kv->weight.sizes(), (std::vector<int64_t>{128, 64}));
  const SelfKV kv = cross->project_memory(torch::randn({3, 7, 64}));
  EXPECT_EQ(kv.k.sizes(), (std::vector<int64_t>{3, 8, 7, 8}));
  const torch::Tensor y = cross->forward(torch::randn({3, 2, 64}), kv, torch::ones({3, 1, 1, 7}, torch::kBool));
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{3, 2, 64}));
}
