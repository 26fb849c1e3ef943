// Small string helpers shared across components: splitting, trimming, edit distance and
// "did you mean" suggestions for unknown names, human-readable durations.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mtx {

std::vector<std::string> split(std::string_view text, char sep);
std::string_view trim(std::string_view text);
std::string join(const std::vector<std::string>& parts, std::string_view sep);

size_t edit_distance(std::string_view a, std::string_view b);
// The closest candidate within a small edit distance, or "" when none is close.
std::string closest_match(std::string_view name, const std::vector<std::string>& candidates);
// " (did you mean 'x'?)" or "".
std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates);

// "1h 02m 03s", "2m 05s", "7.3s"
std::string format_duration(double seconds);

}  // namespace mtx
