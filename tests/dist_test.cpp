// Data-parallel training (train/dist.h, mtx train --nproc): torchrun's variables, the collectives and the
// gradient reducer over real Gloo groups (ranks as threads of this process), a failing rank, and world-size
// invariance end to end: 2 ranks give the weights of 1 process accumulating 2 batches.
#include "mtx/train/dist.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <map>
#include <thread>

#include "mtx/train/checkpoint.h"
#include "mtx/util/errors.h"
#include "test_utils.h"

namespace fs = std::filesystem;
using mtx::train::dist::Env;
using mtx::train::dist::GradientReducer;
using mtx::train::dist::Group;

namespace {

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Sets environment variables for the scope (unset: nullptr), restoring them after.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, const char*>& vars) {
    for (const auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_[k] = old ? std::optional<std::string>(old) : std::nullopt;
      if (v)
        setenv(k.c_str(), v, 1);
      else
        unsetenv(k.c_str());
    }
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : saved_) {
      if (v)
        setenv(k.c_str(), v->c_str(), 1);
      else
        unsetenv(k.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// Runs `body(group)` on `world` ranks, each a thread with its own Gloo group on loopback; returns each rank's error
// (setup or body), empty where none.
std::vector<std::string> ranks_errors(int world, const std::function<void(Group&)>& body,
                                      std::chrono::milliseconds timeout) {
  const int port = free_port();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        Env e;
        e.rank = r;
        e.world_size = world;
        e.master_addr = "127.0.0.1";
        e.master_port = port;
        Group g(e, torch::Device(torch::kCPU), timeout);
        body(g);
      } catch (const std::exception& ex) {
        errors[size_t(r)] = ex.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// ranks_errors, expecting none.
void on_ranks(int world, const std::function<void(Group&)>& body,
              std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const std::vector<std::string> errors = ranks_errors(world, body, timeout);
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
}

}  // namespace

TEST(Dist, ReadsTorchrunsVariables) {
  {
    ScopedEnv env({{"WORLD_SIZE", nullptr}, {"RANK", nullptr}});
    EXPECT_FALSE(mtx::train::dist::env_from_environment());
  }
  {
    ScopedEnv env({{"WORLD_SIZE", "1"}, {"RANK", "0"}});
    EXPECT_FALSE(mtx::train::dist::env_from_environment()) << "one rank is a single process";
  }
  {
    ScopedEnv env({{"WORLD_SIZE", "4"},
                   {"RANK", "3"},
                   {"LOCAL_RANK", "1"},
                   {"LOCAL_WORLD_SIZE", "2"},
                   {"MASTER_ADDR", "10.0.0.1"},
                   {"MASTER_PORT", "29511"}});
    const auto e = mtx::train::dist::env_from_environment();
    ASSERT_TRUE(e);
    EXPECT_EQ(e->rank, 3);
    EXPECT_EQ(e->world_size, 4);
    EXPECT_EQ(e->local_rank, 1);
    EXPECT_EQ(e->local_world_size, 2);
    EXPECT_EQ(e->master_addr, "10.0.0.1");
    EXPECT_EQ(e->master_port, 29511);
  }
  auto error = [](const std::map<std::string, const char*>& vars) {
    ScopedEnv env(vars);
    return mtx::test::boundary_error<mtx::ConfigError>([] { mtx::train::dist::env_from_environment(); });
  };
  EXPECT_NE(error({{"WORLD_SIZE", "2"}, {"RANK", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}).find("RANK=2"),
            std::string::npos);
  EXPECT_NE(
      error({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", nullptr}}).find("MASTER_PORT"),
      std::string::npos);
  EXPECT_NE(error({{"WORLD_SIZE", "two"}, {"RANK", "0"}}).find("WORLD_SIZE=two"), std::string::npos);
  EXPECT_NE(error({{"WORLD_SIZE", nullptr}, {"RANK", "1"}}).find("WORLD_SIZE"), std::string::npos);
}

TEST(Dist, BatchSeedsDependOnTheUpdateAndTheBatchOnly) {
  using mtx::train::dist::batch_seed;
  EXPECT_EQ(batch_seed(1, 7, 3), batch_seed(1, 7, 3));
  EXPECT_NE(batch_seed(1, 7, 3), batch_seed(1, 7, 2));
  EXPECT_NE(batch_seed(1, 7, 3), batch_seed(1, 8, 3));
  EXPECT_NE(batch_seed(1, 7, 3), batch_seed(2, 7, 3));
  EXPECT_NE(batch_seed(1, 1, 0), batch_seed(1, 0, 1)) << "update and index are not interchangeable";
}

TEST(Dist, CollectivesOverGloo) {
  on_ranks(3, [](Group& g) {
    EXPECT_STREQ(g.backend(), "gloo");
    std::vector<double> s{double(g.rank()), 1.5};
    g.sum(s);
    EXPECT_EQ(s, (std::vector<double>{3, 4.5}));
    std::vector<double> m{double(g.rank()), -double(g.rank())};
    g.max(m);
    EXPECT_EQ(m, (std::vector<double>{2, 0}));
    std::vector<double> b{g.rank() == 1 ? 42.0 : 0.0, g.rank() == 1 ? std::nan("") : 1.0};
    g.broadcast(b, 1);
    EXPECT_EQ(b[0], 42.0);
    EXPECT_TRUE(std::isnan(b[1]));
    const auto all = g.all_gather(torch::full({2}, float(g.rank() * 10)));
    ASSERT_EQ(all.size(), 3u);
    for (int r = 0; r < 3; ++r) EXPECT_TRUE(torch::equal(all[size_t(r)], torch::full({2}, float(r * 10))));
  });
}

// What autograd accumulates in one process over the ranks' batches, in rank order, against the ranks' reduced
// gradients: bit for bit with the ordered reduction at any world size, and with the ring at 2 ranks.
TEST(Dist, ReducedGradientsAreWhatOneProcessAccumulates) {
  // The ranks are threads here: each draws from its own generator, never from torch's global one.
  auto loss_of = [](const std::vector<torch::Tensor>& params, int batch) {
    const torch::Tensor x = torch::randn({5, 7}, at::detail::createCPUGenerator(uint64_t(100 + batch)));
    // Uneven magnitudes, so that the order of a float sum shows.
    return (x.matmul(params[0]).tanh() * 1e3).sum() + (params[1] * x.sum() * std::pow(10.0, batch)).sum();
  };
  auto make_params = [] {
    const at::Generator gen = at::detail::createCPUGenerator(7);
    return std::vector<torch::Tensor>{torch::randn({7, 3}, gen).requires_grad_(),
                                      torch::randn({1000}, gen).requires_grad_()};
  };
  for (const bool ordered : {true, false}) {
    for (const int ranks : {2, 3}) {
      std::vector<torch::Tensor> single = make_params();
      for (int b = 0; b < ranks; ++b) loss_of(single, b).backward();
      std::vector<std::vector<torch::Tensor>> got(static_cast<size_t>(ranks));
      on_ranks(ranks, [&](Group& g) {
        std::vector<torch::Tensor> params = make_params();
        loss_of(params, g.rank()).backward();
        GradientReducer reducer(params, g, /*bucket_bytes=*/1024, ordered);  // several buckets
        EXPECT_GE(reducer.buckets(), 2);
        reducer.reduce();
        for (const auto& p : params) got[size_t(g.rank())].push_back(p.grad().clone());
      });
      for (int r = 0; r < ranks; ++r) {
        ASSERT_EQ(got[size_t(r)].size(), 2u);
        for (size_t i = 0; i < 2; ++i) {
          EXPECT_TRUE(torch::equal(got[size_t(r)][i], got[0][i])) << "every rank holds the same gradient";
          if (ordered || ranks == 2) {
            EXPECT_TRUE(torch::equal(got[size_t(r)][i], single[i].grad()))
                << (ordered ? "ordered" : "ring") << ", " << ranks << " ranks, parameter " << i << ": max diff "
                << (got[size_t(r)][i] - single[i].grad()).abs().max().item<float>();
          }
        }
      }
    }
  }
}

namespace {

// One run of the scenario on a fresh port (ranks_errors): rank 1 joins, waits until rank 0 has joined too, then
// leaves (or hangs, never joining the collective); rank 0 then sums. A rank's setup error comes back as text
// (setup): the test then fails saying so instead of aborting the binary.
struct PeerRun {
  std::string setup;  // a rank's setup error, or empty
  std::string error;  // rank 0's error from the sum
  double waited = 0;  // seconds rank 0's sum took
};

PeerRun run_with_a_peer_that_leaves(bool hang) {
  PeerRun out;
  std::promise<void> joined;  // rank 0's group is built
  const std::shared_future<void> rank0_joined = joined.get_future().share();
  const std::vector<std::string> errors = ranks_errors(
      2,
      [&](Group& g) {
        if (g.rank() == 1) {
          rank0_joined.wait_for(std::chrono::seconds(10));
          if (hang) std::this_thread::sleep_for(std::chrono::seconds(4));  // never joins the collective
          return;
        }
        joined.set_value();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const auto t0 = std::chrono::steady_clock::now();
        try {
          std::vector<double> v{1};
          g.sum(v);
        } catch (const mtx::Error& ex) {
          out.error = ex.what();
        }
        out.waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      },
      std::chrono::seconds(2));
  for (size_t r = 0; r < errors.size() && out.setup.empty(); ++r) {
    if (!errors[r].empty()) out.setup = "rank " + std::to_string(r) + ": " + errors[r];
  }
  return out;
}

}  // namespace

TEST(Dist, ARankThatLeavesOrHangsFailsTheOthersWithinTheTimeout) {
  for (const bool hang : {false, true}) {
    PeerRun r;
    // The port free_port found may be taken by another process (tests run side by side) before rank 0 binds it:
    // the rendezvous then fails, and a fresh port is tried.
    for (int attempt = 0; attempt < 3; ++attempt) {
      r = run_with_a_peer_that_leaves(hang);
      if (r.setup.find("rendezvous") == std::string::npos) break;
    }
    ASSERT_EQ(r.setup, "") << (hang ? "hung" : "gone") << " peer: a rank's setup failed";
    EXPECT_NE(r.error.find("rank 0: all-reduce (sum) over gloo failed"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("train.dist_timeout_s = 2"), std::string::npos) << r.error;
    EXPECT_LT(r.waited, 3.5) << (hang ? "hung" : "gone") << " peer: " << r.error;
  }
}

namespace {

std::string sha_of(const fs::path& ckpt) { return mtx::train::load_checkpoint(ckpt).weights_sha256; }

}  // namespace

// The check, on the toy corpus: 2 ranks x 1 thread with one batch each give the weights of 1 process
// x 1 thread accumulating 2 batches (30 updates, across epoch ends where the second rank has no batch); a run
// resumes on another number of ranks when accum_steps x ranks stays; otherwise it says why not.
TEST(Dist, TwoRanksTrainTheWeightsOfOneProcessAccumulatingTwoBatches) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = mtx::test::toy_setup(tmp);
  c.train.max_epochs = 0;
  c.train.max_steps = 30;
  c.train.threads = 1;
  c.train.keep_last = 0;
  c.train.dist_timeout_s = 60;
  mtx::config::write_resolved(c, tmp / "toy.json");
  const std::string cfg = " --config " + (tmp / "toy.json").string();

  const auto one = mtx::test::run_mtx("train" + cfg + " --set train.accum_steps=2 --out " + (tmp / "one").string());
  ASSERT_EQ(one.code, 0) << one.output;
  const auto two = mtx::test::run_mtx("train" + cfg + " --nproc 2 --out " + (tmp / "two").string());
  ASSERT_EQ(two.code, 0) << two.output;
  EXPECT_NE(two.output.find("[rank 0/2] 2 ranks over gloo: 2 batches per update (1 per rank)"), std::string::npos)
      << two.output;
  EXPECT_NE(two.output.find("started 2 ranks on 127.0.0.1:"), std::string::npos) << two.output;
  EXPECT_EQ(sha_of(tmp / "two" / "last.pt"), sha_of(tmp / "one" / "last.pt"));
  EXPECT_NE(sha_of(tmp / "one" / "last.pt"), "");

  // Half the run on 2 ranks, the rest in one process with accum_steps 2: the same weights.
  const auto half =
      mtx::test::run_mtx("train" + cfg + " --nproc 2 --set train.max_steps=15 --out " + (tmp / "mixed").string());
  ASSERT_EQ(half.code, 0) << half.output;
  const auto bad = mtx::test::run_mtx("train --resume " + (tmp / "mixed").string());
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("the run took 2 batches per update (2 rank(s) x train.accum_steps 1)"), std::string::npos)
      << bad.output;
  const auto rest = mtx::test::run_mtx("train --resume " + (tmp / "mixed").string() +
                                       " --set train.accum_steps=2 --set train.max_steps=30");
  ASSERT_EQ(rest.code, 0) << rest.output;
  EXPECT_EQ(sha_of(tmp / "mixed" / "last.pt"), sha_of(tmp / "one" / "last.pt"));
}
