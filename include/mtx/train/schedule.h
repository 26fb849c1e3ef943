// Learning-rate schedules of the classic recipes: Noam, inverse square root, reduce-on-plateau,
// step decay and constant (each but Noam with optional linear warm-up), and the budget-aware ones for
// short runs: cosine and linear decay from lr to min_lr at the end of the run's budget (max_steps or
// max_minutes, whichever ends it first). Any of them may end in a cool-down (train.cooldown): a linear fall
// to zero over the budget's last share. State is JSON for resume.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>

#include "mtx/config/config.h"

namespace mtx::train {

class LrSchedule {
 public:
  LrSchedule(const config::TrainConfig& config, int64_t d_model);
  // Learning rate for update number `step` (counting from 1) in `epoch` (from 1; the step schedule with
  // decay_steps 0 decays once per finished epoch, as the LM tutorial's StepLR), `elapsed_s` seconds into
  // the run (resumed parts included; only cosine, linear and the cool-down read it, when max_minutes is set).
  double lr(int64_t step, int64_t epoch = 1, double elapsed_s = 0) const;
  // cosine, linear, cool-down: how much of the budget is spent after `step` updates, `elapsed_s` into the
  // run, in [0, 1] (the larger of the steps' and the minutes' share). Update number `step` takes its rate at
  // progress(step - 1, its start time): the last update of a step budget still learns; the rate reaches
  // min_lr (cosine, linear) or zero (cool-down) after it.
  double progress(int64_t step, double elapsed_s) const;
  // Reduce-on-plateau: reports a validation loss (lower is better); other schedules ignore it.
  void on_validation(double loss);

  nlohmann::json state() const;
  void load_state(const nlohmann::json& state);

 private:
  double base_lr(int64_t step, int64_t epoch, double elapsed_s) const;  // the schedule before the cool-down

  config::TrainConfig config_;
  int64_t d_model_;
  double scale_ = 1.0;  // plateau: product of the reductions so far
  double best_ = 0;     // plateau: best validation loss seen
  bool has_best_ = false;
  int bad_ = 0;  // plateau: validations since the last improvement
};

}  // namespace mtx::train
