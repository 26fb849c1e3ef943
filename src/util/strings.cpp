#include "mtx/util/strings.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace mtx {

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t pos = text.find(sep, start);
    out.emplace_back(text.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string_view trim(std::string_view text) {
  const char* ws = " \t\r\n";
  const size_t b = text.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  const size_t e = text.find_last_not_of(ws);
  return text.substr(b, e - b + 1);
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_match(std::string_view name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::string::npos;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(name, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // Accept up to a third of the name's length in edits (at least 2), so typos match but
  // unrelated names do not.
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  return best_d <= limit ? best : std::string();
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates) {
  const std::string m = closest_match(name, candidates);
  return m.empty() ? std::string() : " (did you mean '" + m + "'?)";
}

std::string format_duration(double seconds) {
  char buf[64];
  if (seconds < 60) {
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  } else {
    const long s = std::lround(seconds);
    if (s < 3600)
      std::snprintf(buf, sizeof buf, "%ldm %02lds", s / 60, s % 60);
    else
      std::snprintf(buf, sizeof buf, "%ldh %02ldm %02lds", s / 3600, (s / 60) % 60, s % 60);
  }
  return buf;
}

}  // namespace mtx
