#include "mtx/model/transformer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "mtx/config/config.h"
#include "mtx/model/attention.h"
#include "mtx/model/int8_gemm.h"
#include "mtx/model/masks.h"

using namespace mtx::model;
namespace config = mtx::config;

namespace {

// Every option, by name, as text: two option sets compare field by field and a difference is named.
std::vector<std::pair<std::string, std::string>> fields(const TransformerOptions& o) {
  const auto text = [](auto v) {
    std::ostringstream s;
    s << v;
    return s.str();
  };
  return {{"src_vocab", text(o.src_vocab())},
          {"tgt_vocab", text(o.tgt_vocab())},
          {"d_model", text(o.d_model())},
          {"heads", text(o.heads())},
          {"encoder_layers", text(o.encoder_layers())},
          {"decoder_layers", text(o.decoder_layers())},
          {"ffn_dim", text(o.ffn_dim())},
          {"dropout", text(o.dropout())},
          {"attention_dropout", text(o.attention_dropout())},
          {"activation_dropout", text(o.activation_dropout())},
          {"max_len", text(o.max_len())},
          {"pre_norm", text(o.pre_norm())},
          {"positions", config::to_string(o.positions())},
          {"activation", config::to_string(o.activation())},
          {"kaiming_init", text(o.kaiming_init())},
          {"uniform_embeddings", text(o.uniform_embeddings())},
          {"decoder_only", text(o.decoder_only())},
          {"tie_output", text(o.tie_output())},
          {"output_bias", text(o.output_bias())},
          {"share_embeddings", text(o.share_embeddings())},
          {"pad_id", text(o.pad_id())},
          {"use_sdpa", text(o.use_sdpa())}};
}

// The names of the fields where a and b differ.
std::vector<std::string> differing(const TransformerOptions& a, const TransformerOptions& b) {
  std::vector<std::string> out;
  const auto fa = fields(a), fb = fields(b);
  for (size_t i = 0; i < fa.size(); ++i) {
    if (fa[i].second != fb[i].second) out.push_back(fa[i].first + ": " + fa[i].second + " vs " + fb[i].second);
  }
  return out;
}

TransformerOptions small(bool pre_norm, bool learned, bool shared) {
  return TransformerOptions(50, 50)
      .d_model(32)
      .heads(4)
      .encoder_layers(2)
      .decoder_layers(2)
      .ffn_dim(64)
      .max_len(32)
      .pre_norm(pre_norm)
      .positions(learned ? config::Positions::learned : config::Positions::sinusoidal)
      .share_embeddings(shared);
}

// A small model (d 64, pre-norm, shared embeddings) from `seed`, in eval mode with mtx's packed float kernel: the
// CPU inference arrangement whose rows are computed independently.
Transformer packed_for_inference(uint64_t seed) {
  torch::manual_seed(seed);
  Transformer model(small(true, false, true).d_model(64).max_len(64));
  model->eval();
  model->pack_fp32();
  return model;
}

// Parameters and buffers of `a` and `b`: the same names, equal values.
void expect_equal_state(torch::nn::Module& a, torch::nn::Module& b) {
  for (const bool params : {true, false}) {
    const auto ta = params ? a.named_parameters() : a.named_buffers();
    const auto tb = params ? b.named_parameters() : b.named_buffers();
    ASSERT_EQ(ta.keys(), tb.keys());
    for (const auto& item : ta) EXPECT_TRUE(torch::equal(item.value(), tb[item.key()])) << item.key();
  }
}

}  // namespace

// The module options take their defaults from the config section: a config left at its defaults builds the
// model a TransformerOptions left at its defaults builds.
TEST(Transformer, OptionsDefaultsAreTheConfigDefaults) {
  for (const auto& [src, tgt] : {std::pair<int64_t, int64_t>{100, 100}, {100, 120}}) {
    const TransformerOptions defaults(src, tgt);
    EXPECT_EQ(differing(options_from_config(config::ModelConfig{}, src, tgt, 0), defaults), std::vector<std::string>{})
        << src << " -> " << tgt;
    EXPECT_EQ(defaults.share_embeddings(), config::ModelConfig{}.share_embeddings && src == tgt);
  }
  const TransformerOptions t(1, 1);
  const LayerOptions layer(1, 1, 1);
  EXPECT_EQ(layer.dropout(), t.dropout());
  EXPECT_EQ(layer.attention_dropout(), t.attention_dropout());
  EXPECT_EQ(layer.activation_dropout(), t.activation_dropout());
  EXPECT_EQ(layer.pre_norm(), t.pre_norm());
  EXPECT_EQ(layer.activation(), t.activation());
  EXPECT_EQ(layer.use_sdpa(), t.use_sdpa());
  EXPECT_EQ(AttentionOptions(1, 1).dropout(), t.attention_dropout());
  EXPECT_EQ(AttentionOptions(1, 1).use_sdpa(), t.use_sdpa());
}

// ... and every setting of the section reaches the options (a missed one would hide behind equal defaults).
TEST(Transformer, EveryModelSettingReachesTheOptions) {
  config::ModelConfig c;
  c.d_model = 64;
  c.heads = 2;
  c.encoder_layers = 1;
  c.decoder_layers = 3;
  c.ffn_dim = 96;
  c.dropout = 0.3;
  c.attention_dropout = 0.2;
  c.activation_dropout = 0.15;
  c.max_len = 40;
  c.norm = c.norm == config::Norm::pre ? config::Norm::post : config::Norm::pre;
  c.positions = c.positions == config::Positions::learned ? config::Positions::sinusoidal : config::Positions::learned;
  c.activation = c.activation == config::Activation::gelu ? config::Activation::relu : config::Activation::gelu;
  c.init = config::Init::kaiming;
  c.tie_output = !c.tie_output;
  c.output_bias = !c.output_bias;
  c.share_embeddings = !c.share_embeddings;
  const TransformerOptions defaults(100, 100);
  const auto changed = [&](const config::ModelConfig& m, config::Task task) {
    std::vector<std::string> names;
    for (const auto& d : differing(options_from_config(m, 100, 100, 3, task), defaults)) {
      names.push_back(d.substr(0, d.find(':')));
    }
    return names;
  };
  EXPECT_EQ(changed(c, config::Task::lm),
            (std::vector<std::string>{"d_model", "heads", "encoder_layers", "decoder_layers", "ffn_dim", "dropout",
                                      "attention_dropout", "activation_dropout", "max_len", "pre_norm", "positions",
                                      "activation", "kaiming_init", "decoder_only", "tie_output", "output_bias",
                                      "share_embeddings", "pad_id"}));
  config::ModelConfig uniform;
  uniform.init = config::Init::uniform;
  EXPECT_EQ(changed(uniform, config::Task::translation), (std::vector<std::string>{"uniform_embeddings", "pad_id"}));
}

TEST(Transformer, StepByStepDecodingEqualsTheTeacherForcedPass) {
  for (bool pre : {false, true}) {
    for (bool learned : {false, true}) {
      torch::manual_seed(7);
      Transformer model(
          small(pre, learned, true).activation(learned ? config::Activation::gelu : config::Activation::relu));
      model->eval();
      torch::NoGradGuard no_grad;
      // Two sources of different lengths (the second padded), two target prefixes.
      const torch::Tensor src = torch::tensor({5, 6, 7, 8, 3, 9, 10, 3, 0, 0}, torch::kLong).view({2, 5});
      const torch::Tensor tgt = torch::tensor({2, 11, 12, 13, 14, 2, 15, 16, 17, 18}, torch::kLong).view({2, 5});
      const Memory memory = model->encode(src);
      const torch::Tensor full = model->decode(tgt, memory);  // [2, 5, 50]
      DecoderCache cache = model->start_decoding(memory);
      for (int64_t t = 0; t < 5; ++t) {
        const torch::Tensor step = model->decode_step(tgt.select(1, t), cache);  // [2, 50]
        EXPECT_TRUE(torch::allclose(step, full.select(1, t), 1e-5, 1e-5))
            << "pre_norm=" << pre << " learned=" << learned << " step " << t << " max diff "
            << (step - full.select(1, t)).abs().max().item<float>();
      }
    }
  }
}

// A decoding step keeps its rows' cross-attention as the teacher-forced pass has it (attention_maps): `attention`
// the last decoder layer's, averaged over heads (a search's return_attention), `layers_attention` averaged over
// every layer too (what glossary terms tied to source words read), one kept without the other.
TEST(Transformer, DecodingStepsKeepTheLastLayersAndEveryLayersAttention) {
  torch::manual_seed(13);
  TransformerOptions options = small(true, false, true);
  options.decoder_layers(3);
  Transformer model(options);
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor src = torch::tensor({{5, 6, 7, 8, 3}}, torch::kLong);
  const torch::Tensor tgt = torch::tensor({{2, 11, 12, 13}}, torch::kLong);
  const AttentionMaps maps = model->attention_maps(src, tgt);
  ASSERT_EQ(maps.cross.size(), 3u);
  torch::Tensor every = torch::zeros_like(maps.cross[0].mean(0));  // [t, s]
  for (const auto& layer : maps.cross) every += layer.mean(0) / 3.0;
  const torch::Tensor last = maps.cross.back().mean(0);
  for (const bool last_kept : {false, true}) {
    for (const bool layers_kept : {false, true}) {
      DecoderCache cache = model->start_decoding(model->encode(src));
      cache.keep_attention = last_kept;
      cache.keep_layers_attention = layers_kept;
      for (int64_t t = 0; t < tgt.size(1); ++t) {
        model->decode_step(tgt.select(1, t), cache);
        const std::string where =
            "step " + std::to_string(t) + ", kept " + std::to_string(last_kept) + " " + std::to_string(layers_kept);
        ASSERT_EQ(cache.attention.defined(), last_kept) << where;
        ASSERT_EQ(cache.layers_attention.defined(), layers_kept) << where;
        if (last_kept) EXPECT_TRUE(torch::allclose(cache.attention[0], last[t], 1e-5, 1e-6)) << where;
        if (layers_kept) EXPECT_TRUE(torch::allclose(cache.layers_attention[0], every[t], 1e-5, 1e-6)) << where;
      }
    }
  }
  EXPECT_FALSE(torch::allclose(last, every, 1e-3, 1e-3)) << "the layers attend differently";
}

TEST(Transformer, PaddingDoesNotChangeOtherRows) {
  torch::manual_seed(8);
  Transformer model(small(false, false, true));
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor alone =
      model->forward(torch::tensor({{5, 6, 3}}, torch::kLong), torch::tensor({{2, 9}}, torch::kLong));
  const torch::Tensor batched = model->forward(torch::tensor({{5, 6, 3, 0, 0}, {7, 8, 9, 10, 3}}, torch::kLong),
                                               torch::tensor({{2, 9, 0}, {2, 11, 12}}, torch::kLong));
  EXPECT_TRUE(torch::allclose(alone[0], batched[0].narrow(0, 0, 2), 1e-5, 1e-5));
}

TEST(Transformer, ReorderingTheCacheFollowsTheChosenRows) {
  torch::manual_seed(9);
  Transformer model(small(true, false, true));
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor src = torch::tensor({{5, 6, 3}, {7, 8, 3}}, torch::kLong);
  DecoderCache cache = model->start_decoding(model->encode(src));
  model->decode_step(torch::tensor({2, 2}, torch::kLong), cache);
  cache.reorder(torch::tensor({1, 1, 0}, torch::kLong));  // row 1 twice, then row 0
  const torch::Tensor next = model->decode_step(torch::tensor({9, 9, 9}, torch::kLong), cache);
  EXPECT_TRUE(torch::allclose(next[0], next[1]));
  DecoderCache fresh = model->start_decoding(model->encode(src));
  model->decode_step(torch::tensor({2, 2}, torch::kLong), fresh);
  const torch::Tensor ref = model->decode_step(torch::tensor({9, 9}, torch::kLong), fresh);
  EXPECT_TRUE(torch::allclose(next[2], ref[0], 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(next[0], ref[1], 1e-6, 1e-6));
}

TEST(Transformer, SharedEmbeddingsAreCountedOnceAndTiedToTheOutput) {
  Transformer shared(small(false, false, true));
  Transformer separate(small(false, false, false));
  EXPECT_EQ(separate->parameter_count() - shared->parameter_count(), 50 * 32);
  EXPECT_EQ(shared->src_embed.get(), shared->tgt_embed.get());
  EXPECT_FALSE(shared->output);  // tied: no separate projection
  Transformer untied(small(false, false, true).tie_output(false));
  EXPECT_EQ(untied->parameter_count() - shared->parameter_count(), 50 * 32 + 50);
  EXPECT_EQ(shared->src_embed->weight[0].abs().sum().item<float>(), 0.0f) << "pad row starts at zero";
}

TEST(Transformer, LongerThanMaxLenIsRefused) {
  Transformer model(small(false, false, true));
  EXPECT_THROW(model->encode(torch::ones({1, 40}, torch::kLong)), c10::Error);
}

TEST(Transformer, LogitsAtSelectedPositionsEqualTheIncrementalDecoder) {
  torch::manual_seed(10);
  Transformer model(small(false, false, true));
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor src = torch::tensor({5, 6, 7, 8, 3, 9, 10, 3, 0, 0}, torch::kLong).view({2, 5});
  const torch::Tensor tgt = torch::tensor({2, 11, 12, 13, 2, 15, 0, 0}, torch::kLong).view({2, 4});
  // The reference is the incremental decoder (its own path: a cache, no causal mask), not forward().
  DecoderCache cache = model->start_decoding(model->encode(src));
  std::vector<torch::Tensor> steps;
  for (int64_t t = 0; t < tgt.size(1); ++t) steps.push_back(model->decode_step(tgt.select(1, t), cache));  // [2, 50]
  const torch::Tensor reference = torch::stack(steps, 1);                                                  // [2, 4, 50]
  // Every real position, and an irregular selection (row-major order of the selected rows).
  const torch::Tensor real = tgt.ne(0);  // [2, 4]
  const torch::Tensor some = torch::tensor({0, 1, 0, 1, 1, 0, 0, 0}, torch::kBool).view({2, 4});
  for (const auto& positions : {real, some}) {
    const torch::Tensor got = model->logits_at(src, tgt, positions);  // [n, 50]
    ASSERT_EQ(got.size(0), positions.sum().item<int64_t>());
    EXPECT_TRUE(torch::allclose(got, reference.index({positions}), 1e-4, 1e-5))
        << (got - reference.index({positions})).abs().max().item<float>();
  }
  // Causality: a later target token changes no earlier position's logits; an earlier one changes later ones.
  torch::Tensor later = tgt.clone(), earlier = tgt.clone();
  later[0][3] = 20;
  earlier[0][1] = 20;
  const torch::Tensor base = model->logits_at(src, tgt, real);
  EXPECT_TRUE(torch::allclose(model->logits_at(src, later, real).slice(0, 0, 3), base.slice(0, 0, 3), 1e-5, 1e-6));
  EXPECT_FALSE(torch::allclose(model->logits_at(src, earlier, real).slice(0, 2, 4), base.slice(0, 2, 4), 1e-3, 1e-3));
  EXPECT_THROW(model->logits_at(src, tgt, real.to(torch::kLong)), c10::Error);
}

// LibTorch 2.x runs attention through scaled_dot_product_attention; the whole model (padding, causal and
// cross masks, incremental decoding) must give what the explicit path gives, in the loss and its gradients.
TEST(Transformer, SdpaModelEqualsTheExplicitPathForwardAndBackward) {
  if (!sdpa_available()) GTEST_SKIP() << "this LibTorch has no scaled_dot_product_attention (< 2.0)";
  const torch::Tensor src = torch::tensor({5, 6, 7, 8, 3, 9, 10, 3, 0, 0}, torch::kLong).view({2, 5});
  const torch::Tensor tgt = torch::tensor({2, 11, 12, 13, 14, 2, 15, 16, 0, 0}, torch::kLong).view({2, 5});
  std::vector<torch::Tensor> logits, grads;
  for (const bool sdpa : {true, false}) {
    torch::manual_seed(12);
    Transformer model(small(true, false, true).use_sdpa(sdpa));
    model->train();                                      // dropout is 0 by default: training mode without randomness
    const torch::Tensor out = model->forward(src, tgt);  // [2, 5, 50]
    out.logsumexp(-1).sum().backward();
    logits.push_back(out.detach());
    std::vector<torch::Tensor> g;
    for (const auto& p : model->parameters()) g.push_back(p.grad().flatten());
    grads.push_back(torch::cat(g));  // every parameter's gradient
    model->eval();
    torch::NoGradGuard no_grad;
    DecoderCache cache = model->start_decoding(model->encode(src));
    for (int64_t t = 0; t < 3; ++t) logits.push_back(model->decode_step(tgt.select(1, t), cache));  // [2, 50]
  }
  const size_t half = logits.size() / 2;
  for (size_t i = 0; i < half; ++i)
    EXPECT_TRUE(torch::allclose(logits[i], logits[half + i], 1e-5, 1e-5))
        << "output " << i << " max diff " << (logits[i] - logits[half + i]).abs().max().item<float>();
  EXPECT_TRUE(torch::allclose(grads[0], grads[1], 1e-4, 1e-5))
      << "max diff " << (grads[0] - grads[1]).abs().max().item<float>();
}

// At CPU inference a source's encoding is bit-identical alone and in a padded batch: the attention runs the fused
// per-query loop (masked keys add exact zeros) and the Linear layers mtx's packed kernel (each row alone), where
// LibTorch's batched GEMMs and SDPA would change their blocking with the padded length (int8 layers then magnify
// the difference into other translations).
TEST(Transformer, EncodingIsBitIdenticalAloneAndInAPaddedBatch) {
  if (!fp32::PackedLinear::available()) GTEST_SKIP() << "mtx's float kernel needs AVX-512 (row-independent Linear)";
  Transformer model = packed_for_inference(9);
  torch::NoGradGuard no_grad;
  const torch::Tensor alone = torch::tensor({{5, 6, 7, 8, 3}}, torch::kLong);  // [1, 5]
  torch::Tensor batch = torch::zeros({2, 48}, torch::kLong);                   // [2, 48]: pad 0
  batch[0].narrow(0, 0, 5).copy_(alone[0]);
  batch[1].copy_(torch::randint(4, 50, {48}));
  const Memory one = model->encode(alone);   // [1, 5, 64]
  const Memory both = model->encode(batch);  // [2, 48, 64]
  const torch::Tensor a = one.states[0], b = both.states[0].narrow(0, 0, 5);
  EXPECT_TRUE(torch::equal(a, b)) << "max diff " << (a - b).abs().max().item<float>();
}

// At CPU inference a batch of mixed lengths is encoded in chunks of like lengths (the server's requests come in
// any order): each row still gets exactly the states it gets alone, the mask is the whole batch's, and a short
// row's positions past its chunk are zeros -- its layers did not run on the long rows' padding.
TEST(Transformer, MixedLengthsAreEncodedInChunksEachRowAsAlone) {
  if (!fp32::PackedLinear::available()) GTEST_SKIP() << "mtx's float kernel needs AVX-512 (row-independent Linear)";
  Transformer model = packed_for_inference(11);
  torch::NoGradGuard no_grad;
  const std::vector<int64_t> lengths = {3, 40, 5, 2, 38, 20, 4};
  const int64_t s = 40;
  torch::Tensor batch = torch::zeros({int64_t(lengths.size()), s}, torch::kLong);  // pad 0
  std::vector<torch::Tensor> rows;
  for (size_t i = 0; i < lengths.size(); ++i) {
    rows.push_back(torch::randint(4, 50, {1, lengths[i]}, torch::kLong));
    batch[int64_t(i)].narrow(0, 0, lengths[i]).copy_(rows.back()[0]);
  }
  const Memory all = model->encode(batch);  // [7, 40, 64]
  ASSERT_EQ(all.states.sizes(), (std::vector<int64_t>{int64_t(lengths.size()), s, 64}));
  EXPECT_TRUE(torch::equal(all.mask, key_padding_mask(batch, 0)));
  for (size_t i = 0; i < lengths.size(); ++i) {
    const Memory one = model->encode(rows[i]);  // [1, len, 64]
    const torch::Tensor got = all.states[int64_t(i)].narrow(0, 0, lengths[i]);
    EXPECT_TRUE(torch::equal(one.states[0], got))
        << "row " << i << ": max diff " << (one.states[0] - got).abs().max().item<float>();
  }
  for (const size_t i : {0, 2, 3, 6}) {  // the short rows: one chunk of at most 5 positions
    EXPECT_TRUE(torch::equal(all.states[int64_t(i)].narrow(0, 5, s - 5), torch::zeros({s - 5, 64})))
        << "row " << i << " ran on the long rows' padding";
  }
}

// attention_maps reads the kept weights of one pass over the whole batch: the encoder does not cut a batch of
// mixed lengths into chunks then, and the maps are batch row 0's, over every source position.
TEST(Transformer, AttentionMapsOfABatchAreRowZerosWholePass) {
  if (!fp32::PackedLinear::available()) GTEST_SKIP() << "mtx's float kernel needs AVX-512 (row-independent Linear)";
  Transformer model = packed_for_inference(12);
  torch::Tensor src = torch::zeros({2, 40}, torch::kLong);  // row 0: 40 tokens; row 1: 2 (a chunk of its own)
  src[0].copy_(torch::randint(4, 50, {40}));
  src[1].narrow(0, 0, 2).copy_(torch::randint(4, 50, {2}));
  const torch::Tensor tgt = torch::randint(4, 50, {2, 5});
  const AttentionMaps both = model->attention_maps(src, tgt);
  const AttentionMaps alone = model->attention_maps(src.narrow(0, 0, 1), tgt.narrow(0, 0, 1));
  ASSERT_EQ(both.encoder_self.size(), alone.encoder_self.size());
  for (size_t l = 0; l < both.encoder_self.size(); ++l) {
    ASSERT_EQ(both.encoder_self[l].sizes(), alone.encoder_self[l].sizes()) << "layer " << l;
    EXPECT_TRUE(torch::allclose(both.encoder_self[l], alone.encoder_self[l], 1e-5, 1e-6)) << "layer " << l;
  }
}

// clone() (Cloneable, as LibTorch's modules are): the same parameters and buffers under the same names, its own
// copies of them, the same submodule types (mtx's Linear included), the same output -- for every arrangement.
TEST(Transformer, CloneIsAnEqualIndependentCopy) {
  struct Case {
    const char* name;
    TransformerOptions options;
  };
  const std::vector<Case> cases = {
      {"post-norm, separate embeddings", small(false, false, false)},
      {"pre-norm, shared embeddings, tied", small(true, false, true)},
      {"pre-norm, learned positions, gelu, untied",
       small(true, true, false).activation(config::Activation::gelu).tie_output(false)},
      {"post-norm, shared embeddings, untied", small(false, false, true).tie_output(false)},
      {"decoder-only", small(false, true, false).decoder_only(true).tie_output(false)},
      {"decoder-only, pre-norm, tied", small(true, false, false).decoder_only(true)},
  };
  const torch::Tensor src = torch::tensor({5, 6, 7, 8, 3, 9, 10, 3, 0, 0}, torch::kLong).view({2, 5});
  const torch::Tensor tgt = torch::tensor({2, 11, 12, 13, 2, 15, 0, 0}, torch::kLong).view({2, 4});
  const torch::Tensor all = torch::ones({2, 4}, torch::kBool);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    torch::manual_seed(5);
    Transformer model(c.options);
    model->eval();
    torch::manual_seed(6);
    const torch::Tensor next_draw = torch::rand({4}, torch::kDouble);
    torch::manual_seed(6);
    Transformer copy(std::dynamic_pointer_cast<TransformerImpl>(model->clone()));
    ASSERT_TRUE(copy);
    EXPECT_TRUE(torch::equal(torch::rand({4}, torch::kDouble), next_draw)) << "clone() leaves the generator as it was";
    EXPECT_EQ(differing(copy->options, model->options), std::vector<std::string>{});
    EXPECT_FALSE(copy->is_training());
    expect_equal_state(*copy, *model);
    const auto mine = copy->named_modules(), theirs = model->named_modules();
    ASSERT_EQ(mine.keys(), theirs.keys());
    for (const auto& item : mine) {
      const auto& original = *theirs[item.key()];
      EXPECT_EQ(typeid(*item.value()), typeid(original)) << item.key();
      EXPECT_NE(item.value().get(), &original) << item.key();
    }
    if (c.options.share_embeddings() && !c.options.decoder_only()) {
      EXPECT_EQ(copy->src_embed.get(), copy->tgt_embed.get()) << "the copy's embeddings are still one";
    }
    {
      torch::NoGradGuard no_grad;
      const torch::Tensor got =
          c.options.decoder_only() ? copy->logits_at(torch::Tensor(), tgt, all) : copy->forward(src, tgt);
      const torch::Tensor want =
          c.options.decoder_only() ? model->logits_at(torch::Tensor(), tgt, all) : model->forward(src, tgt);
      EXPECT_TRUE(torch::equal(got, want)) << (got - want).abs().max().item<float>();
      // Independent: changing every tensor of the copy leaves the original's.
      for (auto& p : copy->parameters()) p.add_(1);
      for (auto& b : copy->buffers()) b.add_(1);
    }
    const auto before = model->named_parameters(), after = copy->named_parameters();
    for (const auto& item : before) EXPECT_FALSE(torch::equal(item.value(), after[item.key()])) << item.key();
    const auto before_buffers = model->named_buffers(), after_buffers = copy->named_buffers();
    for (const auto& item : before_buffers) {
      EXPECT_FALSE(torch::equal(item.value(), after_buffers[item.key()])) << item.key();
    }
  }
}

TEST(Transformer, ResetBuildsANewModelNotOverABuiltOne) {
  torch::manual_seed(4);
  Transformer model(small(false, false, true));
  torch::manual_seed(4);
  Transformer same(small(false, false, true));
  expect_equal_state(*model, *same);
  EXPECT_THROW(model->reset(), c10::Error);
  expect_equal_state(*model, *same);
  model->eval();
  same->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor src = torch::tensor({{5, 6, 7, 3}}, torch::kLong), tgt = torch::tensor({{2, 8, 9}}, torch::kLong);
  EXPECT_TRUE(torch::equal(model->forward(src, tgt), same->forward(src, tgt))) << "the refused reset() left it whole";
}

TEST(Transformer, CloneOfAFloatLinearIsOursAndAnInt8ModelRefusesIt) {
  torch::manual_seed(2);
  Linear linear(8, 6);
  const auto copy = std::dynamic_pointer_cast<LinearImpl>(linear->clone());
  ASSERT_TRUE(copy) << "clone() gives an mtx::model::Linear";
  EXPECT_TRUE(torch::equal(copy->weight, linear->weight));
  EXPECT_TRUE(torch::equal(copy->bias, linear->bias));
  EXPECT_NE(copy->weight.data_ptr(), linear->weight.data_ptr());
  EXPECT_EQ(copy->named_parameters().keys(), linear->named_parameters().keys());
  if (mtx::model::int8::engine().empty()) GTEST_SKIP() << "this LibTorch has no quantized CPU engine";
  Transformer model(small(false, false, true));
  model->eval();
  model->quantize_int8(true);
  EXPECT_THROW(model->clone(), c10::Error);
  EXPECT_THROW(model->encoder[0]->as<EncoderLayer>()->ffn->fc1->clone(), c10::Error);
}

TEST(Transformer, PrettyPrintNamesEveryOptionAndTheLayers) {
  Transformer model(small(true, false, true));
  std::ostringstream text;
  text << *model;
  const std::string s = text.str();
  EXPECT_NE(s.find("mtx::model::Transformer(src_vocab=50, tgt_vocab=50, d_model=32, heads=4, encoder_layers=2, "
                   "decoder_layers=2, ffn_dim=64, dropout=0.1"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("pre_norm=true"), std::string::npos) << s;
  EXPECT_NE(s.find("share_embeddings=true"), std::string::npos) << s;
  for (const char* part : {"mtx::model::EncoderLayer(d_model=32, heads=4, ffn_dim=64", "mtx::model::DecoderLayer(",
                           "mtx::model::SelfAttention(", "mtx::model::CrossAttention(", "mtx::model::FeedForward(",
                           "mtx::model::PositionalEncoding(max_len=32, d_model=32, kind=sinusoidal)"}) {
    EXPECT_NE(s.find(part), std::string::npos) << part << " in\n" << s;
  }
}

// Hugging Face's MarianMT layout: the interleaved table's waves, every sine first, then the cosines (an odd width
// has one sine more), computed in double and rounded once as MarianMT computes its table.
TEST(Transformer, HalvesPositionsHoldTheInterleavedWavesSinesFirst) {
  for (const int64_t d : {32, 33}) {
    PositionalEncoding interleaved(64, d, config::Positions::sinusoidal);
    PositionalEncoding halves(64, d, config::Positions::sinusoidal_halves);
    const int64_t sines = (d + 1) / 2;
    EXPECT_TRUE(torch::allclose(halves->table.narrow(1, 0, sines), interleaved->table.slice(1, 0, d, 2), 0, 2e-5)) << d;
    EXPECT_TRUE(torch::allclose(halves->table.narrow(1, sines, d / 2), interleaved->table.slice(1, 1, d, 2), 0, 2e-5))
        << d;
    // Every entry within half a float step of sin(p / 10000^(2i/d)) and its cosine.
    double worst = 0;
    for (int64_t p = 0; p < 64; ++p) {
      for (int64_t i = 0; i < sines; ++i) {
        const double angle = double(p) / std::pow(10000.0, double(2 * i) / double(d));
        worst = std::max(worst, std::abs(halves->table[p][i].item<double>() - std::sin(angle)));
        if (i < d / 2) worst = std::max(worst, std::abs(halves->table[p][sines + i].item<double>() - std::cos(angle)));
      }
    }
    EXPECT_LE(worst, 6e-8) << d;
  }
  EXPECT_FALSE(torch::equal(PositionalEncoding(16, 32, config::Positions::sinusoidal_halves)->table,
                            PositionalEncoding(16, 32, config::Positions::sinusoidal)->table));
}

// Each activation of the feed-forward block is its formula: relu, gelu (erf), swish x sigmoid(x), and Marian's
// gelu x sigmoid(1.702 x).
TEST(Transformer, FeedForwardActivationsAreTheirFormulas) {
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({2, 3, 8});  // [b, t, d]
  const std::vector<std::pair<config::Activation, std::function<torch::Tensor(const torch::Tensor&)>>> cases = {
      {config::Activation::relu, [](const torch::Tensor& h) { return h.clamp_min(0); }},
      {config::Activation::gelu, [](const torch::Tensor& h) { return 0.5 * h * (1 + torch::erf(h / std::sqrt(2.0))); }},
      {config::Activation::swish, [](const torch::Tensor& h) { return h / (1 + torch::exp(-h)); }},
      {config::Activation::gelu_sigmoid, [](const torch::Tensor& h) { return h / (1 + torch::exp(-1.702 * h)); }}};
  std::vector<torch::Tensor> outputs;
  for (const auto& [activation, formula] : cases) {
    torch::manual_seed(6);
    FeedForward ffn(LayerOptions(8, 2, 16).activation(activation));
    ffn->eval();
    torch::NoGradGuard no_grad;
    const torch::Tensor want = ffn->fc2->forward(formula(ffn->fc1->forward(x)));  // [b, t, d]
    const torch::Tensor got = ffn->forward(x);                                    // [b, t, d]
    EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-6))
        << config::to_string(activation) << ": max diff " << (got - want).abs().max().item<float>();
    for (const auto& other : outputs) EXPECT_FALSE(torch::allclose(got, other)) << config::to_string(activation);
    outputs.push_back(got);
  }
}

// Without gradients the layers add their residuals into the sublayers' fresh outputs: the same numbers as the
// sublayers composed with x + y, bit for bit, and the layer's input untouched, pre- and post-norm.
TEST(Transformer, InferenceResidualsInPlaceGiveTheSameNumbers) {
  for (const bool pre : {true, false}) {
    torch::manual_seed(9);
    EncoderLayer enc(LayerOptions(16, 4, 32).pre_norm(pre));
    DecoderLayer dec(LayerOptions(16, 4, 32).pre_norm(pre));
    enc->eval();
    dec->eval();
    torch::NoGradGuard no_grad;
    const torch::Tensor x = torch::randn({2, 5, 16});       // [b, t, d]
    const torch::Tensor memory = torch::randn({2, 7, 16});  // [b, s, d]
    const torch::Tensor none;
    const torch::Tensor x_before = x.clone();
    const SelfKV kv = dec->cross_attn->project_memory(memory);
    torch::Tensor enc_want, dec_want;  // [b, t, d]
    if (pre) {
      const torch::Tensor h = x + enc->self_attn->forward(enc->norm1->forward(x), none);
      enc_want = h + enc->ffn->forward(enc->norm2->forward(h));
      torch::Tensor g = x + dec->self_attn->forward(dec->norm1->forward(x), none);
      g = g + dec->cross_attn->forward(dec->norm2->forward(g), kv, none);
      dec_want = g + dec->ffn->forward(dec->norm3->forward(g));
    } else {
      const torch::Tensor h = enc->norm1->forward(x + enc->self_attn->forward(x, none));
      enc_want = enc->norm2->forward(h + enc->ffn->forward(h));
      torch::Tensor g = dec->norm1->forward(x + dec->self_attn->forward(x, none));
      g = dec->norm2->forward(g + dec->cross_attn->forward(g, kv, none));
      dec_want = dec->norm3->forward(g + dec->ffn->forward(g));
    }
    EXPECT_TRUE(torch::equal(enc->forward(x, none), enc_want)) << "encoder, pre-norm " << pre;
    EXPECT_TRUE(torch::equal(dec->forward(x, none, kv, none), dec_want)) << "decoder, pre-norm " << pre;
    EXPECT_TRUE(torch::equal(x, x_before)) << "the input is not written, pre-norm " << pre;
  }
}

// MarianMT's final_logits_bias: a tied output projection with output_bias gets a [vocab] bias, zero at first,
// trained with the rest and added on every inference path (LibTorch's linear, the packed float kernel, int8).
TEST(Transformer, TiedOutputBiasIsTrainedAndAddedOnEveryPath) {
  torch::manual_seed(9);
  Transformer plain(small(false, false, true));
  EXPECT_FALSE(plain->named_parameters().contains("output_bias"));
  Transformer model(small(false, false, true).output_bias(true));
  ASSERT_TRUE(model->named_parameters().contains("output_bias"));
  EXPECT_TRUE(torch::equal(model->output_bias, torch::zeros({50})));
  const torch::Tensor src = torch::tensor({5, 6, 7, 3}, torch::kLong).view({1, 4});
  const torch::Tensor tgt = torch::tensor({2, 11, 12}, torch::kLong).view({1, 3});
  model->forward(src, tgt).logsumexp(-1).sum().backward();
  ASSERT_TRUE(model->output_bias.grad().defined());
  EXPECT_GT(model->output_bias.grad().abs().sum().item<double>(), 0.0);

  torch::NoGradGuard no_grad;
  model->output_bias.copy_(torch::randn({50}) * 3);
  model->eval();
  const torch::Tensor h = torch::randn({7, 32});                                                              // [n, d]
  const torch::Tensor want = torch::nn::functional::linear(h, model->tgt_embed->weight, model->output_bias);  // [n, v]
  EXPECT_TRUE(torch::allclose(model->project(h), want, 1e-5, 1e-5));
  model->pack_fp32();
  EXPECT_TRUE(torch::allclose(model->project(h), want, 1e-4, 1e-5)) << "the packed float kernel";
  const int8::Weight q = int8::quantize(model->tgt_embed->weight);
  model->quantize_int8(/*include_output=*/true);
  const torch::Tensor ref = torch::nn::functional::linear(h, int8::dequantize(q), model->output_bias);  // [n, v]
  const torch::Tensor got = model->project(h);                                                          // [n, v]
  EXPECT_LT(((got - ref).norm() / (ref - model->output_bias).norm()).item<double>(), 0.05) << "int8";
  EXPECT_GT((got - (ref - model->output_bias)).abs().max().item<double>(), 0.5) << "int8 adds the bias";
}
