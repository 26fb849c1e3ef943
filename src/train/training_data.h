// What the training loop trains and validates on, per task: pairs in token-budget batches (translation) or
// the windows of a token stream (lm), in a deterministic order with a resumable position. Private to train/.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "mtx/config/config.h"
#include "mtx/data/batch.h"
#include "mtx/data/batch_sampler.h"
#include "mtx/data/prepare.h"
#include "mtx/decode/scoring.h"
#include "mtx/model/transformer.h"
#include "mtx/tokenizer/tokenizer.h"

namespace mtx::train {

class TrainingData {
 public:
  virtual ~TrainingData() = default;
  virtual const tokenizer::Tokenizer& tokenizer() const = 0;
  // As BatchSampler::next: false once at an epoch's end.
  virtual bool next(data::Batch& batch) = 0;
  // Moves past the next batch without building it (another rank's share of an update).
  virtual bool skip() = 0;
  virtual data::BatchPosition position() const = 0;
  virtual void restore(data::BatchPosition position) = 0;
  virtual int64_t epoch_batches() = 0;
  virtual std::string describe() const = 0;  // for the start-up line
  virtual decode::LossEvaluation validation_loss(model::Transformer& model, const torch::Device& device, bool bf16) = 0;
  // The translation task's data (validation BLEU and translations); null for a language model.
  virtual const data::PreparedData* translation() const { return nullptr; }
  // A language model's loss on data.test, reported when training ends (the tutorial's last line).
  virtual std::optional<decode::LossEvaluation> test_loss(model::Transformer&, const torch::Device&) {
    return std::nullopt;
  }
};

// The data of `config`'s task, prepared (tokenizer trained or `prep.tokenizer` reused, corpus encoded and
// cached). Throws ConfigError when there is no validation split.
std::unique_ptr<TrainingData> make_training_data(const config::Config& config, const data::PrepareOptions& prep);

}  // namespace mtx::train
