// mtx prepare: train (or reuse) the tokenizer and encode every split into the cache.
#include <fmt/format.h>

#include "commands.h"
#include "mtx/config/config.h"
#include "mtx/data/batcher.h"
#include "mtx/data/prepare.h"
#include "mtx/util/logging.h"
#include "mtx/util/system.h"

namespace mtx::cli {

struct PrepareArgs {
  ConfigArgs config;
  bool force = false;
};

namespace {

int run_prepare(const PrepareArgs& args) {
  const config::Config cfg = config::load(args.config.config, args.config.overrides);
  set_threads(cfg.train.threads);
  data::PrepareOptions options;
  options.force = args.force;
  options.threads = cfg.train.threads;
  const data::PreparedData prepared = data::prepare_data(cfg, options);

  const auto& f = prepared.filter;
  log::info("train: {} pairs kept of {} ({} too short, {} too long, {} bad ratio); {} truncated to {} subwords",
            f.kept, f.read, f.too_short, f.too_long, f.bad_ratio, prepared.train.truncated, cfg.model.max_len - 1);
  log::info("train tokens: {} source, {} target (vocab {} / {})", prepared.train.src.total_tokens(),
            prepared.train.tgt.total_tokens(), prepared.tokenizer.src().vocab_size(),
            prepared.tokenizer.tgt().vocab_size());
  if (prepared.valid) log::info("valid: {} pairs", prepared.valid->size());
  if (prepared.test) log::info("test: {} pairs", prepared.test->size());

  data::BatcherOptions bo;
  bo.max_tokens = cfg.train.max_tokens;
  bo.sort_window = cfg.train.sort_window;
  bo.seed = uint64_t(cfg.train.seed);
  const data::Batcher batcher = data::Batcher::for_corpus(prepared.train, bo);
  const data::PaddingStats pad = batcher.padding(batcher.plan(1));
  log::info("batches at {} tokens: {} per epoch, {:.1f} pairs each; padding efficiency {:.1f}% "
            "(real tokens / padded slots)",
            cfg.train.max_tokens, pad.batches, double(pad.examples) / double(std::max<int64_t>(pad.batches, 1)),
            100.0 * pad.efficiency());
  log::info("prepared: tokenizer {} ({}), corpus {} ({})", prepared.tokenizer_dir.string(),
            prepared.tokenizer_reused ? "reused" : "trained", prepared.corpus_dir.string(),
            prepared.corpus_reused ? "reused" : "encoded");
  return 0;
}

}  // namespace

Command add_prepare(CLI::App& app) {
  auto args = std::make_shared<PrepareArgs>();
  auto* cmd = app.add_subcommand("prepare", "Train the tokenizer and encode the corpus (cached by content hash)");
  add_config_flags(*cmd, args->config, true);
  cmd->add_flag("--force", args->force, "Re-train and re-encode even if the cache is valid");
  return {cmd, [args] { return run_prepare(*args); }};
}

}  // namespace mtx::cli
