#include "mtx/train/schedule.h"

#include "mtx/util/errors.h"

#include <algorithm>
#include <cmath>

namespace mtx::train {

LrSchedule::LrSchedule(const config::TrainConfig& config, int64_t d_model) : config_(config), d_model_(d_model) {}

double LrSchedule::progress(int64_t step, double elapsed_s) const {
  double p = 0;
  if (config_.max_steps > 0) p = std::max(p, double(step) / double(config_.max_steps));
  if (config_.max_minutes > 0) p = std::max(p, elapsed_s / (config_.max_minutes * 60));
  return std::clamp(p, 0.0, 1.0);
}

double LrSchedule::lr(int64_t step, int64_t epoch, double elapsed_s) const {
  const double rate = base_lr(step, epoch, elapsed_s);
  if (config_.cooldown <= 0) return rate;
  // The cool-down: the last `cooldown` share of the budget scales the rate linearly down to zero, which the
  // first update past the budget would reach.
  const double left = 1 - progress(step - 1, elapsed_s);  // share of the budget still to go as update `step` starts
  return left < config_.cooldown ? rate * left / config_.cooldown : rate;
}

double LrSchedule::base_lr(int64_t step, int64_t epoch, double elapsed_s) const {
  const double s = double(std::max<int64_t>(step, 1));
  const double w = double(config_.warmup_steps);
  const double warm = w > 0 ? std::min(1.0, s / w) : 1.0;  // linear warm-up factor
  switch (config_.schedule) {
    case config::Schedule::noam:
      return config_.lr_factor * std::pow(double(d_model_), -0.5) * std::min(std::pow(s, -0.5), s * std::pow(w, -1.5));
    case config::Schedule::inverse_sqrt:
      return config_.lr * (s < w ? s / w : std::sqrt(std::max(w, 1.0) / s));
    case config::Schedule::plateau:
      return config_.lr * warm * scale_;
    case config::Schedule::step: {
      const double decays = config_.decay_steps == 0 ? double(std::max<int64_t>(epoch - 1, 0))
                                                     : std::floor(s / double(config_.decay_steps));
      return config_.lr * warm * std::pow(config_.decay_factor, decays);
    }
    case config::Schedule::constant:
      return config_.lr * warm;
    case config::Schedule::cosine:
    case config::Schedule::linear: {
      // The decay spans the whole budget and multiplies the warm-up ramp (a short warm-up barely meets it);
      // update `step` takes the rate at its start, when step - 1 updates are done.
      const double p = progress(step - 1, elapsed_s);
      const double shape = config_.schedule == config::Schedule::cosine ? 0.5 * (1 + std::cos(M_PI * p)) : 1 - p;
      return warm * (config_.min_lr + (config_.lr - config_.min_lr) * shape);
    }
  }
  return config_.lr;
}

void LrSchedule::on_validation(double loss) {
  if (config_.schedule != config::Schedule::plateau) return;
  if (std::isfinite(loss) && (!has_best_ || loss < best_)) {
    best_ = loss;
    has_best_ = true;
    bad_ = 0;
    return;
  }
  if (++bad_ > config_.plateau_patience) {
    scale_ *= config_.decay_factor;
    bad_ = 0;
  }
}

nlohmann::json LrSchedule::state() const {
  return {{"scale", scale_}, {"best", best_}, {"has_best", has_best_}, {"bad", bad_}};
}

void LrSchedule::load_state(const nlohmann::json& s) {
  // Checked, not converted (a checkpoint's sha256 guards its state; this guards what it says).
  const bool ok = s.is_object() && s.contains("scale") && s["scale"].is_number() && s.contains("best") &&
                  s["best"].is_number() && s.contains("has_best") && s["has_best"].is_boolean() && s.contains("bad") &&
                  s["bad"].is_number_integer() && s["bad"].get<int64_t>() >= 0 && s["bad"].get<int64_t>() <= (1 << 30);
  if (!ok) throw DataError("learning-rate schedule state is malformed: " + s.dump());
  scale_ = s["scale"].get<double>();
  best_ = s["best"].get<double>();
  has_best_ = s["has_best"].get<bool>();
  bad_ = int(s["bad"].get<int64_t>());
}

}  // namespace mtx::train
