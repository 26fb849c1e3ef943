// The packed float GEMM's kernels, one translation unit per instruction set (private to src/model). Weights are
// packed in panels of 32 outputs, [in, 32] each, zero-padded past `out`; bias is padded alike. No LibTorch.
#pragma once

#include <cstdint>

namespace mtx::model::fp32::kernels {

constexpr int64_t kPanel = 32;  // outputs per panel

// The AVX2 sparse kernel's blocking: tiles of kSparseRowsAvx2 rows from row 0 (the last one shorter), k in
// slices of kSparseDepthAvx2 from 0.
constexpr int kSparseRowsAvx2 = 6;
constexpr int64_t kSparseDepthAvx2 = 1024;
constexpr int64_t kSparseStride = 8;

// Where x is mostly zeros (ReLU's outputs), the k that the kernel multiplies: for tile t and k-slice s, the
// offsets from the slice's start at which some row of the tile is nonzero (NaN included), ascending, are
// k[i] for i in [begin[t * slices + s], begin[t * slices + s + 1]); x's values at k[i] are values[i * kSparseStride
// ..], the tile's rows and then zeros. Skipping the other k changes no output: with finite weights a product with
// a zero adds an exact zero, which can only turn a running sum of -0 into +0, and the bias added last makes
// that difference vanish unless the bias is -0 itself (and -0 == +0).
struct Columns {
  const int32_t* k = nullptr;
  const float* values = nullptr;
  const int64_t* begin = nullptr;
  int64_t slices = 0;
};

// y[rows, out] = x[rows, in] x W^T + bias over the panels [p_begin, p_end): each output is one fma chain over k
// in order from 0, then + bias -- fp32::reference_linear's numbers, bit for bit, at every level.
void gemm_panels_avx2(const float* x, int64_t rows, int64_t in, const float* packed, int64_t p_begin, int64_t p_end,
                      const float* bias, float* y, int64_t out);
// x [rows, in]'s Columns at the sparse blocking, into ks (tiles x in), xs (tiles x in x kSparseStride) and begin
// (tiles x slices + 1), where tiles = ceil(rows / kSparseRowsAvx2) and slices = ceil(in / kSparseDepthAvx2).
// Returns how many offsets it kept (of tiles x in).
int64_t sparse_columns_avx2(const float* x, int64_t rows, int64_t in, int32_t* ks, float* xs, int64_t* begin);
// The same numbers as gemm_panels_avx2, multiplying only x's columns (those of its tiles at the sparse blocking).
void gemm_panels_sparse_avx2(int64_t rows, int64_t in, const float* packed, int64_t p_begin, int64_t p_end,
                             const float* bias, float* y, int64_t out, const Columns& columns);
void gemm_panels_avx512(const float* x, int64_t rows, int64_t in, const float* packed, int64_t p_begin, int64_t p_end,
                        const float* bias, float* y, int64_t out);

}  // namespace mtx::model::fp32::kernels
