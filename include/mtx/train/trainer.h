// The training loop: token-budget batches of pairs (or, task lm, the windows of a token stream),
// label-smoothed loss, accumulation, clipping, schedules, validation (loss/perplexity) with the tutorials'
// lines, checkpoints (best/last/step-N), early stopping, NaN skipping, SIGINT/SIGTERM, metrics.jsonl and a
// curve image; exact resume.
#pragma once

#include <filesystem>
#include <limits>
#include <optional>
#include <string>

#include "mtx/config/config.h"
#include "mtx/data/dataset.h"
#include "mtx/decode/scoring.h"
#include "mtx/train/checkpoint.h"

namespace mtx::train {

struct TrainSummary {
  int64_t steps = 0;
  int64_t epoch = 0;         // epoch the run ended in
  double best_val_loss = 0;  // the best validation metric: loss, or BLEU with train.best_metric = bleu
  double last_val_loss = 0;
  double test_loss = std::numeric_limits<double>::quiet_NaN();  // task lm: best.pt on data.test (NaN: none)
  std::string stop_reason;  // "max_steps", "max_epochs", "max_minutes", "early_stopping", "signal"
  int signal = 0;           // the signal that stopped training, if any
  int average_k = 0;        // train.average_choose: how many checkpoints avg.pt averages (0: not chosen)
};

// Trains into `run_dir` (best.pt, last.pt, step-N.pt, config.json, metrics.jsonl, curve.svg).
// With `resume`, continues the run saved in it exactly (same batches, RNG, optimizer state).
TrainSummary run_training(const config::Config& config, const std::filesystem::path& run_dir,
                          std::optional<CheckpointContent> resume = std::nullopt);

// Asks a running training to stop after the current update (async-signal-safe).
void request_stop(int signal);

// Teacher-forced scoring (decode/scoring.h), which validation uses.
using decode::evaluate_loss;
using decode::LossEvaluation;

}  // namespace mtx::train
