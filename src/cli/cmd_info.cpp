// mtx info: what mtx runs on (versions, BLAS, CUDA, sentencepiece shim) and, with --config, the
// fully resolved config and the data files it points to, as JSON on stdout.
#include <nlohmann/json.hpp>

#include <iostream>

#include <optional>

#include "commands.h"
#include "mtx/bundle/bundle.h"
#include "mtx/config/config.h"
#include "mtx/data/prepare.h"
#include "mtx/model/fp32_gemm.h"
#include "mtx/model/linear.h"
#include "mtx/tokenizer/tokenizer.h"
#include "mtx/train/checkpoint.h"
#include "mtx/util/errors.h"
#include "mtx/util/system.h"

namespace mtx::cli {

struct InfoArgs {
  ConfigArgs config;
  std::string ckpt;
};

namespace {

int run_info(const InfoArgs& args) {
  if (!args.ckpt.empty()) {
    std::cout << train::describe_checkpoint(args.ckpt).dump(2) << std::endl;
    return 0;
  }
  // The config and its data first: a broken one is one line, before any set-up.
  std::optional<config::Config> cfg;
  std::optional<data::DataFiles> files;
  if (!args.config.config.empty()) {
    cfg = config::load(args.config.config, args.config.overrides);
    files = data::find_data_files(cfg->data);
  }
  set_threads(0);
  const RuntimeInfo r = runtime_info();
  nlohmann::json out = {
      {"mtx_version", r.mtx_version},
      {"torch_version", r.torch_version},
      {"blas", r.blas},
      {"blas_is_reference", r.blas_is_reference},
      {"allocator", r.allocator},
      {"fp32_kernel", model::fp32::PackedLinear::available() ? model::fp32::PackedLinear::kernel() : "blas"},
      {"int8_engine", model::int8::engine()},
      {"cpu_isa", cpu::name(cpu::isa())},
      {"cpu_isa_detected", cpu::name(cpu::detected())},
      {"cuda_compiled", r.cuda.compiled},
      {"cuda_runtime", r.cuda.runtime},
      {"cuda_available", r.cuda.devices > 0},
      {"cuda_devices", r.cuda.devices},
      {"threads", r.threads},
      {"sentencepiece_shim", tokenizer::shim_description()}};
  if (cfg) {
    out["config"] = config::to_json(*cfg);
    auto split = [](const data::SplitFiles& f) {
      return nlohmann::json{{"src", f.src.string()}, {"tgt", f.tgt.string()}};
    };
    out["data_files"]["train"] = split(files->train);
    if (files->valid) out["data_files"]["valid"] = split(*files->valid);
    if (files->test) out["data_files"]["test"] = split(*files->test);
  }
  std::cout << out.dump(2) << std::endl;
  return 0;
}

}  // namespace

Command add_info(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  auto* cmd =
      app.add_subcommand("info", "Print runtime facts, a resolved config (--config) or a checkpoint (--ckpt) as JSON");
  add_config_flags(*cmd, args->config, false);
  cmd->add_option("--ckpt", args->ckpt,
                  "Describe a checkpoint: parameters, step, epoch, best metric, weights sha256, config");
  return {cmd, [args] { return run_info(*args); }};
}

}  // namespace mtx::cli
