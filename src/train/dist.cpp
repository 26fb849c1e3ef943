#include "mtx/train/dist.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if defined(MTX_WITH_NCCL)
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/version.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "mtx/util/errors.h"
#include "mtx/util/logging.h"

namespace mtx::train::dist {
namespace {

// The c10d class both backends derive from: ProcessGroup in LibTorch 1.x, Backend from 2.0 on.
#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

int env_int(const char* name, int lo, int hi, std::optional<int> fallback) {
  const auto v = env(name);
  if (!v) {
    if (fallback) return *fallback;
    throw ConfigError(
        fmt::format("{} is not set: a distributed run needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT "
                    "(as torchrun sets them; mtx train --nproc N sets them for N local ranks)",
                    name));
  }
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v->c_str(), &end, 10);
  if (errno != 0 || end == v->c_str() || *end != '\0' || x < lo || x > hi) {
    throw ConfigError(fmt::format("{}={}: expected an integer in [{}, {}]", name, *v, lo, hi));
  }
  return int(x);
}

// The local address this host reaches `host` from (the interface Gloo should listen on): a connected UDP
// socket sends nothing, but the kernel picks its route and source address.
std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) {
    throw ConfigError(fmt::format("MASTER_ADDR={}: cannot resolve it to an IPv4 address", host));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) throw Error(fmt::format("socket(): {}", std::strerror(errno)));
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  const bool ok = ::connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) {
    throw ConfigError(fmt::format("MASTER_ADDR={}: no route to it from this host ({})", host, std::strerror(err)));
  }
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
  return text;
}

// Ends the process when the scope it guards has not finished within `limit` (for calls that can hang
// past their own timeout); one line on stderr says which rank and why.
class JoinWatchdog {
 public:
  JoinWatchdog(int rank, std::chrono::milliseconds limit) {
    thread_ = std::thread([this, rank, limit] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!done_cv_.wait_for(lock, limit, [this] { return done_; })) {
        std::fprintf(
            stderr,
            "%smtx: error: rank %d: joining the process group did not finish within %.0f s "
            "(train.dist_timeout_s + 5): a rank stopped while joining (see its log) or cannot reach this one\n",
            log::prefix().c_str(), rank, double(limit.count()) / 1000.0);
        std::fflush(stderr);
        std::_Exit(kExitFailure);
      }
    });
  }
  ~JoinWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

std::optional<Env> env_from_environment() {
  if (!env("WORLD_SIZE")) {
    if (env("RANK") && env("RANK") != std::optional<std::string>("0")) {
      throw ConfigError("RANK is set but WORLD_SIZE is not: set both (as torchrun does) or neither");
    }
    return std::nullopt;
  }
  Env e;
  e.world_size = env_int("WORLD_SIZE", 1, 65536, std::nullopt);
  if (e.world_size == 1) return std::nullopt;
  e.rank = env_int("RANK", 0, e.world_size - 1, std::nullopt);
  e.local_rank = env_int("LOCAL_RANK", 0, e.world_size - 1, e.rank);
  e.local_world_size = env_int("LOCAL_WORLD_SIZE", 1, e.world_size, 1);
  e.master_addr = env("MASTER_ADDR").value_or("");
  if (e.master_addr.empty()) env_int("MASTER_ADDR", 0, 0, std::nullopt);  // throws: not set
  e.master_port = env_int("MASTER_PORT", 1, 65535, std::nullopt);
  return e;
}

uint64_t batch_seed(int64_t seed, int64_t update, int64_t batch_index) {
  // splitmix64 over the three numbers in turn: neighbouring (update, index) pairs get unrelated seeds.
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  uint64_t h = mix(uint64_t(seed));
  h = mix(h ^ uint64_t(update));
  h = mix(h ^ uint64_t(batch_index));
  return h >> 1;  // torch::manual_seed takes any uint64; keep it positive for printing
}

struct Group::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<BackendBase> pg;
  torch::Device device{torch::kCPU};
  std::string backend;
  std::chrono::milliseconds timeout{0};
  double comm_seconds = 0;
  int64_t calls = 0;

  // Runs one collective and waits for it; a failure (a peer gone, a timeout) becomes an Error that says
  // which collective, on which rank, and what usually causes it.
  void run(const char* what, int rank, const std::function<c10::intrusive_ptr<c10d::Work>()>& start) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      auto work = start();
      work->wait();
    } catch (const std::exception& e) {
      std::string reason = e.what();
      if (const auto nl = reason.find('\n'); nl != std::string::npos) reason.resize(nl);
      throw Error(
          fmt::format("rank {}: {} over {} failed after {} collectives: {} -- another rank stopped (see its "
                      "log or the launcher's line naming it) or did not answer within train.dist_timeout_s = {} s",
                      rank, what, backend, calls, reason, timeout.count() / 1000.0));
    }
    ++calls;
    comm_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  // `values` reduced element-wise over the ranks with `op`, in place.
  void reduce(std::vector<double>& values, c10d::ReduceOp op, const char* what, int rank) {
    std::vector<torch::Tensor> t{to_tensor(values)};
    c10d::AllreduceOptions o;
    o.reduceOp = op;
    run(what, rank, [&] { return pg->allreduce(t, o); });
    from_tensor(t[0], values);
  }

  torch::Tensor to_tensor(const std::vector<double>& values) const {
    return torch::tensor(values, torch::dtype(torch::kFloat64)).to(device);
  }
  static void from_tensor(const torch::Tensor& t, std::vector<double>& values) {
    const torch::Tensor c = t.to(torch::kCPU).contiguous();
    std::memcpy(values.data(), c.data_ptr<double>(), values.size() * sizeof(double));
  }
};

Group::Group(const Env& env, const torch::Device& device, std::chrono::milliseconds timeout)
    : env_(env), impl_(std::make_unique<Impl>()) {
  impl_->device = device;
  impl_->timeout = timeout;
  c10d::TCPStoreOptions so;
  so.port = uint16_t(env.master_port);
  so.isServer = env.rank == 0;
  so.numWorkers = size_t(env.world_size);
  so.waitWorkers = true;
  so.timeout = timeout;
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
  } catch (const std::exception& e) {
    std::string reason = e.what();
    if (const auto nl = reason.find('\n'); nl != std::string::npos) reason.resize(nl);
    throw Error(
        fmt::format("rank {}: rendezvous at {}:{} failed within {} s: {} (rank 0 serves it: is it running, is "
                    "the port free and reachable?)",
                    env.rank, env.master_addr, env.master_port, timeout.count() / 1000.0, reason));
  }
  if (device.is_cuda()) {
#if defined(MTX_WITH_NCCL)
    c10::cuda::set_device(device.index());  // NCCL's communicators and streams live on this rank's GPU
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    impl_->pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, env.rank, env.world_size, options);
    impl_->backend = "nccl";
#else
    throw ConfigError(
        "train.device cuda with several ranks needs NCCL: this mtx was built against a LibTorch without "
        "it (build against PyPI's CUDA torch: scripts/build.sh --torch2)");
#endif
  } else {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    if (const auto ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    } else {
      options->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForHostname(local_address_towards(env.master_addr, env.master_port)));
    }
    options->threads = 2;
    // Gloo's full-mesh connect does not always honour the timeout (a rank that died while joining leaves the
    // others waiting for its connection): a watchdog ends this process then, saying why.
    JoinWatchdog watchdog(env.rank, timeout + std::chrono::seconds(5));
    try {
      impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, env.rank, env.world_size, options);
    } catch (const std::exception& e) {
      std::string reason = e.what();
      if (const auto nl = reason.find('\n'); nl != std::string::npos) reason.resize(nl);
      throw Error(fmt::format("rank {}: joining the Gloo group of {} failed: {}", env.rank, env.world_size, reason));
    }
    impl_->backend = "gloo";
  }
}

Group::~Group() = default;

const char* Group::backend() const { return impl_->backend.c_str(); }

void Group::sum(std::vector<double>& values) { impl_->reduce(values, c10d::ReduceOp::SUM, "all-reduce (sum)", rank()); }

void Group::max(std::vector<double>& values) { impl_->reduce(values, c10d::ReduceOp::MAX, "all-reduce (max)", rank()); }

void Group::broadcast(std::vector<double>& values, int root) {
  std::vector<torch::Tensor> t{impl_->to_tensor(values)};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  impl_->run("broadcast", rank(), [&] { return impl_->pg->broadcast(t, o); });
  Impl::from_tensor(t[0], values);
}

std::vector<torch::Tensor> Group::all_gather(const torch::Tensor& local) {
  std::vector<torch::Tensor> in{local.contiguous()};
  std::vector<std::vector<torch::Tensor>> out(1);
  for (int r = 0; r < size(); ++r) out[0].push_back(torch::empty_like(in[0]));
  impl_->run("all-gather", rank(), [&] { return impl_->pg->allgather(out, in); });
  return out[0];
}

void Group::all_reduce(torch::Tensor& t) {
  std::vector<torch::Tensor> v{t};
  impl_->run("all-reduce", rank(), [&] { return impl_->pg->allreduce(v); });
}

double Group::take_comm_seconds() {
  const double s = impl_->comm_seconds;
  impl_->comm_seconds = 0;
  return s;
}

GradientReducer::GradientReducer(std::vector<torch::Tensor> params, Group& group, int64_t bucket_bytes, bool ordered)
    : params_(std::move(params)), group_(group), ordered_(ordered) {
  int64_t in_bucket = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t b = params_[i].numel() * int64_t(params_[i].element_size());
    if (buckets_.empty() || (in_bucket > 0 && in_bucket + b > bucket_bytes)) {
      buckets_.emplace_back();
      in_bucket = 0;
    }
    buckets_.back().push_back(i);
    in_bucket += b;
    bytes_ += b;
  }
}

void GradientReducer::reduce() {
  torch::NoGradGuard no_grad;
  for (const auto& bucket : buckets_) {
    std::vector<torch::Tensor> parts;
    parts.reserve(bucket.size());
    for (const size_t i : bucket) {
      const torch::Tensor& p = params_[i];
      parts.push_back(p.grad().defined() ? p.grad().reshape(-1) : torch::zeros({p.numel()}, p.options()));
    }
    torch::Tensor flat = torch::cat(parts);  // [bucket numel]
    // Two addends sum the same in either order: at 2 ranks the ring all-reduce is already exact.
    if (ordered_ && group_.size() > 2) {
      const std::vector<torch::Tensor> all = group_.all_gather(flat);  // world × [bucket numel]
      flat = all[0].clone();
      for (size_t r = 1; r < all.size(); ++r) flat.add_(all[r]);  // ((g0 + g1) + g2) ...: autograd's order
    } else {
      group_.all_reduce(flat);
    }
    int64_t offset = 0;
    for (const size_t i : bucket) {
      torch::Tensor& p = params_[i];
      const torch::Tensor part = flat.narrow(0, offset, p.numel()).view_as(p);
      if (p.grad().defined())
        p.mutable_grad().copy_(part);
      else
        p.mutable_grad() = part.clone();
      offset += p.numel();
    }
  }
}

}  // namespace mtx::train::dist
