// mtx train --nproc N: starts N local ranks of this same command (as torchrun --standalone does), forwards
// SIGINT/SIGTERM to them, and fails as one: when a rank dies, the others get the collective timeout to stop
// by themselves, then are terminated; the message names the rank that failed first.
#pragma once

#include <string>
#include <vector>

namespace mtx::train {

struct LaunchOptions {
  std::vector<std::string> argv;  // the ranks' command line (argv[0] is replaced by this executable)
  int nproc = 2;                  // local ranks
  double timeout_s = 300;         // train.dist_timeout_s: how long the others may take to stop after a failure
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port on master_addr
};

// Runs the ranks to their end. Returns 0 when every rank succeeded, else the exit status of the rank
// that failed first (128 + signal for a killed one); logs which one and how the others ended.
int run_local_ranks(const LaunchOptions& options);

}  // namespace mtx::train
