#include "mtx/train/schedule.h"

#include <gtest/gtest.h>

#include <cmath>

using mtx::train::LrSchedule;
namespace cfg = mtx::config;

TEST(Schedule, NoamValues) {
  cfg::TrainConfig c;
  c.schedule = cfg::Schedule::noam;
  c.lr_factor = 1.0;
  c.warmup_steps = 2000;
  const LrSchedule s(c, 512);
  EXPECT_NEAR(s.lr(1), 1.0 / std::sqrt(512.0) * 1 * std::pow(2000.0, -1.5), 1e-12);
  EXPECT_NEAR(s.lr(1000), std::pow(512.0, -0.5) * 1000 * std::pow(2000.0, -1.5), 1e-12);
  EXPECT_NEAR(s.lr(2000), std::pow(512.0, -0.5) * std::pow(2000.0, -0.5), 1e-12);  // the peak
  EXPECT_NEAR(s.lr(2000), 0.000988211768802618, 1e-15);
  EXPECT_NEAR(s.lr(8000), std::pow(512.0, -0.5) * std::pow(8000.0, -0.5), 1e-12);
  EXPECT_LT(s.lr(1999), s.lr(2000));
  EXPECT_LT(s.lr(2001), s.lr(2000));
  cfg::TrainConfig twice = c;
  twice.lr_factor = 2.0;
  EXPECT_NEAR(LrSchedule(twice, 512).lr(300), 2 * s.lr(300), 1e-15);
}

TEST(Schedule, InverseSqrtStepAndConstant) {
  cfg::TrainConfig c;
  c.lr = 1e-3;
  c.warmup_steps = 100;
  c.schedule = cfg::Schedule::inverse_sqrt;
  EXPECT_NEAR(LrSchedule(c, 256).lr(50), 5e-4, 1e-15);
  EXPECT_NEAR(LrSchedule(c, 256).lr(100), 1e-3, 1e-15);
  EXPECT_NEAR(LrSchedule(c, 256).lr(400), 5e-4, 1e-15);
  c.schedule = cfg::Schedule::step;
  c.warmup_steps = 0;
  c.decay_steps = 10;
  c.decay_factor = 0.5;
  EXPECT_NEAR(LrSchedule(c, 256).lr(9), 1e-3, 1e-15);
  EXPECT_NEAR(LrSchedule(c, 256).lr(25), 2.5e-4, 1e-15);
  c.schedule = cfg::Schedule::constant;
  EXPECT_NEAR(LrSchedule(c, 256).lr(12345), 1e-3, 1e-15);
}

TEST(Schedule, PlateauReducesAfterPatienceAndRoundTripsItsState) {
  cfg::TrainConfig c;
  c.schedule = cfg::Schedule::plateau;
  c.lr = 1e-3;
  c.warmup_steps = 0;
  c.plateau_patience = 1;
  c.decay_factor = 0.1;
  LrSchedule s(c, 256);
  s.on_validation(3.0);
  s.on_validation(2.5);  // better
  s.on_validation(2.6);  // 1 bad: within patience
  EXPECT_NEAR(s.lr(10), 1e-3, 1e-15);
  s.on_validation(2.7);  // 2 bad: reduce
  EXPECT_NEAR(s.lr(10), 1e-4, 1e-15);
  LrSchedule restored(c, 256);
  restored.load_state(s.state());
  EXPECT_NEAR(restored.lr(10), 1e-4, 1e-15);
}

TEST(Schedule, CosineAndLinearDecayToMinLrAtTheBudgetsEnd) {
  cfg::TrainConfig c;
  c.lr = 2e-3;
  c.min_lr = 1e-4;
  c.warmup_steps = 10;
  c.max_steps = 1000;
  c.schedule = cfg::Schedule::cosine;
  const LrSchedule cosine(c, 256);
  EXPECT_NEAR(cosine.lr(5), 0.5 * (1e-4 + 1.9e-3 * 0.5 * (1 + std::cos(M_PI * 0.004))), 1e-15);  // warming up
  EXPECT_NEAR(cosine.lr(501), 1e-4 + 1.9e-3 * 0.5, 1e-15);                                       // half-way
  EXPECT_NEAR(cosine.lr(1001), 1e-4, 1e-15);                                                     // the end
  EXPECT_NEAR(cosine.lr(251), 1e-4 + 1.9e-3 * 0.5 * (1 + std::cos(M_PI / 4)), 1e-15);
  EXPECT_GT(cosine.lr(10), cosine.lr(11));  // decays from the end of the warm-up on
  c.schedule = cfg::Schedule::linear;
  const LrSchedule linear(c, 256);
  EXPECT_NEAR(linear.lr(251), 1e-4 + 1.9e-3 * 0.75, 1e-15);
  EXPECT_NEAR(linear.lr(1001), 1e-4, 1e-15);
  EXPECT_NEAR(linear.lr(2000), 1e-4, 1e-15);  // past the budget (a resumed run with more steps): min_lr

  // A wall-clock budget: the share of max_minutes spent, or of max_steps when that is further on.
  c.max_steps = 0;
  c.max_minutes = 10;
  c.min_lr = 0;
  const LrSchedule timed(c, 256);
  EXPECT_NEAR(timed.progress(20, 150), 0.25, 1e-15);
  EXPECT_NEAR(timed.lr(20, 1, 150), 2e-3 * 0.75, 1e-15);
  EXPECT_NEAR(timed.lr(20, 1, 600), 0, 1e-15);
  EXPECT_NEAR(timed.lr(20, 1, 0), 2e-3, 1e-15);
  c.max_steps = 40;
  EXPECT_NEAR(LrSchedule(c, 256).progress(20, 150), 0.5, 1e-15);  // steps ahead of the clock
  EXPECT_NEAR(LrSchedule(c, 256).progress(10, 300), 0.5, 1e-15);  // the clock ahead of the steps
}

TEST(Schedule, CooldownTakesAnyScheduleLinearlyToZeroOverTheBudgetsLastShare) {
  cfg::TrainConfig c;
  c.schedule = cfg::Schedule::noam;
  c.lr_factor = 1.5;
  c.warmup_steps = 100;
  c.max_minutes = 60;
  const LrSchedule noam(c, 256);
  c.cooldown = 0.2;  // the last 12 minutes
  const LrSchedule cooled(c, 256);
  // Before the cool-down: the schedule itself, at any step.
  EXPECT_EQ(cooled.lr(50, 1, 0), noam.lr(50, 1, 0));
  EXPECT_EQ(cooled.lr(2000, 1, 47.9 * 60), noam.lr(2000, 1, 47.9 * 60));
  // In it: the schedule's rate times the share of the cool-down still to go, reaching zero at the deadline.
  EXPECT_NEAR(cooled.lr(2000, 1, 54 * 60), noam.lr(2000, 1, 54 * 60) * 0.5, 1e-15);
  EXPECT_NEAR(cooled.lr(2000, 1, 57 * 60), noam.lr(2000, 1, 57 * 60) * 0.25, 1e-15);
  EXPECT_NEAR(cooled.lr(2300, 1, 60 * 60), 0, 1e-15);
  EXPECT_NEAR(cooled.lr(2300, 1, 61 * 60), 0, 1e-15);  // past the deadline (the update that crosses it)
  EXPECT_GT(noam.lr(2300, 1, 60 * 60), 1e-3);          // Noam alone is still high there

  // A step budget: the steps' share; with both, whichever is further on (as the decaying schedules).
  c.max_minutes = 0;
  c.max_steps = 1000;
  c.cooldown = 0.5;
  EXPECT_NEAR(LrSchedule(c, 256).lr(751), noam.lr(751) * 0.5, 1e-15);
  EXPECT_EQ(LrSchedule(c, 256).lr(501), noam.lr(501));
  c.schedule = cfg::Schedule::constant;
  c.lr = 1e-3;
  c.warmup_steps = 0;
  EXPECT_NEAR(LrSchedule(c, 256).lr(901), 2e-4, 1e-15);
}

// Update number s takes the rate at its start (s - 1 updates done): the last update of a step budget still
// learns, under a cool-down and under cosine/linear decay to zero; the first update past the budget would not.
TEST(Schedule, TheLastUpdateOfAStepBudgetLearns) {
  cfg::TrainConfig c;
  c.max_steps = 100;
  c.warmup_steps = 0;
  c.lr = 1e-3;
  c.min_lr = 0;
  for (const auto schedule : {cfg::Schedule::constant, cfg::Schedule::cosine, cfg::Schedule::linear}) {
    c.schedule = schedule;
    c.cooldown = schedule == cfg::Schedule::constant ? 0.25 : 0;
    const LrSchedule s(c, 256);
    EXPECT_EQ(s.lr(1), 1e-3) << cfg::to_string(schedule);  // the first update: the full rate
    EXPECT_GT(s.lr(100), 0) << cfg::to_string(schedule);   // the last one
    EXPECT_GT(s.lr(99), s.lr(100)) << cfg::to_string(schedule);
    EXPECT_NEAR(s.lr(101), 0, 1e-18) << cfg::to_string(schedule);
  }
  c.schedule = cfg::Schedule::constant;
  c.cooldown = 0.25;
  EXPECT_NEAR(LrSchedule(c, 256).lr(100), 1e-3 * 0.01 / 0.25, 1e-15);  // 1 of the cool-down's 25 updates to go
}
