#include "mtx/util/cpus.h"

#if defined(__linux__)
#include <sched.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

namespace mtx {

namespace {

// The number at the start of `text` (after blanks), or nullopt.
std::optional<double> leading_number(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

double cgroup_v2_cpus(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota, period;
  if (!(in >> quota >> period) || quota == "max") return 0;
  const auto q = leading_number(quota), p = leading_number(period);
  return q && p && *q > 0 && *p > 0 ? *q / *p : 0;
}

double cgroup_v1_cpus(const std::string& quota_us, const std::string& period_us) {
  const auto q = leading_number(quota_us), p = leading_number(period_us);
  return q && p && *q > 0 && *p > 0 ? *q / *p : 0;
}

double cgroup_cpu_limit(const std::string& proc_self_cgroup, const std::filesystem::path& root) {
  double limit = 0;
  auto take = [&](double cpus) {
    if (cpus > 0 && (limit == 0 || cpus < limit)) limit = cpus;
  };
  std::istringstream lines(proc_self_cgroup);
  for (std::string line; std::getline(lines, line);) {
    // "hierarchy-id:controllers:path"; v2's unified hierarchy has id 0 and no controllers.
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::filesystem::path path = std::filesystem::path(line.substr(b + 1)).relative_path();
    const bool v2 = controllers.empty();
    bool cpu = v2;
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');) cpu |= name == "cpu";
    if (!cpu) continue;
    // The mount of a v1 controller is named after its controllers ("cpu,cpuacct") or "cpu" alone.
    std::vector<std::filesystem::path> mounts;
    if (v2) {
      mounts = {root, root / "unified"};
    } else {
      mounts = {root / controllers, root / "cpu"};
    }
    for (const auto& mount : mounts) {
      // The process's cgroup and each ancestor: every level's quota applies. Inside a container the listed
      // path may not exist under the mount, which then is the container's own cgroup: its root is read too.
      for (std::filesystem::path p = path;; p = p.parent_path()) {
        const std::filesystem::path dir = mount / p;
        if (v2) {
          if (std::filesystem::exists(dir / "cpu.max")) take(cgroup_v2_cpus(file_text(dir / "cpu.max")));
        } else if (std::filesystem::exists(dir / "cpu.cfs_quota_us")) {
          take(cgroup_v1_cpus(file_text(dir / "cpu.cfs_quota_us"), file_text(dir / "cpu.cfs_period_us")));
        }
        if (p.empty()) break;
      }
    }
  }
  return limit;
}

int usable_cpus() {
  int cpus = int(std::max(1u, std::thread::hardware_concurrency()));
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = std::max(1, CPU_COUNT(&set));
  const double limit = cgroup_cpu_limit(file_text("/proc/self/cgroup"), "/sys/fs/cgroup");
  if (limit > 0) cpus = std::min(cpus, std::max(1, int(std::ceil(limit - 1e-9))));
#endif
  return cpus;
}

}  // namespace mtx
