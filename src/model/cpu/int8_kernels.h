// The int8 GEMM's kernels, one translation unit per instruction set (private to src/model). The weights are
// packed once for every level: panels of 32 outputs, in groups of 4 inputs per output, at
// p * groups * 128 + g * 128 + half * 64 + lane * 4 + k % 4. No LibTorch.
#pragma once

#include <cstdint>

namespace mtx::model::int8::kernels {

// Each level's functions give the same numbers as every other level's.

// Rows [begin, end) of x (row stride x_stride) -> q (row stride in_pad; 0 past `in`), sx[r] = max|x_r| / levels:
// int8::quantize_rows' numbers (round half to even, clamp to +-levels, NaN -> -levels, NaN ignored by the
// maximum). levels is 127 (8-bit activations) or 63 (7-bit).
void quantize_rows_generic(const float* x, int64_t x_stride, int64_t in, int64_t in_pad, int64_t begin, int64_t end,
                           int levels, int8_t* q, float* sx);
void quantize_rows_avx2(const float* x, int64_t x_stride, int64_t in, int64_t in_pad, int64_t begin, int64_t end,
                        int levels, int8_t* q, float* sx);

// y[r][o] = fma(float(sum_k q[r][k] * w[o][k]), sx[r] * sw[o], bias[o]) over the panels [p_begin, p_end): the
// int32 sums are exact (on avx2, |q| x w pairs with |w| <= 127 never reach vpmaddubsw's int16 limit), so this is
// int8::reference_linear's result bit for bit. sw and bias are padded to whole panels. The generic kernel takes any
// weight; the avx2 one none of -128. seven_bit (avx2): every |q| <= 63, so two groups' int16 pair sums add without
// overflow (2 x 2 x 63 x 127 < 2^15) before one widening vpmaddwd: three multiplies per 64 products, not four.
void gemm_panels_generic(const int8_t* q, int64_t rows, int64_t in_pad, const uint8_t* packed, int64_t p_begin,
                         int64_t p_end, const float* sw, const float* bias, const float* sx, float* y, int64_t out);
void gemm_panels_avx2(const int8_t* q, int64_t rows, int64_t in_pad, const uint8_t* packed, int64_t p_begin,
                      int64_t p_end, bool seven_bit, const float* sw, const float* bias, const float* sx, float* y,
                      int64_t out);

// oneDNN's JIT GEMM (Debian's libdnnl, where mtx was built with it): acc [rows, out] = the exact int32 sums of
// (u - u_offset) [rows, in] (row stride u_stride) x w^T, w [out, in] row-major. Exact where every u x w pair sum
// stays within int16 (vpmaddubsw without VNNI): u = q + 64 with |q| <= 63 (7-bit activations), 2 x 127 x 128 < 2^15.
// Threads: oneDNN's OpenMP, as many as the calling thread's OpenMP count (1 inside a parallel region). Returns
// oneDNN's status: 0 for success (-1 without oneDNN).
bool onednn_available();
int gemm_onednn_u8s8(const uint8_t* u, int64_t rows, int64_t in, int64_t u_stride, uint8_t u_offset, const int8_t* w,
                     int64_t out, int32_t* acc);
// Caps oneDNN at AVX2 (MTX_CPU_ISA below AVX-512); first call only, before oneDNN's first kernel.
void onednn_cap_isa(bool avx2_only);

// The int32 sums' epilogue on AVX2, rows [begin, end): y[r][o] = fma(float(acc[r][o]), sx[r] * sw[o], bias[o]), the
// kernels' (and int8::reference_linear's) numbers (acc may be y's own memory: each value is read before its float
// is stored); and u = q + offset over n bytes.
void epilogue_avx2(const int32_t* acc, int64_t begin, int64_t end, int64_t out, const float* sw, const float* bias,
                   const float* sx, float* y);
void offset_bytes_avx2(const int8_t* q, int64_t n, int8_t offset, uint8_t* u);

// ReLU's zeros on AVX2: the products with columns of q that are 0 in every row of a tile are skipped. The weights
// for it are packed k-major (pack_columns): per panel of 32 outputs, per input k, 32 bytes, output o of the panel
// at byte column_position(o), so that the kernel's byte and word interleaves of four inputs' rows give outputs
// 0-7, 8-15, 16-23 and 24-31 in order.
constexpr int64_t kSparseRows = 6;  // rows per tile whose nonzero columns are gathered together
static constexpr int64_t column_position(int64_t o) { return (o / 4 % 2) * 16 + o / 8 * 4 + o % 4; }
// kmajor [out_pad / 32][in_pad][32] from the panels' pack (`packed`, the layout above).
void pack_columns(const uint8_t* packed, int64_t out_pad, int64_t in_pad, uint8_t* kmajor);

// Tile t's columns: k[begin[t] .. begin[t + 1]) (a multiple of 8 each, ascending, padded with column 0 whose
// values are 0), and its rows' values at those columns, row r at values[begin[t] * kSparseRows + r * count_t + i]
// (count_t = begin[t + 1] - begin[t]; rows past the tile's last hold 0); negative[t]: some value is below 0.
struct Columns {
  const int32_t* k;
  const int8_t* values;
  const uint8_t* negative;
  const int64_t* begin;
};
// Gathers each tile of kSparseRows rows of q [rows, in_pad]: the columns nonzero in some row of it. Buffers: k holds
// tiles * (in_pad + 8) entries, values that times kSparseRows plus 8, negative tiles, begin tiles + 1, masks
// in_pad / 32 (scratch). Returns the nonzero columns counted over the tiles (without the padding).
int64_t sparse_columns_avx2(const int8_t* q, int64_t rows, int64_t in_pad, int32_t* k, int8_t* values,
                            uint8_t* negative, int64_t* begin, uint32_t* masks);
// gemm_panels_avx2's numbers (seven_bit activations only: |q| <= 63) over the gathered columns alone; a skipped
// product is an exact 0, so the sums are the same int32s.
// scratch: (in_pad + 9) * 32 bytes, the calling thread's own.
void gemm_panels_sparse_avx2(int64_t rows, const uint8_t* kmajor, int64_t in_pad, int64_t p_begin, int64_t p_end,
                             const float* sw, const float* bias, const float* sx, float* y, int64_t out,
                             const Columns& columns, uint8_t* scratch);

// The same quantization on AVX-512, written as unsigned bytes u = q + 128 (vpdpbusd multiplies unsigned by signed
// bytes), the padding past `in` 128.
void quantize_rows_avx512vnni(const float* x, int64_t x_stride, int64_t in, int64_t in_pad, int64_t begin, int64_t end,
                              int levels, uint8_t* u, float* sx);

// The same products on AVX-512 VNNI from u = q + 128: each output's int32 sum of u x w, less comp[o] = 128 x
// sum_k w[o][k], is the exact sum of q x w (any weight, -128 included), so this is int8::reference_linear's result
// bit for bit. comp, sw and bias are padded to whole panels.
void gemm_panels_avx512vnni(const uint8_t* u, int64_t rows, int64_t in_pad, const uint8_t* packed, int64_t p_begin,
                            int64_t p_end, const int32_t* comp, const float* sw, const float* bias, const float* sx,
                            float* y, int64_t out);

}  // namespace mtx::model::int8::kernels
