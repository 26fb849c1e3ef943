#include "mtx/util/faults.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "mtx/util/errors.h"

namespace mtx::fault {
namespace {

struct Point {
  std::string name;
  int64_t at = 0;
  bool any = true;
  bool spent = false;  // name@N fires once
};

std::mutex g_mutex;
std::vector<Point> g_points;  // guarded by g_mutex
std::atomic<bool> g_armed{false};
std::once_flag g_env_once;

std::vector<Point> parse(const std::string& spec) {
  std::vector<Point> points;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string item = spec.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    Point p;
    const size_t at = item.find('@');
    p.name = item.substr(0, at);
    if (at != std::string::npos) {
      char* end = nullptr;
      const std::string n = item.substr(at + 1);
      p.at = std::strtoll(n.c_str(), &end, 10);
      if (n.empty() || *end != '\0') throw ConfigError("MTX_FAULTS: '" + item + "' is not name@number");
      p.any = false;
    }
    points.push_back(std::move(p));
  }
  return points;
}

void set(std::vector<Point> points) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_points = std::move(points);
  g_armed.store(!g_points.empty());
}

void read_env() {
  std::call_once(g_env_once, [] {
    if (const char* env = std::getenv("MTX_FAULTS"); env && *env) set(parse(env));
  });
}

}  // namespace

void arm(const std::string& spec) {
  read_env();  // an explicit arm() wins over the environment, whatever the order
  set(parse(spec));
}

bool fires(std::string_view name, int64_t at) {
  read_env();
  if (!g_armed.load(std::memory_order_relaxed)) return false;
  std::lock_guard<std::mutex> lock(g_mutex);
  for (Point& p : g_points) {
    if (p.name != name || p.spent) continue;
    if (p.any) return true;
    if (p.at == at) {
      p.spent = true;
      return true;
    }
  }
  return false;
}

}  // namespace mtx::fault
