#include "mtx/util/device.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include "mtx/util/errors.h"

namespace mtx {

CudaInfo cuda_info() {
  CudaInfo info;
  const auto& hooks = at::detail::getCUDAHooks();  // the stub unless libtorch_cuda is loaded
  info.compiled = hooks.hasCUDART();
  if (!info.compiled) return info;
  const long v = hooks.versionCUDART();  // e.g. 13020
  info.runtime = std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  info.devices = torch::cuda::is_available() ? int(torch::cuda::device_count()) : 0;
  return info;
}

std::string cuda_summary(const CudaInfo& info) {
  if (!info.compiled) return "not compiled";
  if (info.devices == 0) return "compiled (CUDA " + info.runtime + "), no device";
  return "available: " + std::to_string(info.devices) + " device(s) (CUDA " + info.runtime + ")";
}

bool use_shape_free_attention() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  at::globalContext().setSDPUseCuDNN(false);
  return true;
#else
  return false;  // LibTorch 1.13 has no scaled_dot_product_attention, so no cuDNN backend of it
#endif
}

torch::Device select_device(DeviceChoice device, const std::string& setting) {
  const CudaInfo cuda = cuda_info();
  if (device == DeviceChoice::cuda && cuda.devices == 0) {
    if (!cuda.compiled)
      throw ConfigError(setting + " cuda: this mtx is built on LibTorch " + std::string(TORCH_VERSION) +
                        " without CUDA; build it on a CUDA LibTorch (scripts/build.sh --torch pip) or use cpu");
    throw ConfigError(setting + " cuda: CUDA " + cuda.runtime +
                      " is compiled in, but no CUDA device is visible (no GPU or no driver); use cpu or auto");
  }
  if (device == DeviceChoice::cuda || (device == DeviceChoice::auto_ && cuda.devices > 0)) {
    use_shape_free_attention();
    return torch::Device(torch::kCUDA);
  }
  return torch::Device(torch::kCPU);
}

}  // namespace mtx
