// A self-contained SVG chart of training and validation loss against updates, for a person to open.
#pragma once

#include <filesystem>
#include <utility>
#include <vector>

namespace mtx::train {

struct CurvePoint {
  double step;
  double value;
};

// Writes `path` atomically; an empty series is left out.
void write_curve_svg(const std::filesystem::path& path, const std::vector<CurvePoint>& train_loss,
                     const std::vector<CurvePoint>& valid_loss, const std::string& title);

}  // namespace mtx::train
