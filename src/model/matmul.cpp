#include "mtx/model/matmul.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

namespace mtx::model {
namespace {

// out [B, m, n] = a [B, m, k] x b [B, k, n], each thread on a contiguous slice of the batch.
torch::Tensor parallel_bmm(const torch::Tensor& a, const torch::Tensor& b) {
  torch::Tensor out = torch::empty({a.size(0), a.size(1), b.size(2)}, a.options());  // [B, m, n]
  const int64_t batch = a.size(0);
  const int64_t grain = std::max<int64_t>(1, batch / (4 * at::get_num_threads()));
  at::parallel_for(0, batch, grain, [&](int64_t begin, int64_t end) {
    torch::NoGradGuard no_grad;
    torch::Tensor slice = out.slice(0, begin, end);
    at::bmm_out(slice, a.slice(0, begin, end), b.slice(0, begin, end));
  });
  return out;
}

struct ParallelBmm : torch::autograd::Function<ParallelBmm> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a, const torch::Tensor& b) {
    ctx->save_for_backward({a, b});
    return parallel_bmm(a, b);  // [B, m, n]
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& a = saved[0];
    const torch::Tensor& b = saved[1];
    const torch::Tensor g = grads[0];  // [B, m, n]
    torch::Tensor ga, gb;
    if (ctx->needs_input_grad(0)) ga = parallel_bmm(g, b.transpose(1, 2));  // [B, m, k]
    if (ctx->needs_input_grad(1)) gb = parallel_bmm(a.transpose(1, 2), g);  // [B, k, n]
    return {ga, gb};
  }
};

}  // namespace

torch::Tensor batched_matmul(const torch::Tensor& a, const torch::Tensor& b) {
  TORCH_CHECK(a.dim() >= 3 && a.dim() == b.dim(), "batched_matmul: expected [..., m, k] x [..., k, n], got ", a.sizes(),
              " x ", b.sizes());
  // One row per matrix (incremental decoding: one query per hypothesis): a broadcast multiply and a sum
  // over k are one vectorised pass, where bmm would run thousands of tiny GEMMs one by one.
  if (a.size(-2) == 1 && a.device().is_cpu()) {
    TORCH_CHECK(b.size(-2) == a.size(-1), "batched_matmul: inner dims differ: ", a.sizes(), " x ", b.sizes());
    return (a.transpose(-2, -1) * b).sum(-2, /*keepdim=*/true);  // [..., 1, n]
  }
  const int64_t batch = a.numel() / (a.size(-2) * a.size(-1));
  const bool parallel = a.device().is_cpu() && b.device().is_cpu() && a.scalar_type() == torch::kFloat &&
                        b.scalar_type() == torch::kFloat && at::get_num_threads() > 1 && batch >= 8 &&
                        !at::in_parallel_region();
  if (!parallel) return torch::matmul(a, b);
  const auto lead = a.sizes().slice(0, a.dim() - 2);
  TORCH_CHECK(b.sizes().slice(0, b.dim() - 2) == lead, "batched_matmul: batch dims differ: ", a.sizes(), " x ",
              b.sizes());
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  TORCH_CHECK(b.size(-2) == k, "batched_matmul: inner dims differ: ", a.sizes(), " x ", b.sizes());
  torch::Tensor out = ParallelBmm::apply(a.reshape({batch, m, k}), b.reshape({batch, k, n}));  // [B, m, n]
  std::vector<int64_t> shape(lead.begin(), lead.end());
  shape.push_back(m);
  shape.push_back(n);
  return out.view(shape);  // [..., m, n]
}

}  // namespace mtx::model
