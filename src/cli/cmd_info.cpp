// mtx info: what mtx runs on (versions, BLAS, CUDA, sentencepiece shim) and, with --config, the
// fully resolved config and the data files it points to, as JSON on stdout.
#include <nlohmann/json.hpp>

#include <iostream>

#include "commands.h"
#include "mtx/config/config.h"
#include "mtx/data/prepare.h"
#include "mtx/tokenizer/tokenizer.h"
#include "mtx/util/system.h"

namespace mtx::cli {

struct InfoArgs {
  ConfigArgs config;
};

namespace {

int run_info(const InfoArgs& args) {
  set_threads(0);
  const RuntimeInfo r = runtime_info();
  nlohmann::json out = {{"mtx_version", r.mtx_version},
                        {"torch_version", r.torch_version},
                        {"blas", r.blas},
                        {"blas_is_reference", r.blas_is_reference},
                        {"cuda_available", r.cuda_available},
                        {"cuda_devices", r.cuda_devices},
                        {"threads", r.threads},
                        {"sentencepiece_shim", tokenizer::shim_description()}};
  if (!args.config.config.empty()) {
    const config::Config cfg = config::load(args.config.config, args.config.overrides);
    out["config"] = config::to_json(cfg);
    const data::DataFiles files = data::find_data_files(cfg.data);
    auto split = [](const data::SplitFiles& f) { return nlohmann::json{{"src", f.src.string()}, {"tgt", f.tgt.string()}}; };
    out["data_files"]["train"] = split(files.train);
    if (files.valid) out["data_files"]["valid"] = split(*files.valid);
    if (files.test) out["data_files"]["test"] = split(*files.test);
  }
  std::cout << out.dump(2) << std::endl;
  return 0;
}

}  // namespace

Command add_info(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  auto* cmd = app.add_subcommand("info", "Print runtime facts and, with --config, the resolved config (JSON)");
  add_config_flags(*cmd, args->config, false);
  return {cmd, [args] { return run_info(*args); }};
}

}  // namespace mtx::cli
