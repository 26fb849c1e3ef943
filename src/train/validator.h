// Validation during training: loss and perplexity on the validation split, BLEU (cased sacreBLEU 13a) of its
// translations when wanted, and the greedy translations written every train.translate_every updates. Rank 0
// validates; the others receive its results, so every rank's scheduler takes the same decisions. Private to
// train/.
#pragma once

#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "mtx/config/config.h"
#include "mtx/decode/scoring.h"
#include "mtx/model/transformer.h"
#include "training_data.h"

namespace mtx::train {

namespace dist {
class Group;
}

struct Validation : decode::LossEvaluation {
  double bleu = std::numeric_limits<double>::quiet_NaN();  // NaN: not computed
  // What picks best.pt: the loss, or BLEU with train.best_metric = bleu.
  double metric(bool bleu_best) const { return bleu_best ? bleu : loss; }
};

class Validator {
 public:
  // `group` is null for a single process. `data` and `config` outlive the validator.
  Validator(const config::Config& config, TrainingData& data, const torch::Device& device, bool bf16,
            dist::Group* group);

  bool bleu_best() const { return bleu_best_; }
  bool wants_bleu() const { return want_bleu_; }
  const std::string& metric_name() const { return metric_name_; }
  // " Val. BLEU: xx.xx |" when BLEU is wanted, else "".
  std::string bleu_text(double bleu) const;

  // Validates `model` at update `step` (for the fault hook). With `share`, every rank gets rank 0's results
  // (a collective: all ranks call it); without, only rank 0's result is meaningful.
  Validation run(model::Transformer& model, int64_t step, bool share = true);
  // Rank 0: greedy translations of the validation set to run_dir/translations/val-step-N.txt, the first
  // lines logged next to their references.
  void translate(model::Transformer& model, const std::filesystem::path& run_dir, int64_t step);

 private:
  // Translations of the validation sources (detokenised), in order, at `beam`. Uses no randomness, so
  // exact resume holds; leaves the model in training mode.
  std::vector<std::string> translations(model::Transformer& model, int beam);

  const config::Config& config_;
  TrainingData& data_;
  torch::Device device_;
  bool bf16_;
  dist::Group* group_;
  bool writer_;
  bool bleu_best_, want_bleu_;
  std::string metric_name_;
  std::vector<std::string> refs_;  // validation references as text (the tokenizer is lossless)
};

}  // namespace mtx::train
