// The packed float GEMM's kernels, one translation unit per instruction set (private to src/model). Weights are
// packed in panels of 32 outputs, [in, 32] each, zero-padded past `out`; bias is padded alike. No LibTorch.
#pragma once

#include <cstdint>

namespace mtx::model::fp32::kernels {

constexpr int64_t kPanel = 32;  // outputs per panel

// y[rows, out] = x[rows, in] x W^T + bias over the panels [p_begin, p_end): each output is one fma chain over k
// in order from 0, then + bias -- fp32::reference_linear's numbers, bit for bit, at every level.
void gemm_panels_avx2(const float* x, int64_t rows, int64_t in, const float* packed, int64_t p_begin, int64_t p_end,
                      const float* bias, float* y, int64_t out);
void gemm_panels_avx512(const float* x, int64_t rows, int64_t in, const float* packed, int64_t p_begin, int64_t p_end,
                        const float* bias, float* y, int64_t out);

}  // namespace mtx::model::fp32::kernels
