// mtx's own int8 product for CPU inference, at every instruction-set level (util/cpu_isa.h): AVX-512 VNNI
// (vpdpbusd), AVX2 (vpmaddubsw on |q| and w * sign(q); oneDNN's u8 x s8 GEMM on q + 64 for calls of many rows,
// where mtx was built with it) and plain C++. y = dequantized(quantized(x) . W^T) + bias, in two passes over the
// activations -- one that quantizes each row of x by its own max |x| (symmetric, [-63, 63], or [-127, 127] with
// MTX_INT8_ACTIVATION_BITS=8), one GEMM whose epilogue scales back and adds the bias --
// where LibTorch's dynamic quantized linear takes six. The int8 products sum exactly in int32 at every level, so a
// row's result depends on that row alone (any batch, any blocking, any thread count, any level) and equals
// reference_linear bit for bit.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

namespace mtx::model::int8 {

struct Weight;

// The activations' bits in mtx's int8 kernels: 7 (levels +-63, the default) or 8 (+-127), from
// MTX_INT8_ACTIVATION_BITS, read once (another value throws ConfigError). 7 bits keeps every u8 x s8 pair sum of
// the instructions without VNNI within int16, so that CPUs without VNNI can run oneDNN's u8 x s8 GEMM (on q + 64)
// and mtx's AVX2 kernel can add two groups' products in int16 before widening them, exactly; the numbers are
// those of 7-bit quantization, the same at every level. 8 bits: a finer grid, slower without VNNI.
int activation_bits();

// From how many rows a call of mtx's int8 kernels at this level goes to oneDNN's GEMM (the avx2 kernel with 7-bit
// activations, where mtx was built with oneDNN); 0 where none does.
int64_t onednn_from_rows();

// Each row of x [n, in] float quantized by its own scale, with L = 2^(bits - 1) - 1 (127 or 63):
// q = round(x * L / max|x|) (to even) in [-L, L], scale = max|x| / L (a zero row: all 0, scale 0).
// -> (q [n, in] int8, scales [n] float)
std::pair<torch::Tensor, torch::Tensor> quantize_rows(const torch::Tensor& x, int bits = activation_bits());

// The int8 linear in plain loops (any CPU): quantize_rows, int32 sums, y = fma(float(sum), sx * sw, bias).
// The kernel below gives the same numbers bit for bit; this is what it is tested against.
torch::Tensor reference_linear(const Weight& weight, const torch::Tensor& bias, const torch::Tensor& x,
                               int bits = activation_bits());

class KernelLinear {
 public:
  // Whether mtx's kernels run int8 layers: MTX_INT8_ENGINE is unset or "mtx" ("avx512-vnni" too, its old name;
  // "libtorch", or one of LibTorch's quantized engines by name, picks LibTorch's instead: for tests and
  // comparisons). The level is read at every call: a layer packed at one level runs at another.
  static bool available();
  // The kernel forward() runs now: "avx512-vnni" (u8 x s8 dot products), "avx2" (the same sums from vpmaddubsw
  // on |q| and w * sign(q), exact), "generic" (plain C++), or "" where mtx's kernels do not run.
  static const char* kernel();

  KernelLinear() = default;
  // bias [out] or undefined; activation_bits 8 or 7 (quantize_rows).
  KernelLinear(const Weight& weight, const torch::Tensor& bias, int activation_bits = int8::activation_bits());
  bool defined() const { return packed_.defined(); }
  // [.., in] float -> [.., out] float. mostly_zeros (ReLU's outputs): on the avx2 kernel with 7-bit activations, the
  // products with columns that are zero in every row of a tile are skipped (the same numbers).
  torch::Tensor forward(const torch::Tensor& x, bool mostly_zeros = false) const;

 private:
  int64_t out_ = 0, in_ = 0, out_pad_ = 0, in_pad_ = 0;
  torch::Tensor packed_;   // uint8 [out_pad * in_pad]: panels of 32 outputs, each groups of 4 inputs per output
  torch::Tensor comp_;     // int32 [out_pad]: 128 * sum_k w[n][k] (activations go in shifted by +128, unsigned)
  torch::Tensor scales_;   // float [out_pad]: the weight rows' scales (0 past out)
  torch::Tensor bias_;     // float [out_pad] (zeros without a bias)
  torch::Tensor weights_;  // int8 [out, in]: oneDNN's operand, where mtx was built with oneDNN
  // The weights k-major for the products that skip zeros (int8_kernels.h, pack_columns), packed on first use.
  struct Columns {
    std::once_flag once;
    torch::Tensor kmajor;  // uint8 [out_pad / 32, in_pad, 32]
  };
  std::shared_ptr<Columns> columns_;
  const uint8_t* kmajor() const;
  bool has_minus_128_ = false;  // a weight of -128: outside the avx2 kernel's exact range
  int levels_ = 127;            // the activations' largest level: 127 (8 bits) or 63 (7 bits)
};

}  // namespace mtx::model::int8
