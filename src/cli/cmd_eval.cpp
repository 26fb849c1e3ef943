// mtx eval: score translations as sacreBLEU does (BLEU, chrF, TER; signatures and one-line renderings),
// plus ROUGE and WER, with bootstrap confidence intervals and paired significance; or, with --ckpt,
// translate --src first and also report the test loss / perplexity (ppl).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "commands.h"
#include "mtx/bundle/bundle.h"
#include "mtx/data/corpus.h"
#include "mtx/data/prepare.h"
#include "mtx/data/stream.h"
#include "mtx/decode/lm.h"
#include "mtx/decode/scoring.h"
#include "mtx/decode/translator.h"
#include "mtx/eval/metrics.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/device.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"
#include "mtx/util/strings.h"
#include "mtx/util/system.h"
#include "mtx/util/utf8.h"

namespace fs = std::filesystem;

namespace mtx::cli {

struct EvalArgs {
  std::string metrics = "bleu";
  std::vector<std::string> refs, hyps;
  std::string tokenize = "13a";
  bool lowercase = false;
  bool json = false;
  bool confidence = false;
  int confidence_n = 1000;
  uint64_t seed = 12345;
  bool paired_bs = false;
  bool sentence_level = false;
  std::string smooth_method = "exp";
  std::optional<double> smooth_value;
  int chrf_char_order = 6, chrf_word_order = 0, chrf_beta = 2;
  bool chrf_whitespace = false, chrf_eps_smoothing = false;
  bool ter_case_sensitive = false, ter_normalized = false, ter_no_punct = false;
  // --ckpt mode
  std::vector<std::string> ckpts;  // several: an ensemble
  std::string src, output;
  std::string text;  // --text: a language model's perplexity on this text
  std::optional<int> lm_batch;
  std::optional<int> beam, batch_tokens;
  int workers = 0;  // 0: one search per thread
  std::optional<double> alpha;
  std::string device = "auto";
  int threads = 0;
  QuantizeArgs quantize;
};

namespace {

const std::vector<std::string> kMetrics = {"bleu", "chrf", "ter", "rouge", "wer", "ppl"};

std::vector<std::string> read_text(const std::string& what, const std::string& path) {
  if (!fs::exists(path)) throw DataError(what + " '" + path + "' not found");
  auto lines = data::read_lines(path);
  if (lines.empty()) throw DataError(what + " '" + path + "' is empty");
  return lines;
}

std::vector<std::string> read_stdin() {
  std::vector<std::string> lines;
  for (std::string l; std::getline(std::cin, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    if (const size_t bad = utf8::find_invalid(l); bad != utf8::kValid) {
      throw DataError(fmt::format("stdin:{}: invalid UTF-8 at byte {}", lines.size() + 1, bad + 1));
    }
    lines.push_back(std::move(l));
  }
  if (lines.empty()) throw DataError("the hypothesis on stdin is empty (give --hyp FILE or pipe translations in)");
  return lines;
}

struct NamedMetric {
  std::string key;
  std::unique_ptr<eval::Metric> metric;
};

std::vector<NamedMetric> build_metrics(const EvalArgs& a, const std::vector<std::string>& names) {
  std::vector<NamedMetric> out;
  for (const auto& n : names) {
    if (n == "bleu") {
      eval::BleuOptions o;
      o.tokenize = eval::parse_bleu_tokenizer(a.tokenize);
      o.lowercase = a.lowercase;
      o.smooth_method = a.smooth_method;
      o.smooth_value = a.smooth_value;
      o.effective_order = a.sentence_level;
      out.push_back({n, eval::make_bleu(o)});
    } else if (n == "chrf") {
      eval::ChrfOptions o;
      o.char_order = a.chrf_char_order;
      o.word_order = a.chrf_word_order;
      o.beta = a.chrf_beta;
      o.lowercase = a.lowercase;
      o.whitespace = a.chrf_whitespace;
      o.eps_smoothing = a.chrf_eps_smoothing;
      out.push_back({n, eval::make_chrf(o)});
    } else if (n == "ter") {
      eval::TerOptions o;
      o.case_sensitive = a.ter_case_sensitive;
      o.normalized = a.ter_normalized;
      o.no_punct = a.ter_no_punct;
      out.push_back({n, eval::make_ter(o)});
    } else if (n == "rouge") {
      out.push_back({"rouge1", eval::make_rouge(1)});
      out.push_back({"rouge2", eval::make_rouge(2)});
      out.push_back({"rougeL", eval::make_rouge(0)});
    } else if (n == "wer") {
      out.push_back({n, eval::make_wer()});
    }
  }
  return out;
}

// "BLEU = 48.48 84.4/..." -> "BLEU|<signature> = 48.48 (μ = .. ± ..) 84.4/..."
std::string render(const eval::Score& s, const std::optional<eval::Confidence>& ci) {
  const std::string head = s.name + " = ";
  std::string rest = s.text.rfind(head, 0) == 0 ? s.text.substr(head.size()) : s.text;
  if (ci) {
    const size_t sp = rest.find(' ');
    const std::string number = rest.substr(0, sp), tail = sp == std::string::npos ? "" : rest.substr(sp);
    rest = fmt::format("{} (μ = {:.2f} ± {:.2f}){}", number, ci->mean, ci->ci, tail);
  }
  return s.name + "|" + s.signature + " = " + rest;
}

nlohmann::json to_json(const eval::Score& s) {
  nlohmann::json j = {{"name", s.name}, {"score", s.score}, {"signature", s.signature}, {"text", s.text}};
  for (const auto& [k, v] : s.details.items()) j[k] = v;
  return j;
}

// --text: a language model's perplexity, read as the tutorial's evaluate() reads the test split.
int run_lm_perplexity(const EvalArgs& a, const std::vector<std::string>& names) {
  if (names != std::vector<std::string>{"ppl"}) throw ConfigError("--text scores a language model: --metric ppl only");
  if (a.ckpts.empty()) throw ConfigError("--text needs --ckpt (a language model, task lm)");
  if (a.ckpts.size() > 1) throw ConfigError("--text scores one language model: give one --ckpt");
  const std::string& path = a.ckpts.front();
  if (!a.refs.empty() || !a.hyps.empty() || !a.src.empty()) {
    throw ConfigError("--text is a language model's test text: drop --ref, --hyp and --src");
  }
  const auto lines = read_text("text", a.text);
  const torch::Device device = select_device(parse_device(a.device), "--device");
  bundle::Bundle ckpt = bundle::load_bundle(path, device);
  if (ckpt.config.task != config::Task::lm) {
    throw ConfigError(fmt::format("--text: '{}' is a translation model; score it with --src and --ref", path));
  }
  const int64_t columns = a.lm_batch ? *a.lm_batch : ckpt.config.train.eval_batch_size;
  if (columns < 1) throw ConfigError("--batch-size: must be >= 1");
  set_threads(a.threads);  // after the checks: an error there stays one line
  const auto stream = data::encode_stream(ckpt.tokenizer->tgt(), lines);
  const decode::StreamLoss l = decode::stream_loss(ckpt.model, stream, columns, ckpt.config.train.bptt, device);
  if (a.json) {
    std::cout << nlohmann::json({{"name", "PPL"},
                                 {"score", l.ppl},
                                 {"loss", l.loss},
                                 {"tokens", l.tokens},
                                 {"signature", fmt::format("lm|streams:{}|bptt:{}", columns, ckpt.config.train.bptt)}})
                     .dump()
              << "\n";
  } else {
    std::cout << fmt::format("| test loss {:5.2f} | test ppl {:8.2f} | {} tokens", l.loss, l.ppl, l.tokens) << "\n";
  }
  return 0;
}

int run_eval(const EvalArgs& a) {
  std::vector<std::string> names;
  for (const auto& m : split(a.metrics, ',')) {
    const std::string name(trim(m));
    if (name.empty()) continue;
    if (std::find(kMetrics.begin(), kMetrics.end(), name) == kMetrics.end()) {
      throw ConfigError("--metric: unknown '" + name + "' (choose from " + join(kMetrics, ", ") + ")");
    }
    names.push_back(name);
  }
  if (names.empty()) throw ConfigError("--metric: no metric given");
  if (!a.text.empty()) return run_lm_perplexity(a, names);
  const bool want_ppl = std::find(names.begin(), names.end(), "ppl") != names.end();
  if (a.refs.empty()) throw ConfigError("--ref: at least one reference file is required");
  if (!a.ckpts.empty() && a.src.empty()) {
    throw ConfigError("--ckpt needs --src (the source text to translate), or --text for a language model");
  }
  if (want_ppl && a.ckpts.empty()) throw ConfigError("--metric ppl needs --ckpt and --src");
  if (want_ppl && a.ckpts.size() > 1) throw ConfigError("--metric ppl scores one model: give one --ckpt");
  if (!a.ckpts.empty() && !a.hyps.empty()) throw ConfigError("--ckpt translates --src itself: drop --hyp");
  if (a.paired_bs && a.hyps.size() < 2)
    throw ConfigError("--paired-bs needs a baseline and at least one system: --hyp BASE --hyp SYS ...");
  if (a.confidence_n < 10) throw ConfigError("--confidence-n: at least 10 resamples");
  auto metrics = build_metrics(a, names);  // option errors surface before any work

  eval::Streams refs;
  for (const auto& r : a.refs) refs.push_back(read_text("reference", r));
  for (size_t k = 1; k < refs.size(); ++k) {
    if (refs[k].size() != refs[0].size()) {
      throw DataError(fmt::format("reference '{}' has {} lines but '{}' has {}", a.refs[k], refs[k].size(), a.refs[0],
                                  refs[0].size()));
    }
  }

  // The systems to score: files, stdin, or the checkpoint's translations of --src.
  std::vector<std::pair<std::string, std::vector<std::string>>> systems;
  std::optional<decode::LossEvaluation> ppl;
  if (!a.ckpts.empty()) {
    const auto src = read_text("source", a.src);
    if (src.size() != refs[0].size()) {
      throw DataError(fmt::format("--src '{}' has {} lines but reference '{}' has {}", a.src, src.size(), a.refs[0],
                                  refs[0].size()));
    }
    const torch::Device device = select_device(parse_device(inference_device(a.device, a.quantize)), "--device");
    TranslationModels loaded = load_translation_models(a.ckpts, device, a.quantize);
    bundle::Bundle& ckpt = loaded.bundles.front();
    set_threads(a.threads);  // after the checks: an error there stays one line
    decode::TranslateOptions to = decode::options_from_config(ckpt.config.decode);
    if (a.beam) to.search.beam = *a.beam;
    if (a.alpha) to.search.alpha = *a.alpha;
    if (a.batch_tokens) to.batch_tokens = *a.batch_tokens;
    to.workers = a.workers;
    to.search.nbest = 1;
    decode::Translator translator(loaded.models, *ckpt.tokenizer, to);
    const std::string name = join(a.ckpts, " + ");
    const auto start = std::chrono::steady_clock::now();
    const auto translations = translator.translate(src);
    std::vector<std::string> hyps;
    for (const auto& t : translations) hyps.push_back(t.texts.empty() ? std::string() : t.texts.front());
    log::info("translated {} lines of {} with {} (beam {}) in {:.1f} s", hyps.size(), a.src, name, to.search.beam,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!a.output.empty()) {
      std::string text;
      for (const auto& h : hyps) text += h + "\n";
      write_file_atomic(a.output, text);
    }
    if (want_ppl) {
      data::ParallelCorpus pc;
      pc.src = src;
      pc.tgt = refs[0];
      const auto corpus = data::encode_corpus(*ckpt.tokenizer, pc, ckpt.config.model.max_len, at::get_num_threads());
      ppl = decode::evaluate_loss(ckpt.model, corpus, ckpt.tokenizer->special_ids(), ckpt.config.train.max_tokens,
                                  device);
    }
    systems.emplace_back(name, std::move(hyps));
  } else if (a.hyps.empty()) {
    systems.emplace_back("stdin", read_stdin());
  } else {
    for (const auto& h : a.hyps) systems.emplace_back(h, read_text("hypothesis", h));
  }
  for (const auto& [name, hyps] : systems) {
    if (hyps.size() != refs[0].size()) {
      throw DataError(fmt::format("hypothesis '{}' has {} lines but reference '{}' has {}", name, hyps.size(),
                                  a.refs[0], refs[0].size()));
    }
  }

  // Per-segment statistics once per system and metric; everything else is sums of them.
  std::vector<std::vector<std::vector<std::vector<double>>>> stats(systems.size());  // [system][metric][segment]
  for (size_t s = 0; s < systems.size(); ++s)
    for (const auto& m : metrics) stats[s].push_back(eval::corpus_stats(*m.metric, systems[s].second, refs));

  auto score_of = [&](size_t s, size_t m) {
    eval::Score sc = metrics[m].metric->score(eval::sum_stats(stats[s][m]));
    sc.signature = metrics[m].metric->signature(refs.size());
    return sc;
  };

  if (a.sentence_level) {
    for (size_t s = 0; s < systems.size(); ++s) {
      for (size_t i = 0; i < refs[0].size(); ++i) {
        nlohmann::json row = {{"line", i + 1}};
        std::string text;
        for (size_t m = 0; m < metrics.size(); ++m) {
          const eval::Score sc = metrics[m].metric->score(stats[s][m][i]);
          row[metrics[m].key] = sc.score;
          if (m) text += '\t';
          text += fmt::format("{:.2f}", sc.score);
        }
        if (systems.size() > 1) row["system"] = systems[s].first;
        std::cout << (a.json ? row.dump() : text) << "\n";
      }
    }
    return 0;
  }

  if (a.paired_bs) {
    for (size_t m = 0; m < metrics.size(); ++m) {
      const eval::Score base = score_of(0, m);
      if (a.json) {
        nlohmann::json j = to_json(base);
        j["system"] = systems[0].first;
        j["baseline"] = true;
        std::cout << j.dump() << "\n";
      } else {
        std::cout << "Baseline " << systems[0].first << ": " << render(base, std::nullopt) << "\n";
      }
      for (size_t s = 1; s < systems.size(); ++s) {
        const auto r = eval::paired_bootstrap(*metrics[m].metric, stats[0][m], stats[s][m], a.confidence_n, a.seed);
        const eval::Score sc = score_of(s, m);
        const bool better = metrics[m].metric->higher_is_better() ? r.system > r.baseline : r.system < r.baseline;
        if (a.json) {
          nlohmann::json j = to_json(sc);
          j["system"] = systems[s].first;
          j["mean"] = r.system_ci.mean;
          j["ci"] = r.system_ci.ci;
          j["p_value"] = r.p_value;
          std::cout << j.dump() << "\n";
        } else {
          std::cout << "System   " << systems[s].first << ": " << render(sc, r.system_ci)
                    << fmt::format(" (p = {:.4f}){}", r.p_value,
                                   r.p_value < 0.05 ? (better ? "* better" : "* worse") : "")
                    << "\n";
        }
      }
    }
    if (!a.json) {
      std::cout << fmt::format(
          "(paired bootstrap resampling, {} samples, seed {}; * = p < 0.05 against the baseline)\n", a.confidence_n,
          a.seed);
    }
    return 0;
  }

  for (size_t s = 0; s < systems.size(); ++s) {
    if (systems.size() > 1 && !a.json) std::cout << systems[s].first << ":\n";
    for (size_t m = 0; m < metrics.size(); ++m) {
      const eval::Score sc = score_of(s, m);
      std::optional<eval::Confidence> ci;
      if (a.confidence) ci = eval::bootstrap(*metrics[m].metric, stats[s][m], a.confidence_n, a.seed);
      if (a.json) {
        nlohmann::json j = to_json(sc);
        if (ci) {
          j["mean"] = ci->mean;
          j["ci"] = ci->ci;
        }
        if (systems.size() > 1) j["system"] = systems[s].first;
        std::cout << j.dump() << "\n";
      } else {
        std::cout << (systems.size() > 1 ? "  " : "") << render(sc, ci) << "\n";
      }
    }
  }
  if (ppl) {
    if (a.json) {
      std::cout << nlohmann::json({{"name", "PPL"},
                                   {"score", ppl->ppl},
                                   {"loss", ppl->loss},
                                   {"tokens", ppl->tokens},
                                   {"signature", "teacher-forced|nll-per-target-token"}})
                       .dump()
                << "\n";
    } else {
      std::cout << fmt::format("| Test Loss: {:.3f} | Test PPL: {:7.3f} |", ppl->loss, ppl->ppl) << "\n";
    }
  }
  return 0;
}

}  // namespace

Command add_eval(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  auto* cmd =
      app.add_subcommand("eval", "Score translations: BLEU, chrF, TER exactly as sacreBLEU, ROUGE, WER, test PPL");
  cmd->add_option("--metric,-m", a->metrics, "Comma-separated: bleu,chrf,ter,rouge,wer,ppl (ppl needs --ckpt)");
  cmd->add_option("--ref,-r", a->refs, "Reference file; repeat for multiple references (required but with --text)");
  cmd->add_option("--hyp", a->hyps, "Hypothesis file (default: stdin); repeat to score several systems");
  cmd->add_option(
      "--tokenize", a->tokenize,
      "BLEU tokenizer: 13a | intl | char | none | spacy (spaCy 2 English, the seq2seq tutorials' convention)");
  cmd->add_flag("--lowercase", a->lowercase, "Case-insensitive BLEU and chrF");
  cmd->add_option("--smooth-method", a->smooth_method, "BLEU smoothing: exp | floor | add-k | none");
  cmd->add_option("--smooth-value", a->smooth_value, "Value for floor (default 0.1) and add-k (default 1)");
  cmd->add_option("--chrf-char-order", a->chrf_char_order, "chrF character n-gram order");
  cmd->add_option("--chrf-word-order", a->chrf_word_order, "chrF word n-gram order (2 = chrF++)");
  cmd->add_option("--chrf-beta", a->chrf_beta, "chrF beta");
  cmd->add_flag("--chrf-whitespace", a->chrf_whitespace, "Keep whitespace in chrF character n-grams");
  cmd->add_flag("--chrf-eps-smoothing", a->chrf_eps_smoothing, "chrF++.py-style epsilon smoothing");
  cmd->add_flag("--ter-case-sensitive", a->ter_case_sensitive, "Case-sensitive TER");
  cmd->add_flag("--ter-normalized", a->ter_normalized, "TER with tercom's normalisation");
  cmd->add_flag("--ter-no-punct", a->ter_no_punct, "TER without punctuation");
  cmd->add_flag("--json", a->json, "One JSON object per metric (per line)");
  cmd->add_flag("--confidence", a->confidence, "95% confidence interval by bootstrap resampling");
  cmd->add_option("--confidence-n", a->confidence_n, "Bootstrap resamples (default 1000)");
  cmd->add_option("--seed", a->seed, "Bootstrap seed (default 12345)");
  cmd->add_flag("--paired-bs", a->paired_bs,
                "Paired bootstrap: first --hyp is the baseline, the others are tested against it");
  cmd->add_flag("--sentence-level", a->sentence_level, "Per-line scores (BLEU with effective order)");
  cmd->add_option("--ckpt", a->ckpts,
                  "Translate --src with this checkpoint, then score (and ppl); repeat for an ensemble (see mtx "
                  "translate --help)");
  cmd->add_option("--src", a->src, "Source text for --ckpt");
  cmd->add_option("--text", a->text, "With --ckpt of a language model (task lm): its perplexity on this text");
  cmd->add_option("--batch-size", a->lm_batch,
                  "With --text: streams the text is cut into (default: train.eval_batch_size)");
  cmd->add_option("--output", a->output, "With --ckpt: also write the translations here");
  cmd->add_option("--beam", a->beam, "With --ckpt: beam size (default: the checkpoint's decode.beam)");
  cmd->add_option("--alpha", a->alpha, "With --ckpt: length normalisation");
  cmd->add_option("--batch-tokens", a->batch_tokens, "With --ckpt: batch budget");
  cmd->add_option("--workers", a->workers,
                  "With --ckpt: searches at once, one thread each (0: one per thread; see mtx translate --help)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--device", a->device, "With --ckpt: auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--threads", a->threads, "With --ckpt: CPU threads (0 = one per core)");
  add_quantize_flags(*cmd, a->quantize);
  return {cmd, [a] { return run_eval(*a); }};
}

}  // namespace mtx::cli
