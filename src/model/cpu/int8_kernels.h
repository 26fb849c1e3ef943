// The int8 GEMM's kernels without VNNI, one translation unit per instruction set (private to src/model). The
// weights are packed as for the VNNI kernel: panels of 32 outputs, in groups of 4 inputs per output, at
// p * groups * 128 + g * 128 + half * 64 + lane * 4 + k % 4. No LibTorch.
#pragma once

#include <cstdint>

namespace mtx::model::int8::kernels {

// Rows [begin, end) of x (row stride x_stride) -> q (row stride in_pad; 0 past `in`), sx[r] = max|x_r| / 127:
// int8::quantize_rows' numbers (round half to even, clamp to +-127, NaN -> -127, NaN ignored by the maximum).
void quantize_rows_avx2(const float* x, int64_t x_stride, int64_t in, int64_t in_pad, int64_t begin, int64_t end,
                        int8_t* q, float* sx);

// y[r][o] = fma(float(sum_k q[r][k] * w[o][k]), sx[r] * sw[o], bias[o]) over the panels [p_begin, p_end): the
// int32 sums are exact (|q| x w pairs with |w| <= 127 never reach vpmaddubsw's int16 limit), so this is
// int8::reference_linear's result bit for bit. sw and bias are padded to whole panels. Weights must not be -128.
void gemm_panels_avx2(const int8_t* q, int64_t rows, int64_t in_pad, const uint8_t* packed, int64_t p_begin,
                      int64_t p_end, const float* sw, const float* bias, const float* sx, float* y, int64_t out);

}  // namespace mtx::model::int8::kernels
