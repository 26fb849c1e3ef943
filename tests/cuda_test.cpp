// --device cuda: training, decoding and checkpoints on a GPU agree with the CPU. These run where a CUDA
// device is visible (a LibTorch 2.x build on a GPU machine: scripts/gpu_check.sh) and skip elsewhere;
// the device-selection tests run everywhere.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <ATen/Context.h>

#include <cmath>
#include <fstream>
#include <map>

#include "mtx/data/prepare.h"
#include "mtx/decode/translator.h"
#include "mtx/train/checkpoint.h"
#include "mtx/train/trainer.h"
#include "mtx/util/device.h"
#include "mtx/util/errors.h"
#include "test_utils.h"

namespace fs = std::filesystem;
using namespace mtx;

#define MTX_REQUIRE_CUDA()                                                                \
  do {                                                                                    \
    if (::mtx::cuda_info().devices == 0)                                                  \
      GTEST_SKIP() << "no CUDA device: CUDA " << ::mtx::cuda_summary(::mtx::cuda_info()); \
  } while (0)

namespace {

const torch::Device kCuda(torch::kCUDA);
const torch::Device kCpu(torch::kCPU);

config::Config toy_on(const test::TempDir& tmp, mtx::DeviceChoice device) {
  config::Config c = test::toy_setup(tmp);
  c.model.dropout = 0;  // CPU and CUDA draw different random numbers; compare the deterministic update
  c.model.attention_dropout = 0;
  c.model.activation_dropout = 0;
  c.train.max_epochs = 0;
  c.train.warmup_steps = 4;
  c.train.device = device;
  // SGD (with momentum: optimizer state that moves with the weights), not Adam: Adam's first steps are about
  // lr * sign(gradient), so a gradient that is zero in exact arithmetic (a key projection's bias: softmax
  // ignores a shift shared by all keys) with rounding noise of either sign on each device moves that weight
  // by +-lr. SGD moves each weight by lr * gradient, so the devices' results stay comparable.
  c.train.optimizer = config::Optimizer::sgd;
  return c;
}

// Largest absolute difference between two models' parameters (compared on the CPU).
double max_param_diff(model::Transformer& a, model::Transformer& b) {
  const auto pa = a->named_parameters(), pb = b->named_parameters();
  EXPECT_EQ(pa.size(), pb.size());
  double worst = 0;
  for (const auto& p : pa) {
    const torch::Tensor x = p.value().detach().to(kCpu), y = pb[p.key()].detach().to(kCpu);
    worst = std::max(worst, (x - y).abs().max().item<double>());
  }
  return worst;
}

}  // namespace

TEST(Device, CpuAndAutoAlwaysResolve) {
  EXPECT_EQ(select_device(mtx::DeviceChoice::cpu, "--device"), kCpu);
  const torch::Device a = select_device(mtx::DeviceChoice::auto_, "--device");
  EXPECT_EQ(a.is_cuda(), cuda_info().devices > 0) << "auto picks CUDA exactly when a device is visible";
}

TEST(Device, CudaWithoutADeviceIsAOneLineConfigError) {
  if (cuda_info().devices > 0) GTEST_SKIP() << "a CUDA device is visible";
  const std::string msg =
      test::boundary_error<ConfigError>([] { select_device(mtx::DeviceChoice::cuda, "train.device"); });
  EXPECT_NE(msg.find("train.device cuda"), std::string::npos) << msg;
  if (cuda_info().compiled) {
    EXPECT_NE(msg.find("no CUDA device is visible"), std::string::npos) << msg;
  } else {
    EXPECT_NE(msg.find("without CUDA"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--torch pip"), std::string::npos) << "says how to get a CUDA build: " << msg;
  }
}

// Whether CUDA is compiled in must match the LibTorch CMake found: a CUDA LibTorch whose CUDA library was
// dropped at link time (--as-needed) would silently train on the CPU.
TEST(Device, CudaIsCompiledInExactlyWhenLibTorchHasIt) {
  EXPECT_EQ(cuda_info().compiled, bool(MTX_TORCH_HAS_CUDA)) << cuda_summary(cuda_info());
  if (cuda_info().compiled) {
    EXPECT_FALSE(cuda_info().runtime.empty());
  }
}

// Found on an H200: with bf16 autocast LibTorch 2.x's attention ran on cuDNN, which builds a graph for each new
// shape (seconds each); a run on CUDA turns that backend off. The switch itself is checked on any machine.
TEST(Device, CudaRunsTurnOffCuDnnAttention) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  const bool before = at::globalContext().userEnabledCuDNNSDP();
  EXPECT_TRUE(use_shape_free_attention());
  EXPECT_FALSE(at::globalContext().userEnabledCuDNNSDP());
  at::globalContext().setSDPUseCuDNN(before);
  if (cuda_info().devices > 0) {
    select_device(mtx::DeviceChoice::cuda, "--device");
    EXPECT_FALSE(at::globalContext().userEnabledCuDNNSDP()) << "select_device(cuda) turns it off";
    at::globalContext().setSDPUseCuDNN(before);
  }
#else
  EXPECT_FALSE(use_shape_free_attention()) << "LibTorch 1.13 has no SDPA backends";
#endif
}

TEST(Cuda, OneTrainingUpdateEqualsTheCpuUpdate) {
  MTX_REQUIRE_CUDA();
  test::TempDir tmp;
  for (const auto& [device, dir] :
       {std::pair{mtx::DeviceChoice::cpu, "cpu"}, std::pair{mtx::DeviceChoice::cuda, "cuda"}}) {
    config::Config c = toy_on(tmp, device);
    c.train.max_steps = 1;
    mtx::test::train_run(c, tmp / dir);
  }
  auto cpu = train::load_checkpoint(tmp / "cpu" / "last.pt");
  auto cuda = train::load_checkpoint(tmp / "cuda" / "last.pt");
  EXPECT_EQ(cpu.state.step, 1);
  EXPECT_EQ(cuda.state.step, 1);
  EXPECT_EQ(cpu.state.tgt_tokens, cuda.state.tgt_tokens) << "the same batch";
  // The update moved the weights, and moved them alike on both devices.
  torch::manual_seed(uint64_t(cpu.config.train.seed));
  auto fresh = train::build_model(cpu.config, *cpu.tokenizer);
  const double moved = max_param_diff(fresh, cpu.model);
  EXPECT_GT(moved, 1e-6) << "the update changed the weights";
  EXPECT_LT(max_param_diff(cpu.model, cuda.model), 1e-4 + 0.01 * moved);
  // No scheduled validation in one update: the stop's ("final") validation row has the loss.
  const auto final_loss = [&](const char* dir) {
    std::ifstream in(tmp / dir / "metrics.jsonl");
    double loss = std::nan("");
    for (std::string line; std::getline(in, line);) {
      const auto row = nlohmann::json::parse(line);
      if (row["type"] == "final") loss = row["val_loss"].get<double>();
    }
    return loss;
  };
  ASSERT_TRUE(std::isfinite(final_loss("cpu"))) << "the stop validates";
  EXPECT_NEAR(final_loss("cpu"), final_loss("cuda"), 1e-3) << "validation loss after the update";
}

TEST(Cuda, GreedyTranslationsEqualTheCpuOnes) {
  MTX_REQUIRE_CUDA();
  test::TempDir tmp;
  config::Config c = toy_on(tmp, mtx::DeviceChoice::cpu);
  c.train.max_steps = 30;  // a model that has learned something: outputs are not all one token
  mtx::test::train_run(c, tmp / "run");
  auto on_cpu = train::load_checkpoint(tmp / "run" / "last.pt", kCpu);
  auto on_cuda = train::load_checkpoint(tmp / "run" / "last.pt", kCuda);
  ASSERT_TRUE(on_cuda.model->parameters().front().is_cuda());
  const std::vector<std::string> lines = {"ein Hund läuft", "zwei Männer spielen Fußball", "Kinder spielen im Park",
                                          "eine Frau liest ein Buch heute", ""};
  decode::TranslateOptions o;
  o.search.beam = 1;
  const auto a = decode::Translator(on_cpu.model, *on_cpu.tokenizer, o).translate(lines);
  const auto b = decode::Translator(on_cuda.model, *on_cuda.tokenizer, o).translate(lines);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].hypotheses.size(), b[i].hypotheses.size()) << lines[i];
    if (a[i].hypotheses.empty()) continue;  // the empty line: nothing translated on either device
    EXPECT_EQ(a[i].hypotheses[0].tokens, b[i].hypotheses[0].tokens) << lines[i];
    EXPECT_NEAR(a[i].hypotheses[0].score, b[i].hypotheses[0].score, 1e-3) << lines[i];
  }
}

TEST(Cuda, CheckpointsMoveBetweenCpuAndCuda) {
  MTX_REQUIRE_CUDA();
  test::TempDir tmp;
  config::Config gpu = toy_on(tmp, mtx::DeviceChoice::cuda);
  gpu.train.max_steps = 3;
  mtx::test::train_run(gpu, tmp / "gpu");
  config::Config cpu = toy_on(tmp, mtx::DeviceChoice::cpu);
  cpu.train.max_steps = 3;
  mtx::test::train_run(cpu, tmp / "cpu");

  // Written on CUDA, read on the CPU (and the reverse): the same weights wherever they land.
  auto g_cpu = train::load_checkpoint(tmp / "gpu" / "last.pt", kCpu);
  auto g_cuda = train::load_checkpoint(tmp / "gpu" / "last.pt", kCuda);
  EXPECT_FALSE(g_cpu.model->parameters().front().is_cuda());
  EXPECT_EQ(max_param_diff(g_cpu.model, g_cuda.model), 0.0);
  auto c_cuda = train::load_checkpoint(tmp / "cpu" / "last.pt", kCuda);
  auto c_cpu = train::load_checkpoint(tmp / "cpu" / "last.pt", kCpu);
  EXPECT_TRUE(c_cuda.model->parameters().front().is_cuda());
  EXPECT_EQ(max_param_diff(c_cpu.model, c_cuda.model), 0.0);
  EXPECT_EQ(g_cpu.weights_sha256, train::weights_sha256(g_cpu.model));

  // A CUDA run resumes on the CPU and a CPU run on CUDA (optimizer state moves with the weights).
  config::Config more = gpu;
  more.train.max_steps = 5;
  more.train.device = mtx::DeviceChoice::cpu;
  EXPECT_EQ(mtx::test::train_run(more, tmp / "gpu", train::load_checkpoint(tmp / "gpu" / "last.pt")).steps, 5);
  more = cpu;
  more.train.max_steps = 5;
  more.train.device = mtx::DeviceChoice::cuda;
  EXPECT_EQ(mtx::test::train_run(more, tmp / "cpu", train::load_checkpoint(tmp / "cpu" / "last.pt", kCuda)).steps, 5);
  auto a = train::load_checkpoint(tmp / "gpu" / "last.pt"), b = train::load_checkpoint(tmp / "cpu" / "last.pt");
  EXPECT_EQ(a.state.step, 5);
  EXPECT_LT(max_param_diff(a.model, b.model), 1e-3)
      << "3 updates on one device + 2 on the other agree either way round";
}

TEST(Cuda, Bf16AutocastTrainingMatchesFp32) {
  MTX_REQUIRE_CUDA();
  test::TempDir tmp;
  // The same run in fp32 and with bf16 autocast: validation losses epoch by epoch (read from metrics.jsonl).
  std::map<bool, std::vector<double>> val;
  for (const bool bf16 : {false, true}) {
    config::Config c = toy_on(tmp, mtx::DeviceChoice::cuda);
    c.train.bf16 = bf16;
    c.train.max_epochs = 4;
    const fs::path dir = tmp / (bf16 ? "bf16" : "fp32");
    const train::TrainSummary s = mtx::test::train_run(c, dir);
    EXPECT_EQ(s.stop_reason, "max_epochs");
    std::ifstream in(dir / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      const auto row = nlohmann::json::parse(line);
      if (row["type"] == "valid") val[bf16].push_back(row["val_loss"].get<double>());
    }
    if (bf16) {
      auto ckpt = train::load_checkpoint(dir / "last.pt");
      EXPECT_EQ(ckpt.model->parameters().front().scalar_type(), torch::kFloat) << "master weights stay fp32";
    }
  }
  ASSERT_EQ(val[false].size(), 4u);
  ASSERT_EQ(val[true].size(), 4u);
  for (size_t e = 0; e < 4; ++e) {
    EXPECT_TRUE(std::isfinite(val[true][e]));
    EXPECT_NEAR(val[true][e], val[false][e], 0.05 * val[false][e]) << "epoch " << e + 1 << ": bf16 tracks fp32";
  }
  EXPECT_LT(val[false].back(), val[false].front()) << "the toy run learns";
}
