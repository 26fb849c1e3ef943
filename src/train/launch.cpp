#include "mtx/train/launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include "mtx/util/errors.h"
#include "mtx/util/logging.h"
#include "mtx/util/strings.h"

namespace mtx::train {
namespace {

constexpr int kMaxRanks = 1024;
std::atomic<pid_t> g_children[kMaxRanks];
std::atomic<int> g_nchildren{0};
std::atomic<int> g_user_signal{0};

void kill_all(int sig) {
  const int n = g_nchildren.load();
  for (int i = 0; i < n; ++i) {
    const pid_t p = g_children[i].load();
    if (p > 0) ::kill(p, sig);
  }
}

// Forwards SIGINT/SIGTERM to every rank (async-signal-safe: kill only); the ranks stop after their update.
void forward(int sig) {
  g_user_signal.store(sig);
  kill_all(sig);
}

int free_port(const std::string& addr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(std::string("socket(): ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  if (inet_pton(AF_INET, addr.c_str(), &a.sin_addr) != 1) {
    ::close(fd);
    throw ConfigError("--nproc: master address '" + addr + "' is not an IPv4 address");
  }
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(std::string("--nproc: no free port on ") + addr + ": " + std::strerror(err));
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string describe(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return "ended";
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

int run_local_ranks(const LaunchOptions& o) {
  if (o.nproc < 1 || o.nproc > kMaxRanks) throw ConfigError(fmt::format("--nproc: must be in [1, {}]", kMaxRanks));
  g_user_signal.store(0);
  const int port = o.master_port > 0 ? o.master_port : free_port(o.master_addr);
  std::vector<std::string> argv = o.argv;
  if (argv.empty()) argv.push_back("mtx");
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);

  struct sigaction sa {};
  sa.sa_handler = forward;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  std::vector<pid_t> pids(size_t(o.nproc), -1);
  std::vector<int> status(size_t(o.nproc), 0);
  std::vector<bool> done(size_t(o.nproc), false);
  for (int r = 0; r < o.nproc; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      kill_all(SIGTERM);
      throw Error(std::string("--nproc: fork(): ") + std::strerror(errno));
    }
    if (pid == 0) {
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      // Its own process group: a Ctrl-C reaches the launcher only, which forwards it once (a rank stops at
      // its second signal). And it goes down with the launcher.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() == 1) std::_Exit(143);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(o.nproc).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(o.nproc).c_str(), 1);
      setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::execv("/proc/self/exe", cargv.data());
      std::fprintf(stderr, "mtx: error: --nproc: exec of rank %d failed: %s\n", r, std::strerror(errno));
      std::_Exit(127);
    }
    pids[size_t(r)] = pid;
    g_children[r].store(pid);
    g_nchildren.store(r + 1);
  }
  std::vector<std::string> pid_text;
  for (const pid_t p : pids) pid_text.push_back(std::to_string(p));
  log::info("started {} ranks on {}:{} (pids {})", o.nproc, o.master_addr, port, join(pid_text, ", "));

  int failed = -1;  // the rank that failed first
  int remaining = o.nproc;
  using Clock = std::chrono::steady_clock;
  Clock::time_point deadline{};
  bool terminated = false, killed = false;
  while (remaining > 0) {
    int st = 0;
    const pid_t pid = ::waitpid(-1, &st, failed >= 0 ? WNOHANG : 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;  // ECHILD: none left
    }
    if (pid > 0) {
      for (int r = 0; r < o.nproc; ++r) {
        if (pids[size_t(r)] != pid) continue;
        done[size_t(r)] = true;
        status[size_t(r)] = st;
        g_children[r].store(-1);
        --remaining;
        const bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (!ok && failed < 0 && g_user_signal.load() == 0) {
          failed = r;
          deadline = Clock::now() + std::chrono::milliseconds(int64_t(o.timeout_s * 1000));
          log::error("rank {} (pid {}) {}; waiting up to {} s (train.dist_timeout_s) for the other ranks to stop", r,
                     pid, describe(st), o.timeout_s);
        }
      }
      continue;
    }
    // A rank failed and others still run: they stop by themselves when their collectives fail; past the
    // timeout they are terminated, and killed 5 s later.
    const auto now = Clock::now();
    if (!terminated && now > deadline) {
      log::error("{} rank(s) still running {} s after rank {} failed: terminating them", remaining, o.timeout_s,
                 failed);
      kill_all(SIGTERM);
      terminated = true;
    } else if (terminated && !killed && now > deadline + std::chrono::seconds(5)) {
      kill_all(SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  g_nchildren.store(0);
  if (const int sig = g_user_signal.exchange(0); sig != 0 && failed < 0) {
    log::info("interrupted by signal {}: every rank saved and stopped", sig);
    return sig == SIGINT ? kExitInterrupted : sig == SIGTERM ? kExitTerminated : 128 + sig;
  }
  if (failed < 0) return 0;
  std::vector<std::string> others;
  for (int r = 0; r < o.nproc; ++r) {
    if (r != failed) others.push_back(fmt::format("rank {} {}", r, describe(status[size_t(r)])));
  }
  log::error("rank {} failed first ({}); {}", failed, describe(status[size_t(failed)]), join(others, ", "));
  return exit_code(status[size_t(failed)]);
}

}  // namespace mtx::train
