#include "mtx/model/attention.h"
#include "mtx/model/param_names.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/attention_kernels.h"
#include "mtx/model/dropout.h"
#include "mtx/model/masks.h"
#include "mtx/model/matmul.h"
#include "mtx/util/cpu_isa.h"

namespace mtx::model {
namespace {

// [b, t, d] -> [b, h, t, d/h]
torch::Tensor split_heads(const torch::Tensor& x, int64_t heads) {
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2);
  return x.view({b, t, heads, d / heads}).transpose(1, 2);
}

// [b, h, t, hd] -> [b, t, h*hd]
torch::Tensor merge_heads(const torch::Tensor& x) {
  const int64_t b = x.size(0), h = x.size(1), t = x.size(2), hd = x.size(3);
  return x.transpose(1, 2).reshape({b, t, h * hd});
}

// The vector loops for the level the kernels run at (util/cpu_isa.h).
kernels::AttentionLoops attention_loops() {
#if defined(__x86_64__)
  if (cpu::isa() >= cpu::Isa::avx512) return kernels::attention_loops_avx512();
  if (cpu::isa() >= cpu::Isa::avx2) return kernels::attention_loops_avx2();
#endif
  return kernels::attention_loops_generic();
}

// A [b, h, t, hd] operand by element strides (hd contiguous).
struct Strided {
  const float* p;
  int64_t row, head, pos;
};

// Attention at CPU inference, per (row, head, query): scores, mask, softmax and the weighted sum of values in
// one pass over the keys, in parallel over them, without the temporaries of the tensor-op formulation -- the
// incremental decoder's one query per row over its cache, and the encoder's queries over a padded source.
// q [B, H, Q, D], k/v [key rows, H, T, D]; mask [mask_rows, T] (key padding: 1 row for all, or one per key row)
// or null; rows [B] (or null: row i): the key row query row i reads (beams sharing their sentence's encoder
// memory); out [B, Q, H, D]. Each query is computed by one thread in a fixed order over the keys, masked keys
// adding exact zeros: the result depends neither on the batch (nor its padding) nor on the thread count -- which
// LibTorch's batched GEMMs and SDPA do not promise (a padded length changes their blocking), and int8 layers
// would magnify.
void attend_cpu(const Strided& q, const Strided& k, const Strided& v, int64_t B, int64_t H, int64_t Q, int64_t T,
                int64_t D, const bool* mp, int64_t mask_rows, const int64_t* rp, float* op, float* wp = nullptr) {
  const float scale = float(1.0 / std::sqrt(double(D)));
  // A thread takes at least ~2^15 key-dimension products: one sentence's few queries over a short cache stay on
  // one thread.
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(1, T * D));
  const kernels::AttentionLoops loops = attention_loops();
  // Per mask row, the keys from its first to its last unmasked one: the masked keys around them would only add
  // exact zeros, so the loop skips them (padded sources, rows that joined a running decode later).
  thread_local std::vector<int64_t> first, last;
  first.assign(size_t(std::max<int64_t>(mask_rows, 1)), 0);
  last.assign(first.size(), T);
  for (int64_t r = 0; r < mask_rows; ++r) {
    const bool* m = mp + r * T;
    int64_t lo = 0, hi = T;
    while (lo < T && !m[lo]) ++lo;
    while (hi > lo && !m[hi - 1]) --hi;
    first[size_t(r)] = lo;
    last[size_t(r)] = hi;
  }
  const int64_t* fp = first.data();
  const int64_t* lp = last.data();
  at::parallel_for(0, B * H * Q, grain, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> w;
    if (w.size() < size_t(T)) w.resize(size_t(T));
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / (H * Q), h = i / Q % H, j = i % Q, kb = rp ? rp[b] : b;
      const float* qi = q.p + b * q.row + h * q.head + j * q.pos;
      const int64_t mr = mp && mask_rows > 1 ? kb : 0;
      const int64_t lo = fp[mr], n = lp[mr] - lo;
      const bool* mi = mp ? mp + mr * T + lo : nullptr;
      loops.query(qi, k.p + kb * k.row + h * k.head + lo * k.pos, k.pos, v.p + kb * v.row + h * v.head + lo * v.pos,
                  v.pos, mi, n, D, scale, w.data(), op + ((b * Q + j) * H + h) * D);
      if (wp) {  // the weights themselves, [B, H, Q, T]: the loop left them unnormalised in w
        float* wi = wp + ((b * H + h) * Q + j) * T;
        double sum = 0;
        for (int64_t t = 0; t < n; ++t) sum += w[size_t(t)] > 0 ? double(w[size_t(t)]) : 0.0;
        for (int64_t t = 0; t < T; ++t) wi[t] = 0.0f;
        for (int64_t t = 0; t < n && sum > 0; ++t) {
          wi[lo + t] = w[size_t(t)] > 0 ? float(double(w[size_t(t)]) / sum) : 0.0f;
        }
      }
    }
  });
}

// The mask of decode attention as [mask rows, T] bools (undefined stays undefined).
torch::Tensor key_mask_rows(const torch::Tensor& mask_in, int64_t T) {
  if (!mask_in.defined()) return {};
  TORCH_CHECK(mask_in.scalar_type() == torch::kBool && mask_in.size(-1) == T && mask_in.numel() % T == 0 &&
                  (mask_in.numel() / T == 1 || mask_in.numel() / T == mask_in.size(0)),
              "decode attention: mask ", mask_in.sizes(), " is not a key padding mask for ", T, " keys");
  return mask_in.is_contiguous() ? mask_in : mask_in.reshape({mask_in.size(0), T}).contiguous();
}

Strided strided(const torch::Tensor& t) { return {t.data_ptr<float>(), t.stride(0), t.stride(1), t.stride(2)}; }

// decode attention's key rows: [b] int64 (undefined: row i), checked against k's rows.
torch::Tensor key_rows(const torch::Tensor& kv_rows, int64_t B, int64_t rows0) {
  const torch::Tensor rows = kv_rows.defined() ? kv_rows.to(torch::kLong).contiguous() : torch::Tensor();  // [b]
  const int64_t* rp = rows.defined() ? rows.data_ptr<int64_t>() : nullptr;
  TORCH_CHECK(!rp || rows.numel() == B, "decode attention: ", rows.numel(), " key rows for ", B, " queries");
  for (int64_t i = 0; rp && i < B; ++i) {
    TORCH_CHECK(rp[i] >= 0 && rp[i] < rows0, "decode attention: key row ", rp[i], " of ", rows0);
  }
  TORCH_CHECK(rp || rows0 == B, "decode attention: ", rows0, " key rows for ", B, " queries");
  return rows;
}

// attend_cpu on tensors: q [b, h, tq, hd], k/v [b, h, tk, hd] (any strides, hd contiguous), mask bool [b|1, 1, 1,
// tk] (key padding) or undefined -> [b, h, tq, hd]. kv_rows [b] int64 (or undefined: row i).
torch::Tensor decode_attention_cpu(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& v_in,
                                   const torch::Tensor& mask_in, const torch::Tensor& kv_rows = torch::Tensor()) {
  const torch::Tensor q = q_in.stride(3) == 1 ? q_in : q_in.contiguous();
  const torch::Tensor k = k_in.stride(3) == 1 ? k_in : k_in.contiguous();
  const torch::Tensor v = v_in.stride(3) == 1 ? v_in : v_in.contiguous();
  const int64_t B = q.size(0), H = q.size(1), Q = q.size(2), T = k.size(2), D = q.size(3);
  const torch::Tensor rows = key_rows(kv_rows, B, k.size(0));
  const torch::Tensor mask = key_mask_rows(mask_in, T);
  torch::Tensor out = torch::empty({B, Q, H, D}, q.options());  // [b, tq, h, hd]: merge_heads is then a view
  attend_cpu(strided(q), strided(k), strided(v), B, H, Q, T, D, mask.defined() ? mask.data_ptr<bool>() : nullptr,
             mask.defined() ? mask.numel() / T : 0, rows.defined() ? rows.data_ptr<int64_t>() : nullptr,
             out.data_ptr<float>());
  return out.transpose(1, 2);  // [b, h, tq, hd]
}

// The CPU float path of append_rows below: the step's rows and heads at element strides s_row, s_head (hd
// contiguous), b rows.
torch::Tensor append_rows_cpu(const torch::Tensor& cache, const torch::Tensor& rows, const float* sp, int64_t s_row,
                              int64_t s_head, int64_t b, int64_t skip, const std::vector<int64_t>& starts,
                              bool unread_prefix) {
  TORCH_CHECK(skip >= 0 && skip <= cache.size(2), "append_rows: skip ", skip, " of ", cache.size(2));
  const int64_t h = cache.size(1), t0 = cache.size(2), t = t0 - skip, d = cache.size(3);
  const torch::Tensor r = rows.defined() ? rows.to(torch::kLong).contiguous() : torch::Tensor();
  torch::Tensor out = torch::empty({b, h, t + 1, d}, cache.options());  // [b, h, t + 1, hd]
  const float* cp = cache.data_ptr<float>();
  const int64_t* rp = r.defined() ? r.data_ptr<int64_t>() : nullptr;
  float* op = out.data_ptr<float>();
  const int64_t rows0 = cache.size(0);
  for (int64_t i = 0; rp && i < b; ++i) {
    TORCH_CHECK(rp[i] >= -1 && rp[i] < rows0, "append_rows: row ", rp[i], " of a cache of ", rows0);
  }
  TORCH_CHECK(rp || b <= rows0, "append_rows: ", b, " rows for a cache of ", rows0);
  TORCH_CHECK(starts.empty() || int64_t(starts.size()) == b, "append_rows: ", starts.size(), " starts for ", b,
              " rows");
  at::parallel_for(0, b * h, std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(1, t * d)),  // >= 64 KB
                   [&](int64_t begin, int64_t end) {
                     for (int64_t i = begin; i < end; ++i) {
                       const int64_t row = i / h, head = i % h;
                       const int64_t from = rp ? rp[row] : row;
                       const int64_t first = from < 0 ? t : starts.empty() ? 0 : std::min(starts[size_t(row)], t);
                       float* o = op + i * (t + 1) * d;
                       if (!unread_prefix) std::memset(o, 0, size_t(first * d) * sizeof(float));
                       if (first < t) {
                         std::memcpy(o + first * d, cp + ((from * h + head) * t0 + skip + first) * d,
                                     size_t((t - first) * d) * sizeof(float));
                       }
                       std::memcpy(o + t * d, sp + row * s_row + head * s_head, size_t(d) * sizeof(float));
                     }
                   });
  return out;
}

// cat({cache[:, :, skip:].index_select(0, rows), step}, 2) for a cache [b0, h, t, hd], rows [b] (or undefined:
// row i; -1: a row of zeros) and a step [b, h, 1, hd]; on the CPU one parallel gathering copy, without the
// intermediate. `starts` (empty, or one per row): a row's positions before its start are masked; on the CPU's
// path they are not written when `unread_prefix` (the caller's attention is the fused loop, which never reads
// them), and zeros otherwise (as on every other path).
torch::Tensor append_rows(const torch::Tensor& cache_in, const torch::Tensor& rows, const torch::Tensor& step,
                          int64_t skip, const std::vector<int64_t>& starts, bool unread_prefix) {
  if (!cache_in.device().is_cpu() || cache_in.scalar_type() != torch::kFloat || step.size(2) != 1 ||
      !cache_in.is_contiguous()) {
    TORCH_CHECK(skip >= 0 && skip <= cache_in.size(2), "append_rows: skip ", skip, " of ", cache_in.size(2));
    const torch::Tensor cache = cache_in.narrow(2, skip, cache_in.size(2) - skip);  // [b0, h, t - skip, hd]
    if (!rows.defined()) return torch::cat({cache, step}, 2);
    // Rows -1 read an extra row of zeros.
    const torch::Tensor zeros = torch::zeros_like(cache.narrow(0, 0, 1));  // [1, h, t - skip, hd]
    const torch::Tensor r = torch::where(rows < 0, torch::full_like(rows, cache.size(0)), rows);
    return torch::cat({torch::cat({cache, zeros}, 0).index_select(0, r), step}, 2);
  }
  const torch::Tensor s = step.stride(3) == 1 && step.scalar_type() == torch::kFloat ? step : step.contiguous();
  return append_rows_cpu(cache_in, rows, s.data_ptr<float>(), s.stride(0), s.stride(1), s.size(0), skip, starts,
                         unread_prefix);
}

}  // namespace

void SelfKV::reorder(const torch::Tensor& indices, int64_t rows, const torch::Tensor& fresh) {
  if (!k.defined()) return;  // nothing cached before the first step
  if (fresh.defined() && fresh.numel() > 0) {
    TORCH_CHECK(rows >= 0, "SelfKV::reorder: joined rows need the state's row count");
    const torch::Tensor base =
        pending_rows.defined() ? pending_rows : torch::arange(rows, indices.options().dtype(torch::kLong));  // [rows]
    pending_rows = torch::cat({base, fresh.to(base.device())}).index_select(0, indices);  // [new_rows]
    return;
  }
  pending_rows = pending_rows.defined() ? pending_rows.index_select(0, indices) : indices;
}

bool sdpa_available() {
#if TORCH_VERSION_MAJOR >= 2
  return true;
#else
  return false;
#endif
}

namespace {
// No mask, or a key padding mask: bool [b|1, 1, 1, tk].
bool key_padding(const torch::Tensor& mask) {
  return !mask.defined() || (mask.scalar_type() == torch::kBool && mask.size(-2) == 1 &&
                             (mask.numel() == mask.size(-1) || mask.numel() == mask.size(0) * mask.size(-1)));
}

// On the CPU in float, no dropout, no weights kept, no gradient, and one query per row or a key padding mask (not a
// causal one): the fused loop applies.
bool fused_decode(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double p,
                  const torch::Tensor* weights_out, const torch::Tensor& mask = torch::Tensor()) {
  return (q.size(-2) == 1 || key_padding(mask)) && (!mask.defined() || mask.scalar_type() == torch::kBool) &&
         q.device().is_cpu() && q.scalar_type() == torch::kFloat && k.scalar_type() == torch::kFloat &&
         v.scalar_type() == torch::kFloat && p == 0 && !weights_out &&
         !(torch::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad()));
}

// One decoding step's x [b, 1, d] at CPU float inference without gradients, dropout or kept weights, over float
// keys and values (undefined: none cached yet) with hd contiguous and a key padding mask: the step paths that read
// q, k and v in place apply.
bool lean_step(const torch::Tensor& x, const torch::Tensor& k, const torch::Tensor& v, double p, bool keep,
               const torch::Tensor& mask) {
  const auto float_cpu = [](const torch::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.stride(-1) == 1;
  };
  return x.dim() == 3 && x.size(1) == 1 && p == 0 && !keep && !torch::GradMode::is_enabled() && float_cpu(x) &&
         (!k.defined() || (float_cpu(k) && float_cpu(v))) && key_padding(mask);
}
}  // namespace

torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& mask, double dropout_p, bool training, bool use_sdpa,
                        torch::Tensor* weights_out) {
  const double p = training ? dropout_p : 0.0;
  if (fused_decode(q, k, v, p, weights_out, mask)) return decode_attention_cpu(q, k, v, mask);  // [b, h, tq, hd]
#if TORCH_VERSION_MAJOR >= 2
  if (use_sdpa && !weights_out) {
    return at::scaled_dot_product_attention(q, k, v, mask.defined() ? c10::optional<torch::Tensor>(mask) : c10::nullopt,
                                            p, false);  // [b, h, tq, hd]
  }
#else
  (void)use_sdpa;
#endif
  const double scale = 1.0 / std::sqrt(double(q.size(-1)));
  torch::Tensor scores = batched_matmul(q, k.transpose(-2, -1)) * scale;  // [b, h, tq, tk]
  scores = mask_scores(scores, mask);
  torch::Tensor weights = torch::softmax(scores, -1);  // [b, h, tq, tk]
  if (weights_out) *weights_out = weights.detach();
  if (p > 0) weights = model::dropout(weights, p, true);
  return batched_matmul(weights, v);  // [b, h, tq, hd]
}

SelfAttentionImpl::SelfAttentionImpl(const AttentionOptions& o) : options(o) { reset(); }

void SelfAttentionImpl::reset() {
  const AttentionOptions& o = options;
  TORCH_CHECK(o.d_model() % o.heads() == 0, "d_model ", o.d_model(), " is not divisible by heads ", o.heads());
  weights = torch::Tensor();
  qkv = register_module(names::kQkv, Linear(o.d_model(), 3 * o.d_model()));
  out = register_module(names::kOut, Linear(o.d_model(), o.d_model()));
}

void SelfAttentionImpl::pretty_print(std::ostream& stream) const {
  stream << "mtx::model::SelfAttention(d_model=" << options.d_model() << ", heads=" << options.heads()
         << ", dropout=" << options.dropout() << ")";
}

torch::Tensor SelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& mask, SelfKV* cache) {
  if (cache && lean_step(x, cache->k, cache->v, is_training() ? options.dropout() : 0.0, keep_weights, mask) &&
      (!cache->k.defined() || (cache->k.is_contiguous() && cache->v.is_contiguous()))) {
    return step_cpu(x, mask, *cache);
  }
  const auto parts = qkv->forward(x).chunk(3, -1);           // 3 x [b, t, d]
  torch::Tensor q = split_heads(parts[0], options.heads());  // [b, h, t, hd]
  torch::Tensor k = split_heads(parts[1], options.heads());  // [b, h, t, hd]
  torch::Tensor v = split_heads(parts[2], options.heads());  // [b, h, t, hd]
  if (cache) {
    if (cache->k.defined()) {
      // Where the attention below is the fused loop, which skips a row's masked positions before its first real
      // key, the append need not write them.
      const bool unread_prefix = fused_decode(q, cache->k, cache->v, is_training() ? options.dropout() : 0.0,
                                              keep_weights ? &weights : nullptr, mask);
      k = append_rows(cache->k, cache->pending_rows, k, cache->pending_skip, cache->starts, unread_prefix);
      v = append_rows(cache->v, cache->pending_rows, v, cache->pending_skip, cache->starts, unread_prefix);
    }
    cache->k = k;
    cache->v = v;
    cache->pending_rows = torch::Tensor();
    cache->pending_skip = 0;
  }
  const torch::Tensor y = attention(q, k, v, mask, options.dropout(), is_training(), options.use_sdpa(),
                                    keep_weights ? &weights : nullptr);  // [b, h, t, hd]
  return out->forward(merge_heads(y));                                   // [b, t, d]
}

// One incremental decoding step at CPU float inference: what forward does with a cache, reading q, k and v in place
// in the projection's output (no head split, no copies) -- the same loops, the same numbers.
torch::Tensor SelfAttentionImpl::step_cpu(const torch::Tensor& x, const torch::Tensor& mask, SelfKV& cache) {
  const torch::Tensor qkv_out = qkv->forward(x);  // [b, 1, 3d]
  const int64_t b = x.size(0), d = options.d_model(), H = options.heads(), D = d / H;
  TORCH_CHECK(qkv_out.is_contiguous() && qkv_out.size(-1) == 3 * d, "attention: qkv gave ", qkv_out.sizes());
  const float* base = qkv_out.data_ptr<float>();  // row r: q at r * 3d, k at r * 3d + d, v at r * 3d + 2d
  // The first step appends to an empty cache.
  const torch::Tensor k0 = cache.k.defined() ? cache.k : torch::empty({b, H, 0, D}, x.options());  // [b0, h, t, hd]
  const torch::Tensor v0 = cache.v.defined() ? cache.v : torch::empty({b, H, 0, D}, x.options());
  cache.k = append_rows_cpu(k0, cache.pending_rows, base + d, 3 * d, D, b, cache.pending_skip, cache.starts,
                            /*unread_prefix=*/true);
  cache.v = append_rows_cpu(v0, cache.pending_rows, base + 2 * d, 3 * d, D, b, cache.pending_skip, cache.starts,
                            /*unread_prefix=*/true);
  cache.pending_rows = torch::Tensor();
  cache.pending_skip = 0;
  const int64_t T = cache.k.size(2);
  const torch::Tensor m = key_mask_rows(mask, T);
  TORCH_CHECK(!m.defined() || m.numel() / T == 1 || m.numel() / T == b, "attention: mask ", mask.sizes(), " for ", b,
              " rows");
  torch::Tensor y = torch::empty({b, 1, d}, x.options());  // [b, 1, h * hd]: the heads merged
  attend_cpu(Strided{base, 3 * d, D, 3 * d}, strided(cache.k), strided(cache.v), b, H, 1, T, D,
             m.defined() ? m.data_ptr<bool>() : nullptr, m.defined() ? m.numel() / T : 0, nullptr, y.data_ptr<float>());
  return out->forward(y);  // [b, 1, d]
}

CrossAttentionImpl::CrossAttentionImpl(const AttentionOptions& o) : options(o) { reset(); }

void CrossAttentionImpl::reset() {
  const AttentionOptions& o = options;
  TORCH_CHECK(o.d_model() % o.heads() == 0, "d_model ", o.d_model(), " is not divisible by heads ", o.heads());
  weights = torch::Tensor();
  q = register_module(names::kQ, Linear(o.d_model(), o.d_model()));
  kv = register_module(names::kKv, Linear(o.d_model(), 2 * o.d_model()));
  out = register_module(names::kOut, Linear(o.d_model(), o.d_model()));
}

void CrossAttentionImpl::pretty_print(std::ostream& stream) const {
  stream << "mtx::model::CrossAttention(d_model=" << options.d_model() << ", heads=" << options.heads()
         << ", dropout=" << options.dropout() << ")";
}

SelfKV CrossAttentionImpl::project_memory(const torch::Tensor& memory) {
  const auto parts = kv->forward(memory).chunk(2, -1);  // 2 x [b, s, d]
  return {split_heads(parts[0], options.heads()), split_heads(parts[1], options.heads()),
          torch::Tensor()};  // [b, h, s, hd]
}

torch::Tensor CrossAttentionImpl::forward(const torch::Tensor& x, const SelfKV& memory, const torch::Tensor& mask,
                                          torch::Tensor* weights_out) {
  torch::Tensor* keep = weights_out ? weights_out : keep_weights ? &weights : nullptr;
  const torch::Tensor& rows = memory.pending_rows;  // [b] memory row of each query row, or undefined
  const double p = is_training() ? options.dropout() : 0.0;
  if (rows.defined() && memory.k.defined() && lean_step(x, memory.k, memory.v, p, false, mask)) {
    // One decoding step at CPU float inference: the queries read in place, the heads merged as written (the same
    // loops and numbers as below, without the views); the weights, when kept, come out of the same loop.
    const torch::Tensor qo = q->forward(x);  // [b, 1, d]
    const int64_t b = x.size(0), d = options.d_model(), H = options.heads(), D = d / H, T = memory.k.size(2);
    TORCH_CHECK(qo.is_contiguous() && qo.size(-1) == d, "attention: q gave ", qo.sizes());
    const torch::Tensor r = key_rows(rows, b, memory.k.size(0));
    const torch::Tensor m = key_mask_rows(mask, T);
    torch::Tensor y = torch::empty({b, 1, d}, x.options());  // [b, 1, h * hd]
    if (keep) *keep = torch::empty({b, H, 1, T}, x.options());
    attend_cpu(Strided{qo.data_ptr<float>(), d, D, d}, strided(memory.k), strided(memory.v), b, H, 1, T, D,
               m.defined() ? m.data_ptr<bool>() : nullptr, m.defined() ? m.numel() / T : 0, r.data_ptr<int64_t>(),
               y.data_ptr<float>(), keep ? keep->data_ptr<float>() : nullptr);
    return out->forward(y);  // [b, 1, d]
  }
  const torch::Tensor queries = split_heads(q->forward(x), options.heads());  // [b, h, t, hd]
  // A decoding step's weights are computed beside its output, which stays what it is without them.
  torch::Tensor* beside = rows.defined() ? keep : nullptr;
  torch::Tensor* inside = rows.defined() ? nullptr : keep;
  torch::Tensor y;  // [b, h, t, hd]
  if (rows.defined() && fused_decode(queries, memory.k, memory.v, p, inside, mask)) {
    y = decode_attention_cpu(queries, memory.k, memory.v, mask, rows);
  }
  if (!y.defined() || beside) {
    // Elsewhere the rows' memory is gathered first (undefined rows: row i is row i).
    const torch::Tensor r = rows.defined() ? rows.to(memory.k.device()) : torch::Tensor();
    const auto gather = [&](const torch::Tensor& t) { return r.defined() ? t.index_select(0, r) : t; };
    const torch::Tensor m = mask.defined() && mask.size(0) > 1 ? gather(mask) : mask;  // [b|1, 1, 1, s]
    const torch::Tensor k = gather(memory.k), v = gather(memory.v);
    if (!y.defined()) y = attention(queries, k, v, m, options.dropout(), is_training(), options.use_sdpa(), inside);
    if (beside) {
      torch::Tensor scores = torch::matmul(queries, k.transpose(-2, -1)).div(std::sqrt(double(queries.size(-1))));
      if (m.defined()) scores = scores.masked_fill(m.logical_not(), -std::numeric_limits<float>::infinity());
      *beside = torch::softmax(scores.to(torch::kFloat), -1).nan_to_num(0.0);  // [b, h, t, s]
    }
  }
  return out->forward(merge_heads(y));  // [b, t, d]
}

}  // namespace mtx::model
