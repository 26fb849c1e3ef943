// Translation metrics with sacreBLEU 2.x's exact definitions (BLEU, chrF/chrF++, TER), plus ROUGE-1/2/L
// and WER as the seed notebooks reported them. No torch dependency.
//
// Every metric works from per-segment sufficient statistics that add up over segments: corpus scores,
// bootstrap confidence intervals and paired significance tests share one path (as in sacreBLEU).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mtx::eval {

// spacy: spaCy 2's English word tokenizer, the convention of the PyTorch seq2seq tutorials (torchtext's
// bleu_score over spaCy tokens); with lowercase, tokens are lowercased after tokenising, as there.
enum class BleuTokenizer { k13a, intl, chars, none, spacy };
BleuTokenizer parse_bleu_tokenizer(
    const std::string& name);  // "13a" | "intl" | "char" | "none" | "spacy"; ConfigError otherwise
std::string to_string(BleuTokenizer t);

struct BleuOptions {
  BleuTokenizer tokenize = BleuTokenizer::k13a;
  bool lowercase = false;
  std::string smooth_method = "exp";   // exp | floor | add-k | none
  std::optional<double> smooth_value;  // floor: 0.1, add-k: 1 when unset
  bool effective_order = false;        // sentence-level BLEU turns this on
  int max_order = 4;
};

struct ChrfOptions {
  int char_order = 6;
  int word_order = 0;  // 2 = chrF++
  int beta = 2;
  bool lowercase = false;
  bool whitespace = false;  // keep whitespace in character n-grams
  bool eps_smoothing = false;
};

struct TerOptions {
  bool normalized = false;
  bool no_punct = false;
  bool asian_support = false;
  bool case_sensitive = false;
};

struct Score {
  std::string name;  // BLEU, chrF2, chrF2++, TER, ROUGE-1, ROUGE-2, ROUGE-L, WER
  double score = 0;
  std::string signature;  // sacreBLEU-style, e.g. nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:mtx-0.1.0
  std::string text;       // sacreBLEU's one-line rendering, e.g. "BLEU = 74.70 93.5/81.6/72.7/65.2 (BP = ...)"
  nlohmann::json details = nlohmann::json::object();  // precisions, bp, lengths, ...
};

// Segments: hyps[i]; refs[k][i] = reference set k, segment i.
using References = std::vector<std::vector<std::string>>;

class Metric {
 public:
  virtual ~Metric() = default;
  // Sufficient statistics of one segment against its references.
  virtual std::vector<double> segment_stats(const std::string& hyp, const std::vector<std::string>& refs) const = 0;
  // The score of summed statistics (name, score, text, details; signature left to signature()).
  virtual Score score(const std::vector<double>& stats) const = 0;
  virtual std::string signature(size_t nrefs) const = 0;
  // Higher is better (TER and WER: lower).
  virtual bool higher_is_better() const { return true; }
};

std::unique_ptr<Metric> make_bleu(const BleuOptions& options);
std::unique_ptr<Metric> make_chrf(const ChrfOptions& options);
std::unique_ptr<Metric> make_ter(const TerOptions& options);
std::unique_ptr<Metric> make_rouge(
    int n);                          // 1, 2, or 0 for ROUGE-L; F1 averaged over segments, 13a-tokenised, lowercased
std::unique_ptr<Metric> make_wer();  // word error rate (%) over whitespace tokens: edits / reference words

// Per-segment statistics of a corpus (parallel over segments); throws DataError on mismatched counts.
std::vector<std::vector<double>> corpus_stats(const Metric& metric, const std::vector<std::string>& hyps,
                                              const References& refs);
std::vector<double> sum_stats(const std::vector<std::vector<double>>& stats);
// Corpus score with its signature.
Score corpus_score(const Metric& metric, const std::vector<std::string>& hyps, const References& refs);
// Per-segment scores (sentence BLEU should be made with effective_order on).
std::vector<double> sentence_scores(const Metric& metric, const std::vector<std::string>& hyps, const References& refs);

// Bootstrap resampling (sacreBLEU --confidence): `samples` resamples of the segments, seeded; the mean
// of the resampled scores and the 95% half-interval.
struct Confidence {
  double mean = 0;
  double ci = 0;  // half-width of the 95% interval
};
Confidence bootstrap(const Metric& metric, const std::vector<std::vector<double>>& stats, int samples = 1000,
                     uint64_t seed = 12345);

// Paired bootstrap resampling (sacreBLEU --paired-bs): the same resamples for baseline and system; the
// p-value of the observed difference under the centred resampled differences (Koehn 2004).
struct PairedResult {
  double baseline = 0, system = 0;  // corpus scores
  Confidence system_ci;
  double p_value = 1;
};
PairedResult paired_bootstrap(const Metric& metric, const std::vector<std::vector<double>>& baseline,
                              const std::vector<std::vector<double>>& system, int samples = 1000,
                              uint64_t seed = 12345);

// Tokenisers as sacreBLEU applies them (exposed for tests): the space-joined tokens.
std::string tokenize_bleu(const std::string& line, BleuTokenizer tokenizer);
std::string tokenize_ter(const std::string& line, const TerOptions& options);

}  // namespace mtx::eval
