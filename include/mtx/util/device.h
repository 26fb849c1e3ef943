// The compute device of a run: what CUDA this LibTorch has (compiled in, devices, runtime version), and
// the one place a device setting (auto | cpu | cuda) becomes a torch::Device or an actionable error.
#pragma once

#include <torch/types.h>

#include <string>

#include "mtx/util/device_choice.h"

namespace mtx {

struct CudaInfo {
  bool compiled = false;  // LibTorch was built with CUDA (its CUDA library is loaded)
  int devices = 0;        // visible CUDA devices (0 without a GPU or driver)
  std::string runtime;    // CUDA runtime LibTorch was built against, e.g. "13.2" ("" if not compiled)
};

CudaInfo cuda_info();

// One line for --version and logs: "compiled (CUDA 13.2), no device", "not compiled",
// "available: 1 device(s) (CUDA 13.2)".
std::string cuda_summary(const CudaInfo& info);

// auto: CUDA when a device is visible, else the CPU. cuda without a device: ConfigError (exit 2) whose
// message names `setting` (e.g. "train.device", "--device") and says whether CUDA is compiled in at all.
// Choosing CUDA also calls use_shape_free_attention().
torch::Device select_device(DeviceChoice device, const std::string& setting);

// Turns off cuDNN's backend of scaled_dot_product_attention (LibTorch >= 2.3; false where there is none to turn
// off). LibTorch 2.x picks it first for bf16 on recent GPUs, and it builds a graph for every new shape of its
// inputs, while mtx's batches come in every length (docs/results.md, "GPU", has the measurement). Flash or
// memory-efficient attention then run instead, with no per-shape cost.
bool use_shape_free_attention();

}  // namespace mtx
