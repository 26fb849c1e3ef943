// mtx prepare: train (or reuse) the tokenizer and encode every split into the cache.
#include <fmt/format.h>

#include "commands.h"
#include "mtx/config/config.h"
#include "mtx/data/batch.h"
#include "mtx/data/batch_sampler.h"
#include "mtx/data/prepare.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/logging.h"
#include "mtx/util/system.h"

namespace mtx::cli {

struct PrepareArgs {
  ConfigArgs config;
  bool force = false;
  std::string export_batches;  // write the first training epoch's batches here (for scripts/bench)
  int export_limit = 0;        // at most this many batches (0 = all)
};

namespace {

// Binary batch file for the PyTorch peer in scripts/bench: int32 little-endian throughout.
// Header: magic 0x6d747862 ("mtxb"), batch count, pad, bos, eos. Per batch: rows, src_len, tgt_len,
// then src [rows*src_len], tgt_in [rows*tgt_len], tgt_out [rows*tgt_len], exactly as mtx trains on them.
void export_batches(const data::EncodedCorpus& corpus, const data::BatchSampler& sampler,
                    const tokenizer::SpecialIds& ids, const std::string& path, int limit) {
  data::BatchPlan plan;
  sampler.for_each_batch(1, [&](const std::vector<uint32_t>& batch) {
    plan.push_back(batch);
    return limit <= 0 || plan.size() < size_t(limit);
  });
  write_file_atomic(path, [&](std::ostream& out) {
    auto put = [&](int32_t v) { out.write(reinterpret_cast<const char*>(&v), sizeof v); };
    put(0x6d747862);
    put(int32_t(plan.size()));
    put(ids.pad);
    put(ids.bos);
    put(ids.eos);
    for (const auto& indices : plan) {
      const data::Batch b = data::make_batch(corpus, indices, ids);
      put(int32_t(b.src.size(0)));
      put(int32_t(b.src.size(1)));
      put(int32_t(b.tgt_in.size(1)));
      for (const torch::Tensor& t : {b.src, b.tgt_in, b.tgt_out}) {
        const torch::Tensor i32 = t.to(torch::kInt).contiguous();
        out.write(reinterpret_cast<const char*>(i32.data_ptr<int32_t>()), std::streamsize(i32.numel() * 4));
      }
    }
  });
  log::info("exported {} training batches to {}", plan.size(), path);
}

}  // namespace

namespace {

int run_prepare(const PrepareArgs& args) {
  const config::Config cfg = config::load(args.config.config, args.config.overrides);
  data::find_data_files(cfg.data);  // missing data: one line, before any set-up
  set_threads(cfg.train.threads);
  data::PrepareOptions options;
  options.force = args.force;
  options.threads = cfg.train.threads;
  const data::PreparedData prepared = data::prepare_data(cfg, options);

  const auto& f = prepared.filter;
  log::info("train: {} pairs kept of {} ({} too short, {} too long, {} bad ratio); {} truncated to {} subwords", f.kept,
            f.read, f.too_short, f.too_long, f.bad_ratio, prepared.train.truncated, cfg.model.max_len - 1);
  log::info("train tokens: {} source, {} target (vocab {} / {})", prepared.train.src.total_tokens(),
            prepared.train.tgt.total_tokens(), prepared.tokenizer.src().vocab_size(),
            prepared.tokenizer.tgt().vocab_size());
  if (prepared.valid) log::info("valid: {} pairs", prepared.valid->size());
  if (prepared.test) log::info("test: {} pairs", prepared.test->size());

  data::BatchSamplerOptions bo;
  bo.max_tokens = cfg.train.max_tokens;
  bo.sort_window = cfg.train.sort_window;
  bo.seed = uint64_t(cfg.train.seed);
  const data::BatchSampler sampler = data::BatchSampler::for_corpus(prepared.train, bo);
  const data::PaddingStats pad = sampler.padding(1);
  log::info(
      "batches at {} tokens: {} per epoch, {:.1f} pairs each; padding efficiency {:.1f}% "
      "(real tokens / padded slots)",
      cfg.train.max_tokens, pad.batches, double(pad.examples) / double(std::max<int64_t>(pad.batches, 1)),
      100.0 * pad.efficiency());
  if (!args.export_batches.empty()) {
    export_batches(prepared.train, sampler, prepared.tokenizer.special_ids(), args.export_batches, args.export_limit);
  }
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
  cmd->add_option("--export-batches", args->export_batches, "Write epoch 1's training batches to FILE (scripts/bench)");
  cmd->add_option("--export-limit", args->export_limit, "Export at most N batches");
  return {cmd, [args] { return run_prepare(*args); }};
}

}  // namespace mtx::cli
