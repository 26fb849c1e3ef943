// The CPUs this process may use, as the operating system limits them: the affinity mask and the cgroup CPU
// quota (containers, systemd slices). No LibTorch.
#pragma once

#include <filesystem>
#include <string>

namespace mtx {

// The CPUs this process may use: the CPUs of its affinity mask, capped by the cgroup CPU quota (v2 cpu.max, or
// v1 cpu.cfs_quota_us / cpu.cfs_period_us, the tightest of the process's cgroup and its ancestors) rounded up;
// at least 1. A container given 2 CPUs on a 64-core host gets 2, not 64.
int usable_cpus();
// A cgroup quota as CPUs (fractional; 0 = no limit). v2: the content of cpu.max ("max 100000", "150000 100000");
// v1: the contents of cpu.cfs_quota_us ("-1" = none) and cpu.cfs_period_us. Malformed text means no limit.
double cgroup_v2_cpus(const std::string& cpu_max);
double cgroup_v1_cpus(const std::string& quota_us, const std::string& period_us);
// The tightest quota (CPUs; 0 = none) found for the cgroup paths listed in `proc_self_cgroup` (the content of
// /proc/self/cgroup) under the cgroup mount `root` (e.g. /sys/fs/cgroup), walking up to the root cgroup.
double cgroup_cpu_limit(const std::string& proc_self_cgroup, const std::filesystem::path& root);

}  // namespace mtx
