// The records of a run directory: metrics.jsonl (one JSON row per log window, validation, stop, average and
// test), the loss curves it holds drawn into curve.svg, and the step-N.pt checkpoints kept. Only rank 0
// writes; on other ranks a RunLog does nothing. Private to train/.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "mtx/train/curve.h"

namespace mtx::train {

class RunLog {
 public:
  // A new run starts metrics.jsonl afresh; a resumed one keeps its rows up to `step` (the update it resumes
  // at) and their curves.
  RunLog(const std::filesystem::path& run_dir, bool writer, bool resumed, int64_t step);

  // A "train" row; `nll` is its point on the training curve.
  void train(const nlohmann::json& row, double nll);
  // A counted validation's "valid" row; `loss` is its point on the validation curve. Redraws curve.svg.
  void valid(const nlohmann::json& row, double loss, const std::string& title);
  // Any other row ("final", "average", "average_pick", "test").
  void row(const nlohmann::json& row);
  // Draws curve.svg from the curves so far.
  void draw(const std::string& title);

 private:
  std::filesystem::path run_dir_;
  bool writer_;
  std::ofstream metrics_;
  std::vector<CurvePoint> train_, valid_;
};

// The run's step-<N>.pt files (N digits only; other files are the user's), oldest first, with their N.
std::vector<std::pair<int64_t, std::filesystem::path>> step_checkpoints(const std::filesystem::path& run_dir);

}  // namespace mtx::train
