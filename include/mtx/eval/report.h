// Scores whole systems against references as mtx eval reports them: metrics chosen by name, corpus scores as
// sacreBLEU renders them (or JSON rows), bootstrap intervals, paired significance, per-line scores. No torch.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "mtx/eval/metrics.h"

namespace mtx::eval {

struct ReportOptions {
  // bleu | chrf | ter | rouge (ROUGE-1, -2, -L) | wer, reported in this order. Empty (mtx eval --metric ppl):
  // no scores; sentence_level still writes a row per line.
  std::vector<std::string> metrics = {"bleu"};
  // BLEU
  std::string tokenize = "13a";  // parse_bleu_tokenizer's names
  bool lowercase = false;        // BLEU and chrF
  std::string smooth_method = "exp";
  std::optional<double> smooth_value;
  // chrF (word_order 2: chrF++) and TER
  int chrf_char_order = 6, chrf_word_order = 0, chrf_beta = 2;
  bool chrf_whitespace = false, chrf_eps_smoothing = false;
  bool ter_case_sensitive = false, ter_normalized = false, ter_no_punct = false;
  // What is reported
  bool json = false;            // one JSON object per line instead of sacreBLEU's one-line renderings
  bool confidence = false;      // 95% interval by bootstrap resampling
  int confidence_n = 1000;      // bootstrap resamples
  uint64_t seed = 12345;        // bootstrap seed
  bool paired_bs = false;       // the first system is the baseline, the others are tested against it
  bool sentence_level = false;  // a row of scores per line (BLEU with effective order) instead of corpus scores
};
// Throws ConfigError naming the offending flag (--metric, --confidence-n, --tokenize, --smooth-method, ...).
void validate(const ReportOptions& options);

struct System {
  std::string name;               // named in the report when there are several
  std::vector<std::string> hyps;  // one per reference line
};

// Writes the report of `systems` against `refs` (refs[k][i]: reference set k, line i) to `out`. Throws
// ConfigError as validate() does (and for paired_bs with fewer than two systems), DataError on mismatched
// line counts.
void report(const ReportOptions& options, const std::vector<System>& systems, const References& refs,
            std::ostream& out);

}  // namespace mtx::eval
