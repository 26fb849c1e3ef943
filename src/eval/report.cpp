#include "mtx/eval/report.h"

#include <fmt/format.h>

#include <memory>
#include <utility>

#include "mtx/util/errors.h"
#include "mtx/util/strings.h"

namespace mtx::eval {

namespace {

const std::vector<std::string> kReportMetrics = {"bleu", "chrf", "ter", "rouge", "wer"};

struct NamedMetric {
  std::string key;  // the JSON key of per-line scores
  std::unique_ptr<Metric> metric;
};

// The metrics in the order named; their constructors check their options.
std::vector<NamedMetric> make_report_metrics(const ReportOptions& o) {
  std::vector<NamedMetric> out;
  for (const auto& n : o.metrics) {
    if (n == "bleu") {
      BleuOptions b;
      b.tokenize = parse_bleu_tokenizer(o.tokenize);
      b.lowercase = o.lowercase;
      b.smooth_method = o.smooth_method;
      b.smooth_value = o.smooth_value;
      b.effective_order = o.sentence_level;
      out.push_back({n, make_bleu(b)});
    } else if (n == "chrf") {
      ChrfOptions c;
      c.char_order = o.chrf_char_order;
      c.word_order = o.chrf_word_order;
      c.beta = o.chrf_beta;
      c.lowercase = o.lowercase;
      c.whitespace = o.chrf_whitespace;
      c.eps_smoothing = o.chrf_eps_smoothing;
      out.push_back({n, make_chrf(c)});
    } else if (n == "ter") {
      TerOptions t;
      t.case_sensitive = o.ter_case_sensitive;
      t.normalized = o.ter_normalized;
      t.no_punct = o.ter_no_punct;
      out.push_back({n, make_ter(t)});
    } else if (n == "rouge") {
      out.push_back({"rouge1", make_rouge(1)});
      out.push_back({"rouge2", make_rouge(2)});
      out.push_back({"rougeL", make_rouge(0)});
    } else if (n == "wer") {
      out.push_back({n, make_wer()});
    } else {
      throw ConfigError("--metric: unknown '" + n + "' (choose from " + join(kReportMetrics, ", ") + ")");
    }
  }
  return out;
}

// "BLEU = 48.48 84.4/..." -> "BLEU|<signature> = 48.48 (μ = .. ± ..) 84.4/..."
std::string render(const Score& s, const std::optional<Confidence>& ci) {
  const std::string head = s.name + " = ";
  std::string rest = s.text.rfind(head, 0) == 0 ? s.text.substr(head.size()) : s.text;
  if (ci) {
    const size_t sp = rest.find(' ');
    const std::string number = rest.substr(0, sp), tail = sp == std::string::npos ? "" : rest.substr(sp);
    rest = fmt::format("{} (μ = {:.2f} ± {:.2f}){}", number, ci->mean, ci->ci, tail);
  }
  return s.name + "|" + s.signature + " = " + rest;
}

nlohmann::json score_json(const Score& s) {
  nlohmann::json j = {{"name", s.name}, {"score", s.score}, {"signature", s.signature}, {"text", s.text}};
  for (const auto& [k, v] : s.details.items()) j[k] = v;
  return j;
}

// Per-segment statistics, computed once per system and metric; every score is a sum of them.
class Scored {
 public:
  Scored(std::vector<NamedMetric> metrics, const std::vector<System>& systems, const References& refs)
      : metrics_(std::move(metrics)), nrefs_(refs.size()), stats_(systems.size()) {
    for (size_t s = 0; s < systems.size(); ++s)
      for (const auto& m : metrics_) stats_[s].push_back(corpus_stats(*m.metric, systems[s].hyps, refs));
  }
  size_t metrics() const { return metrics_.size(); }
  const NamedMetric& metric(size_t m) const { return metrics_[m]; }
  const std::vector<std::vector<double>>& stats(size_t s, size_t m) const { return stats_[s][m]; }
  Score corpus(size_t s, size_t m) const {
    Score sc = metrics_[m].metric->score(sum_stats(stats_[s][m]));
    sc.signature = metrics_[m].metric->signature(nrefs_);
    return sc;
  }

 private:
  std::vector<NamedMetric> metrics_;
  size_t nrefs_;
  std::vector<std::vector<std::vector<std::vector<double>>>> stats_;  // [system][metric][segment]
};

void report_sentences(const ReportOptions& o, const Scored& sc, const std::vector<System>& systems, size_t lines,
                      std::ostream& out) {
  for (size_t s = 0; s < systems.size(); ++s) {
    for (size_t i = 0; i < lines; ++i) {
      nlohmann::json row = {{"line", i + 1}};
      std::string text;
      for (size_t m = 0; m < sc.metrics(); ++m) {
        const double score = sc.metric(m).metric->score(sc.stats(s, m)[i]).score;
        row[sc.metric(m).key] = score;
        if (m) text += '\t';
        text += fmt::format("{:.2f}", score);
      }
      if (systems.size() > 1) row["system"] = systems[s].name;
      out << (o.json ? row.dump() : text) << "\n";
    }
  }
}

void report_paired(const ReportOptions& o, const Scored& sc, const std::vector<System>& systems, std::ostream& out) {
  for (size_t m = 0; m < sc.metrics(); ++m) {
    const Metric& metric = *sc.metric(m).metric;
    const Score base = sc.corpus(0, m);
    if (o.json) {
      nlohmann::json j = score_json(base);
      j["system"] = systems[0].name;
      j["baseline"] = true;
      out << j.dump() << "\n";
    } else {
      out << "Baseline " << systems[0].name << ": " << render(base, std::nullopt) << "\n";
    }
    for (size_t s = 1; s < systems.size(); ++s) {
      const auto r = paired_bootstrap(metric, sc.stats(0, m), sc.stats(s, m), o.confidence_n, o.seed);
      const Score score = sc.corpus(s, m);
      const bool better = metric.higher_is_better() ? r.system > r.baseline : r.system < r.baseline;
      if (o.json) {
        nlohmann::json j = score_json(score);
        j["system"] = systems[s].name;
        j["mean"] = r.system_ci.mean;
        j["ci"] = r.system_ci.ci;
        j["p_value"] = r.p_value;
        out << j.dump() << "\n";
      } else {
        out << "System   " << systems[s].name << ": " << render(score, r.system_ci)
            << fmt::format(" (p = {:.4f}){}", r.p_value, r.p_value < 0.05 ? (better ? "* better" : "* worse") : "")
            << "\n";
      }
    }
  }
  if (!o.json) {
    out << fmt::format("(paired bootstrap resampling, {} samples, seed {}; * = p < 0.05 against the baseline)\n",
                       o.confidence_n, o.seed);
  }
}

void report_corpus(const ReportOptions& o, const Scored& sc, const std::vector<System>& systems, std::ostream& out) {
  for (size_t s = 0; s < systems.size(); ++s) {
    if (systems.size() > 1 && !o.json) out << systems[s].name << ":\n";
    for (size_t m = 0; m < sc.metrics(); ++m) {
      const Score score = sc.corpus(s, m);
      std::optional<Confidence> ci;
      if (o.confidence) ci = bootstrap(*sc.metric(m).metric, sc.stats(s, m), o.confidence_n, o.seed);
      if (o.json) {
        nlohmann::json j = score_json(score);
        if (ci) {
          j["mean"] = ci->mean;
          j["ci"] = ci->ci;
        }
        if (systems.size() > 1) j["system"] = systems[s].name;
        out << j.dump() << "\n";
      } else {
        out << (systems.size() > 1 ? "  " : "") << render(score, ci) << "\n";
      }
    }
  }
}

}  // namespace

void validate(const ReportOptions& o) {
  if (o.confidence_n < 10) throw ConfigError("--confidence-n: at least 10 resamples");
  make_report_metrics(o);  // unknown names and the metrics' own options
}

void report(const ReportOptions& o, const std::vector<System>& systems, const References& refs, std::ostream& out) {
  validate(o);
  if (o.paired_bs && systems.size() < 2) throw ConfigError("--paired-bs needs a baseline and at least one system");
  if (systems.empty() || refs.empty()) throw DataError("nothing to score: no system or no reference");
  const Scored scored(make_report_metrics(o), systems, refs);
  if (o.sentence_level) {
    report_sentences(o, scored, systems, refs[0].size(), out);
  } else if (o.paired_bs) {
    report_paired(o, scored, systems, out);
  } else {
    report_corpus(o, scored, systems, out);
  }
}

}  // namespace mtx::eval
