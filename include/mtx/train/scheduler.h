// When to validate, checkpoint and stop, and the counters those decisions move (Marian's Scheduler):
// the training loop reports updates, epoch ends and validations and asks what is due, so every
// checkpoint holds one consistent state and a resumed run takes the same decisions as an unbroken one.
#pragma once

#include <cstdint>
#include <string>

#include "mtx/config/config.h"
#include "mtx/train/checkpoint.h"
#include "mtx/train/schedule.h"

namespace mtx::train {

class Scheduler {
 public:
  // Takes the run's state (fresh or resumed) and owns it from then on; `d_model` is for Noam.
  Scheduler(const config::TrainConfig& config, int64_t d_model, TrainState state, bool resumed);

  const TrainState& state() const { return state_; }
  // The state to write into a checkpoint now (schedule state included); marks it saved.
  TrainState checkpoint(const data::BatchPosition& position, double elapsed_s);
  // Whether the current state is not yet in a checkpoint (a stop must then save one).
  bool unsaved() const { return unsaved_; }

  // Between updates: why training stops now ("max_steps", "max_epochs", "max_minutes", "early_stopping",
  // "signal"), or "" to go on. `elapsed_s` counts the earlier parts of a resumed run.
  std::string stop_reason(double elapsed_s, int signal) const;

  // Whether a stop for `reason` is the learning-rate schedule's own end: a step or time budget that cosine,
  // linear or a cool-down decays over. Its validation then counts (best.pt, avg.pt see the annealed model);
  // any other stop's validation is a report, so that a resumed run decides as an unbroken one.
  bool stop_ends_schedule(const std::string& reason) const;

  // Learning rate of the next update, `elapsed_s` into the run (resumed parts included).
  double next_lr(double elapsed_s) const { return schedule_.lr(state_.step + 1, state_.epoch, elapsed_s); }
  // An update was applied: `tokens` target tokens, `nll_sum` their summed negative log-likelihood.
  void on_update(int64_t tokens, double nll_sum);
  // After an update: whether validate_every (or translate_every) divides it.
  bool validation_due() const;
  bool translation_due() const;

  // The batch sampler ran out of the epoch. Whether its end needs a validation of its own (no validation has
  // run at this update yet: one that validate_every caused serves the epoch's end too).
  bool epoch_end_needs_validation() const { return state_.last_validation_step != state_.step; }
  struct EpochEnd {
    int64_t epoch = 0;     // the epoch that ended
    double train_nll = 0;  // its training nll per target token
  };
  // Closes the epoch; the state moves to the next one.
  EpochEnd on_epoch_end();

  // A scheduled validation (counted towards patience and the plateau schedule): `metric` is the loss, or
  // BLEU with train.best_metric = bleu. Returns whether it is a new best. A non-finite metric never is.
  bool on_validation(double metric, double loss, double ppl, double bleu);
  // Whether `metric` would beat the best so far (for reports that do not count, e.g. a stop's validation).
  bool better_than_best(double metric) const;

 private:
  config::TrainConfig config_;
  LrSchedule schedule_;
  TrainState state_;
  bool unsaved_;
};

}  // namespace mtx::train
