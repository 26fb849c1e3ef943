// The fused attention's vector loops at CPU inference, one translation unit per instruction set (private to
// src/model): the same plain loops, compiled for each level, so that they vectorise to its width. Each lane sums
// in a fixed order and nothing is contracted into fused multiply-adds: a result depends on the data alone. No
// LibTorch.
#pragma once

#include <cstdint>

namespace mtx::model::kernels {

struct AttentionLoops {
  // One query over T keys: s_t = q . k_t (in 8 lanes, summed in a fixed order) * scale (keys with mask[t] false, where
  // mask is given, take no part), w_t = e^(s_t - max s) / sum of them, out = sum over t of w_t * v_t in key order
  // (zeros when every key is masked). k_t = k + t * k_stride, v_t likewise; scratch holds T floats, and on return
  // the unnormalised weights e^(s_t - max s) (0 for masked keys; -inf everywhere when every key is masked).
  void (*query)(const float* q, const float* k, int64_t k_stride, const float* v, int64_t v_stride, const bool* mask,
                int64_t T, int64_t D, float scale, float* scratch, float* out);
};

AttentionLoops attention_loops_generic();
#if defined(__x86_64__)
AttentionLoops attention_loops_avx2();
AttentionLoops attention_loops_avx512();
#endif

}  // namespace mtx::model::kernels
