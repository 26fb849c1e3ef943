#include "mtx/train/scheduler.h"

#include <cmath>

namespace mtx::train {

Scheduler::Scheduler(const config::TrainConfig& config, int64_t d_model, TrainState state, bool resumed)
    : config_(config), schedule_(config, d_model), state_(std::move(state)), unsaved_(!resumed) {
  if (resumed) schedule_.load_state(state_.schedule);
}

TrainState Scheduler::checkpoint(const data::BatchPosition& position, double elapsed_s) {
  state_.position = position;
  state_.elapsed_s = elapsed_s;
  state_.schedule = schedule_.state();
  unsaved_ = false;
  return state_;
}

std::string Scheduler::stop_reason(double elapsed_s, int signal) const {
  if (config_.max_steps > 0 && state_.step >= config_.max_steps) return "max_steps";
  if (config_.max_epochs > 0 && state_.epoch > config_.max_epochs) return "max_epochs";
  if (config_.patience > 0 && state_.bad_validations >= config_.patience) return "early_stopping";
  if (config_.max_minutes > 0 && elapsed_s >= config_.max_minutes * 60) return "max_minutes";
  if (signal) return "signal";
  return "";
}

bool Scheduler::stop_ends_schedule(const std::string& reason) const {
  return (reason == "max_steps" || reason == "max_minutes") &&
         (config_.schedule == config::Schedule::cosine || config_.schedule == config::Schedule::linear ||
          config_.cooldown > 0);
}

void Scheduler::on_update(int64_t tokens, double nll_sum) {
  ++state_.step;
  state_.tgt_tokens += tokens;
  state_.epoch_tokens += tokens;
  state_.epoch_nll += nll_sum;
  unsaved_ = true;
}

bool Scheduler::validation_due() const {
  return config_.validate_every > 0 && state_.step % config_.validate_every == 0 &&
         state_.last_validation_step != state_.step;
}

bool Scheduler::translation_due() const {
  return config_.translate_every > 0 && state_.step % config_.translate_every == 0;
}

Scheduler::EpochEnd Scheduler::on_epoch_end() {
  EpochEnd e;
  e.epoch = state_.epoch;
  e.train_nll = state_.epoch_tokens ? state_.epoch_nll / double(state_.epoch_tokens) : 0.0;
  ++state_.epoch;
  state_.epoch_nll = 0;
  state_.epoch_tokens = 0;
  unsaved_ = true;
  return e;
}

bool Scheduler::better_than_best(double metric) const {
  if (!std::isfinite(metric)) return false;
  if (!std::isfinite(state_.best_metric)) return true;
  return config_.best_metric == config::BestMetric::bleu ? metric > state_.best_metric : metric < state_.best_metric;
}

bool Scheduler::on_validation(double metric, double loss, double ppl, double bleu) {
  const bool improved = better_than_best(metric);
  if (improved) {
    state_.best_metric = metric;
    state_.best_step = state_.step;
  }
  state_.bad_validations = improved ? 0 : state_.bad_validations + 1;
  schedule_.on_validation(loss);
  state_.last_validation_step = state_.step;
  state_.last_val_loss = loss;
  state_.last_val_ppl = ppl;
  state_.last_val_bleu = bleu;
  unsaved_ = true;
  return improved;
}

}  // namespace mtx::train
