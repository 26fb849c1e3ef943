#include "run_log.h"

#include <algorithm>

#include "mtx/util/atomic_file.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtx::train {
namespace {

// Replaces metrics.jsonl (atomically) by its rows up to `step` and returns the loss curves they hold.
void load_metrics(const fs::path& path, int64_t step, std::vector<CurvePoint>& train, std::vector<CurvePoint>& valid) {
  if (!fs::exists(path)) return;
  std::ifstream in(path);
  std::string line, kept;
  auto point = [](const json& row, const char* key, std::vector<CurvePoint>& curve) {
    const auto it = row.find(key);
    if (it != row.end() && it->is_number()) curve.push_back({row["step"].get<double>(), it->get<double>()});
  };
  while (std::getline(in, line)) {
    json row;
    try {
      row = json::parse(line);
    } catch (const json::exception&) {
      continue;  // a torn last line of a killed run
    }
    if (!row.is_object() || !row.contains("step") || !row["step"].is_number_integer()) continue;
    if (row["step"].get<int64_t>() > step) continue;
    kept += line + "\n";
    if (row.value("type", "") == "train") point(row, "nll", train);
    if (row.value("type", "") == "valid") point(row, "val_loss", valid);
  }
  in.close();
  write_file_atomic(path, kept);
}

}  // namespace

RunLog::RunLog(const fs::path& run_dir, bool writer, bool resumed, int64_t step) : run_dir_(run_dir), writer_(writer) {
  if (!writer_) return;
  const fs::path path = run_dir / "metrics.jsonl";
  if (resumed) {
    load_metrics(path, step, train_, valid_);
  } else {
    fs::remove(path);
  }
  metrics_.open(path, std::ios::app);
}

void RunLog::train(const json& row, double nll) {
  if (!writer_) return;
  metrics_ << row.dump() << std::endl;
  train_.push_back({row["step"].get<double>(), nll});
}

void RunLog::valid(const json& row, double loss, const std::string& title) {
  if (!writer_) return;
  valid_.push_back({row["step"].get<double>(), loss});
  metrics_ << row.dump() << std::endl;
  draw(title);
}

void RunLog::row(const json& row) {
  if (writer_) metrics_ << row.dump() << std::endl;
}

void RunLog::draw(const std::string& title) {
  if (writer_) write_curve_svg(run_dir_ / "curve.svg", train_, valid_, title);
}

std::vector<std::pair<int64_t, fs::path>> step_checkpoints(const fs::path& run_dir) {
  std::vector<std::pair<int64_t, fs::path>> steps;
  for (const auto& e : fs::directory_iterator(run_dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() <= 8 || name.rfind("step-", 0) != 0 || e.path().extension() != ".pt") continue;
    const std::string digits = name.substr(5, name.size() - 8);
    if (digits.size() > 18 ||
        !std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      continue;
    }
    steps.emplace_back(std::stoll(digits), e.path());
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

}  // namespace mtx::train
