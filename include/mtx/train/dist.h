// Data-parallel training over LibTorch's own distributed engine (c10d): a process group joined from
// torchrun's variables (Gloo on CPU, NCCL on CUDA, rendezvous through c10d's TCPStore), the few
// collectives the training loop needs, and a bucketed gradient reducer.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mtx::train::dist {

// Where this process stands in a run of several: torchrun's variables.
struct Env {
  int rank = 0;              // RANK: 0 .. world_size-1; rank 0 validates and writes checkpoints
  int world_size = 1;        // WORLD_SIZE
  int local_rank = 0;        // LOCAL_RANK: rank on this machine (picks the GPU on CUDA)
  int local_world_size = 1;  // LOCAL_WORLD_SIZE: ranks on this machine (share its cores when train.threads = 0)
  std::string master_addr = "127.0.0.1";  // MASTER_ADDR: rank 0's host, serving the rendezvous store
  int master_port = 29500;                // MASTER_PORT
};

// The torchrun variables of this process: nullopt when WORLD_SIZE is unset or 1 (a single process).
// Throws ConfigError naming the variable when one is malformed or missing (RANK without WORLD_SIZE...).
std::optional<Env> env_from_environment();

// The seed of the random numbers (dropout masks) of one batch: a function of the run's seed, the update
// and the batch's index within the update over all ranks -- never of which process draws it. One process
// accumulating N batches and N ranks with one batch each draw the same masks.
uint64_t batch_seed(int64_t seed, int64_t update, int64_t batch_index);

// A joined process group. Every call is collective: all ranks make it, in the same order.
class Group {
 public:
  // Rendezvous (rank 0 serves a TCPStore at MASTER_ADDR:MASTER_PORT) and joins: Gloo for a CPU `device`,
  // NCCL for CUDA (LibTorch 2.x built with it). `timeout` bounds the rendezvous and every collective: a
  // rank that died or hangs makes the others fail with an Error within it.
  Group(const Env& env, const torch::Device& device, std::chrono::milliseconds timeout);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const { return env_.rank; }
  int size() const { return env_.world_size; }
  const char* backend() const;  // "gloo" | "nccl"

  // Element-wise sum / maximum of `values` over the ranks, in place (float64: counts, sums, times).
  void sum(std::vector<double>& values);
  void max(std::vector<double>& values);
  // Rank `root`'s `values` on every rank (same length everywhere).
  void broadcast(std::vector<double>& values, int root = 0);
  // Every rank's `local` (same shape everywhere), in rank order.
  std::vector<torch::Tensor> all_gather(const torch::Tensor& local);
  // Sum of `t` over the ranks, in place (ring all-reduce).
  void all_reduce(torch::Tensor& t);

  // Seconds spent in collectives since the last call (for the update's communication share).
  double take_comm_seconds();

 private:
  struct Impl;
  Env env_;
  std::unique_ptr<Impl> impl_;
};

// Sums the gradients of `params` over the ranks, in buckets of about `bucket_bytes` (one collective per
// bucket, not per parameter). An undefined gradient counts as zeros.
//   ordered = true: every rank's bucket is gathered and summed in rank order, so that N ranks with one
//     batch each reach bit for bit the gradient one process accumulates over the same N batches (autograd
//     adds them in that order); N/2 times the bytes of a ring all-reduce. At 2 ranks it is the all-reduce
//     (a sum of two numbers does not depend on their order).
//   ordered = false: ring all-reduce; identical on every rank, equal to the single process up to the order
//     of the sum for more than 2 ranks.
class GradientReducer {
 public:
  GradientReducer(std::vector<torch::Tensor> params, Group& group, int64_t bucket_bytes, bool ordered);
  void reduce();
  int64_t buckets() const { return int64_t(buckets_.size()); }
  int64_t bytes() const { return bytes_; }  // gradient bytes per rank per update

 private:
  std::vector<torch::Tensor> params_;
  Group& group_;
  bool ordered_;
  int64_t bytes_ = 0;
  std::vector<std::vector<size_t>> buckets_;  // parameter indices per bucket
};

}  // namespace mtx::train::dist
