// Self-contained checkpoints: a model bundle (bundle/bundle.h: weights, resolved config, tokenizer models
// and special ids) with the full training state (optimizer, schedule, step, epoch, batch sampler position, RNG, best
// metric, patience). Written atomically; a checkpoint with non-finite weights is never written.
#pragma once

#include <torch/optim/optimizer.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "mtx/bundle/bundle.h"
#include "mtx/config/config.h"
#include "mtx/data/batch_sampler.h"
#include "mtx/model/transformer.h"
#include "mtx/tokenizer/tokenizer.h"

namespace mtx::train {

// Everything the training loop's decisions depend on, as of one moment (see train/scheduler.h).
struct TrainState {
  int64_t step = 0;              // updates done
  int64_t epoch = 1;             // current epoch (from 1): always position.epoch once a batch was drawn
  data::BatchPosition position;  // next training batch
  int64_t tgt_tokens = 0;        // target tokens trained on so far
  double elapsed_s = 0;          // training wall-clock so far
  double best_metric = std::numeric_limits<double>::infinity();  // best validation metric (inf: none yet)
  int64_t best_step = 0;
  int bad_validations = 0;  // early stopping counter
  nlohmann::json schedule = nlohmann::json::object();
  double epoch_nll = 0;  // this epoch's training nll sum and target tokens so far
  int64_t epoch_tokens = 0;
  int64_t last_validation_step = -1;  // the update of the last counted validation (-1: none)
  double last_val_loss = std::numeric_limits<double>::quiet_NaN();  // its results (NaN: none)
  double last_val_ppl = std::numeric_limits<double>::quiet_NaN();
  double last_val_bleu = std::numeric_limits<double>::quiet_NaN();
  int64_t world_size = 1;  // ranks the run trained on (an update took accum_steps x world_size batches)
};

nlohmann::json to_json(const TrainState& state);
TrainState train_state_from_json(const nlohmann::json& j);

struct CheckpointContent {
  config::Config config;
  std::optional<tokenizer::Tokenizer> tokenizer;
  model::Transformer model{nullptr};
  TrainState state;
  std::string weights_sha256;
  std::filesystem::path path;   // where it was read from (named in errors)
  std::string optimizer_bytes;  // optimizer state as saved, checked against mtx_sha256 (empty: none or older file)
  // The whole archive (older files keep their optimizer state here); restore with restore_optimizer().
  std::shared_ptr<torch::serialize::InputArchive> archive;
};

// Writes `path` atomically. Throws Error (and writes nothing) if any weight is NaN/Inf.
void save_checkpoint(const std::filesystem::path& path, const config::Config& config,
                     const tokenizer::Tokenizer& tokenizer, model::Transformer& model,
                     torch::optim::Optimizer* optimizer, const TrainState& state);

// Reads a checkpoint and rebuilds its model on `device` (weights loaded). Throws DataError naming
// the file when it is missing or not an mtx checkpoint.
// What `mtx info --ckpt` prints and mtx.load_info returns: parameters, training state (null for a model file
// without it: mtx import's, mtx quantize's), weights sha256, tokenizer and config. Verifies the file as loading does.
nlohmann::json describe_checkpoint(const std::filesystem::path& path);

CheckpointContent load_checkpoint(const std::filesystem::path& path,
                                  const torch::Device& device = torch::Device(torch::kCPU));

// Loads the optimizer state saved in `content` into `optimizer` (same parameters, same order).
void restore_optimizer(const CheckpointContent& content, torch::optim::Optimizer& optimizer);
// Restores torch's CPU (and CUDA, when saved and available) random generator state.
void restore_rng(const CheckpointContent& content);

// The bundle's model helpers, for training code and its tests.
using bundle::build_model;
using bundle::weights_finite;
using bundle::weights_sha256;

}  // namespace mtx::train
