#include "training_data.h"

#include <fmt/format.h>

#include "mtx/data/lm_text.h"
#include "mtx/decode/lm.h"
#include "mtx/util/errors.h"

namespace mtx::train {
namespace {

using decode::LossEvaluation;

class TranslationData : public TrainingData {
 public:
  TranslationData(const config::Config& cfg, const data::PrepareOptions& prep)
      : cfg_(cfg),
        data_(data::prepare_data(cfg, prep)),
        ids_(data_.tokenizer.special_ids()),
        sampler_(data::BatchSampler::for_corpus(data_.train, sampler_options(cfg.train))) {
    if (!data_.valid) throw ConfigError("data.valid: training needs a validation split");
  }
  const tokenizer::Tokenizer& tokenizer() const override { return data_.tokenizer; }
  bool next(data::Batch& batch) override {
    if (!sampler_.next(indices_)) return false;
    batch = data::make_batch(data_.train, indices_, ids_);
    return true;
  }
  bool skip() override { return sampler_.next(indices_); }
  data::BatchPosition position() const override { return sampler_.position(); }
  void restore(data::BatchPosition position) override { sampler_.restore(position); }
  int64_t epoch_batches() override {
    const int64_t n = int64_t(sampler_.epoch_batches());
    if (n == 0) {
      throw DataError(
          fmt::format("data.train: no training pairs to train on ({} after the length filters); loosen "
                      "data.filter_min_tokens / data.filter_max_tokens / data.filter_max_ratio",
                      data_.train.size()));
    }
    return n;
  }
  std::string describe() const override { return fmt::format("{} pairs", data_.train.size()); }
  LossEvaluation validation_loss(model::Transformer& model, const torch::Device& device, bool bf16) override {
    return decode::evaluate_loss(model, *data_.valid, ids_, cfg_.train.max_tokens, device, bf16);
  }
  const data::PreparedData* translation() const override { return &data_; }

 private:
  static data::BatchSamplerOptions sampler_options(const config::TrainConfig& tc) {
    data::BatchSamplerOptions bo;
    bo.max_tokens = tc.max_tokens;
    bo.sort_window = tc.sort_window;
    bo.seed = uint64_t(tc.seed);
    return bo;
  }
  const config::Config& cfg_;
  data::PreparedData data_;
  tokenizer::SpecialIds ids_;
  data::BatchSampler sampler_;
  std::vector<uint32_t> indices_;
};

// The LM tutorial's data: train.batch_size streams read in windows of train.bptt, in order every epoch.
class LmData : public TrainingData {
 public:
  LmData(const config::Config& cfg, const data::PrepareOptions& prep)
      : cfg_(cfg),
        data_(data::prepare_lm_text(cfg, prep)),
        windows_(data_.train, cfg.train.batch_size, cfg.train.bptt, "data.train") {
    if (!data_.valid) throw ConfigError("data.valid: training needs a validation split");
    // Checked now, not at the first validation.
    data::BpttBatches(*data_.valid, cfg.train.eval_batch_size, cfg.train.bptt, "data.valid");
  }
  const tokenizer::Tokenizer& tokenizer() const override { return data_.tokenizer; }
  bool next(data::Batch& batch) override { return windows_.next(batch); }
  bool skip() override {
    data::Batch unused;
    return windows_.next(unused);
  }
  data::BatchPosition position() const override { return windows_.position(); }
  void restore(data::BatchPosition position) override { windows_.restore(position); }
  int64_t epoch_batches() override { return windows_.epoch_batches(); }
  std::string describe() const override {
    return fmt::format("{} tokens ({} in the vocabulary) in {} streams, bptt {}", data_.train.size(),
                       data_.tokenizer.tgt().vocab_size(), windows_.columns(), cfg_.train.bptt);
  }
  LossEvaluation validation_loss(model::Transformer& model, const torch::Device& device, bool) override {
    return from(decode::text_loss(model, *data_.valid, cfg_.train.eval_batch_size, cfg_.train.bptt, device));
  }
  std::optional<LossEvaluation> test_loss(model::Transformer& model, const torch::Device& device) override {
    if (!data_.test) return std::nullopt;
    return from(decode::text_loss(model, *data_.test, cfg_.train.eval_batch_size, cfg_.train.bptt, device));
  }

 private:
  static LossEvaluation from(const decode::TextLoss& s) {
    LossEvaluation v;
    v.loss = s.loss;
    v.ppl = s.ppl;
    v.tokens = s.tokens;
    return v;
  }
  const config::Config& cfg_;
  data::PreparedLmText data_;
  data::BpttBatches windows_;
};

}  // namespace

std::unique_ptr<TrainingData> make_training_data(const config::Config& config, const data::PrepareOptions& prep) {
  if (config.task == config::Task::lm) return std::make_unique<LmData>(config, prep);
  return std::make_unique<TranslationData>(config, prep);
}

}  // namespace mtx::train
