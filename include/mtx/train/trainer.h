// The training loop as a class: token-budget batches of pairs (or, task lm, the windows of a token stream),
// label-smoothed loss, accumulation, clipping, schedules, validation (loss/perplexity/BLEU) with the
// tutorials' lines, checkpoints (best/last/step-N), early stopping, NaN skipping, SIGINT/SIGTERM,
// metrics.jsonl and a curve image; exact resume; data-parallel over several processes (train/dist.h).
// The Scheduler (train/scheduler.h) decides when to validate, save and stop; the Trainer carries it out.
#pragma once

#include <torch/optim/optimizer.h>

#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mtx/data/batch.h"
#include "mtx/decode/scoring.h"
#include "mtx/train/checkpoint.h"
#include "mtx/train/settings.h"

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

class TrainingData;
class RunLog;
class Scheduler;
class Validator;
namespace dist {
class Group;
class GradientReducer;
}  // namespace dist

class Trainer {
 public:
  // Prepares the run in `settings.run_dir`: joins the process group when there are several processes, reads
  // and encodes the data, builds (or, resuming, restores) the model, optimizer and scheduler.
  explicit Trainer(RunSettings settings);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains until the scheduler stops it; the run directory then holds best.pt, last.pt, step-N.pt,
  // config.json, metrics.jsonl and curve.svg (and avg.pt with train.average_last).
  TrainSummary run();

 private:
  struct Moment {  // between updates, as every rank agrees on it
    double elapsed_s = 0;
    int signal = 0;
  };
  struct UpdateBatches {  // the batches of one update that this rank trains on
    std::vector<data::Batch> mine;
    std::vector<int64_t> index;  // each one's index within the update over all ranks
    int64_t drawn = 0;           // batches of the update over all ranks
    bool epoch_ended = false;    // the epoch ran out while drawing them
  };
  struct Update {  // an applied update
    double lr = 0, grad_norm = 0, loss_sum = 0, nll_sum = 0;
    int64_t tokens = 0;
  };

  Moment agree_on_now();
  UpdateBatches draw_update();
  std::optional<Update> update(const UpdateBatches& batches, double elapsed_s);
  void after_update(const Update& u);
  void end_epoch();
  // Every checkpoint is taken here: last.pt always; after a counted validation also step-N.pt (keep_last)
  // and, when it improved, best.pt.
  void save(bool validated, bool improved);
  // A counted validation: the scheduler takes it, metrics.jsonl and the curve record it.
  bool record(double loss, double ppl, double bleu, int64_t epoch);
  void validate_due();
  TrainSummary finish();
  void validate_at_stop();
  void average_last();
  void test_language_model();
  void report(const Update& u);
  double elapsed() const;

  RunSettings settings_;
  const config::TrainConfig& tc_;
  torch::Device device_;
  std::unique_ptr<dist::Group> group_;
  int rank_ = 0, world_ = 1;
  bool writer_ = true;  // rank 0: validates, logs and writes the run directory
  bool bf16_ = false;
  int64_t batches_per_epoch_ = 0;
  std::unique_ptr<TrainingData> data_;
  model::Transformer model_{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<dist::GradientReducer> reducer_;
  std::unique_ptr<Validator> validator_;
  std::unique_ptr<RunLog> log_;
  std::chrono::steady_clock::time_point run_start_;
  double elapsed_before_ = 0;  // training time of the run's earlier parts (resumed runs)
  int bad_steps_ = 0;          // non-finite updates in a row
  std::chrono::steady_clock::time_point epoch_start_;
  class Profiler;
  std::unique_ptr<Profiler> profiler_;  // MTX_PROFILE
  class Progress;
  std::unique_ptr<Progress> progress_;  // the terminal's progress line and the periodic log lines
  TrainSummary summary_;
};

// Asks a running training to stop after the current update (async-signal-safe).
void request_stop(int signal);

// Teacher-forced scoring (decode/scoring.h), which validation uses.
using decode::evaluate_loss;
using decode::LossEvaluation;

}  // namespace mtx::train
