#include "validator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "mtx/decode/translator.h"
#include "mtx/eval/metrics.h"
#include "mtx/train/dist.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/faults.h"
#include "mtx/util/logging.h"

namespace fs = std::filesystem;

namespace mtx::train {

Validator::Validator(const config::Config& config, TrainingData& data, const torch::Device& device, bool bf16,
                     dist::Group* group)
    : config_(config), data_(data), device_(device), bf16_(bf16), group_(group), writer_(!group || group->rank() == 0) {
  bleu_best_ = config.train.best_metric == config::BestMetric::bleu;
  want_bleu_ = bleu_best_ || config.train.val_bleu;
  metric_name_ = bleu_best_ ? "val. BLEU" : "val. loss";
  if (const data::PreparedData* pairs = data.translation()) {
    const auto& tok = data.tokenizer();
    for (size_t i = 0; i < pairs->valid->size(); ++i) {
      const auto r = pairs->valid->tgt[i];
      refs_.push_back(tok.tgt().decode(r.data, r.size));
    }
  }
}

std::string Validator::bleu_text(double bleu) const {
  return want_bleu_ ? fmt::format(" Val. BLEU: {:5.2f} |", bleu) : std::string();
}

Validation Validator::run(model::Transformer& model, int64_t step, bool share) {
  Validation v;
  if (writer_) {
    static_cast<decode::LossEvaluation&>(v) = data_.validation_loss(model, device_, bf16_);
    if (fault::fires("nan_val_loss", step)) v.loss = v.ppl = std::numeric_limits<double>::quiet_NaN();
    if (want_bleu_) {
      const auto hyps = translations(model, config_.train.val_bleu_beam);
      v.bleu = eval::corpus_score(*eval::make_bleu({}), hyps, {refs_}).score;
    }
  }
  if (group_ && share) {
    std::vector<double> x{v.loss, v.ppl, v.bleu, double(v.tokens)};
    group_->broadcast(x);
    v.loss = x[0], v.ppl = x[1], v.bleu = x[2], v.tokens = int64_t(x[3]);
  }
  return v;
}

std::vector<std::string> Validator::translations(model::Transformer& model, int beam) {
  const data::EncodedCorpus& corpus = *data_.translation()->valid;
  const tokenizer::Tokenizer& tok = data_.tokenizer();
  decode::TranslateOptions o = decode::options_from_config(config_.decode);
  o.search.beam = beam;
  o.search.nbest = 1;
  std::vector<std::vector<int32_t>> sources(corpus.size());  // a multilingual model's source code first
  for (size_t i = 0; i < corpus.size(); ++i) sources[i].assign(corpus.src[i].begin(), corpus.src[i].end());
  // ... and its target code forced first, as translating does.
  std::vector<decode::TargetControls> controls;
  if (!config_.data.tgt_code.empty()) {
    const int32_t code = tokenizer::language_id(tok.languages(), config_.data.tgt_code, "data.tgt_code");
    controls.assign(sources.size(), decode::TargetControls{{code}});
  }
  std::vector<std::vector<decode::Hypothesis>> hyps;
  {
    decode::Translator translator(model, tok, o);
    hyps = translator.translate_ids(sources, {}, {}, controls);
  }
  model->train();
  std::vector<std::string> out;
  out.reserve(hyps.size());
  for (const auto& h : hyps) out.push_back(h.empty() ? std::string() : tok.tgt().decode(h.front().tokens));
  return out;
}

void Validator::translate(model::Transformer& model, const fs::path& run_dir, int64_t step) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> hyps = translations(model, 1);
  std::string text;
  for (const auto& h : hyps) text += h + "\n";
  const fs::path path = run_dir / "translations" / fmt::format("val-step-{}.txt", step);
  fs::create_directories(path.parent_path());
  write_file_atomic(path, text);
  log::info("greedy translation of {} validation sentences in {:.1f} s: {}", hyps.size(),
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), path.string());
  for (size_t i = 0; i < std::min<size_t>(size_t(config_.train.translate_log_lines), hyps.size()); ++i) {
    log::info("  val {} | hyp: {}", i + 1, hyps[i]);
    log::info("  val {} | ref: {}", i + 1, refs_[i]);
  }
}

}  // namespace mtx::train
