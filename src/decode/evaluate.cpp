#include "mtx/decode/evaluate.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "mtx/bundle/bundle.h"
#include "mtx/data/corpus.h"
#include "mtx/data/lm_text.h"
#include "mtx/data/prepare.h"
#include "mtx/decode/lm.h"
#include "mtx/decode/scoring.h"
#include "mtx/decode/translator.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/device.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"
#include "mtx/util/strings.h"
#include "mtx/util/system.h"
#include "mtx/util/utf8.h"

namespace mtx::decode {

namespace {

const std::vector<std::string> kEvalMetrics = {"bleu", "chrf", "ter", "rouge", "wer", "ppl"};

bool wants_ppl(const EvalOptions& o) {
  return std::find(o.report.metrics.begin(), o.report.metrics.end(), "ppl") != o.report.metrics.end();
}

// The report's options with its metrics less ppl (which is scored here, not by eval/).
eval::ReportOptions without_ppl(const EvalOptions& o) {
  eval::ReportOptions r = o.report;
  r.metrics.erase(std::remove(r.metrics.begin(), r.metrics.end(), "ppl"), r.metrics.end());
  return r;
}

std::vector<std::string> read_eval_file(const std::string& what, const std::string& path) {
  if (!std::filesystem::exists(path)) throw DataError(what + " '" + path + "' not found");
  auto lines = data::read_lines(path);
  if (lines.empty()) throw DataError(what + " '" + path + "' is empty");
  return lines;
}

std::vector<std::string> read_eval_stream(std::istream& in) {
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    if (const size_t bad = utf8::find_invalid(l); bad != utf8::kValid) {
      throw DataError(fmt::format("stdin:{}: invalid UTF-8 at byte {}", lines.size() + 1, bad + 1));
    }
    lines.push_back(std::move(l));
  }
  if (lines.empty()) throw DataError("the hypothesis on stdin is empty (give --hyp FILE or pipe translations in)");
  return lines;
}

// --text: a language model's perplexity, read as the tutorial's evaluate() reads the test split.
void lm_perplexity(const EvalOptions& o, std::ostream& out) {
  const std::string& path = o.ckpts.front();
  const auto lines = read_eval_file("text", o.text);
  const torch::Device device = select_device(o.device, "--device");
  bundle::Bundle ckpt = bundle::load_bundle(path, device);
  if (ckpt.config.task != config::Task::lm) {
    throw ConfigError(fmt::format("--text: '{}' is a translation model; score it with --src and --ref", path));
  }
  const int64_t columns = o.text_streams ? *o.text_streams : ckpt.config.train.eval_batch_size;
  if (columns < 1) throw ConfigError("--batch-size: must be >= 1");
  set_threads(o.threads);  // after the checks: an error there stays one line
  const auto tokens = data::encode_lm_text(ckpt.tokenizer->tgt(), lines);
  const TextLoss l = text_loss(ckpt.model, tokens, columns, ckpt.config.train.bptt, device);
  if (o.report.json) {
    out << nlohmann::json({{"name", "PPL"},
                           {"score", l.ppl},
                           {"loss", l.loss},
                           {"tokens", l.tokens},
                           {"signature", fmt::format("lm|streams:{}|bptt:{}", columns, ckpt.config.train.bptt)}})
               .dump()
        << "\n";
  } else {
    out << fmt::format("| test loss {:5.2f} | test ppl {:8.2f} | {} tokens", l.loss, l.ppl, l.tokens) << "\n";
  }
}

// The checkpoints on `device` (one tokenizer among them), quantized when asked.
std::vector<bundle::Bundle> load_checkpoints(const EvalOptions& o, const torch::Device& device) {
  std::optional<bundle::Int8Options> int8;
  if (o.int8) int8 = bundle::Int8Options{!o.float_output};
  return bundle::load_for_inference({o.ckpts.begin(), o.ckpts.end()}, device, int8);
}

// The teacher-forced loss of the reference given the source (the tutorial's "Test Loss / Test PPL").
LossEvaluation test_loss(bundle::Bundle& ckpt, const std::vector<std::string>& src, const std::vector<std::string>& ref,
                         const torch::Device& device) {
  data::ParallelCorpus pc;
  pc.src = src;
  pc.tgt = ref;
  const auto corpus = data::encode_corpus(*ckpt.tokenizer, pc, ckpt.config.model.max_len, at::get_num_threads());
  return evaluate_loss(ckpt.model, corpus, ckpt.tokenizer->special_ids(), ckpt.config.train.max_tokens, device);
}

// The checkpoints' translations of --src (written to --output if given), and with ppl their test loss against
// the first reference.
eval::System translate_source(const EvalOptions& o, const std::vector<std::string>& ref,
                              std::optional<LossEvaluation>& ppl) {
  const auto src = read_eval_file("source", o.src);
  if (src.size() != ref.size()) {
    throw DataError(
        fmt::format("--src '{}' has {} lines but reference '{}' has {}", o.src, src.size(), o.refs[0], ref.size()));
  }
  const bool cpu = o.int8 && o.device == DeviceChoice::auto_;  // int8 runs on the CPU
  const torch::Device device = select_device(cpu ? DeviceChoice::cpu : o.device, "--device");
  std::vector<bundle::Bundle> bundles = load_checkpoints(o, device);
  std::vector<model::Transformer> models;
  for (auto& b : bundles) models.push_back(b.model);
  bundle::Bundle& ckpt = bundles.front();
  set_threads(o.threads);  // after the checks: an error there stays one line
  TranslateOptions to = options_from_config(o.decode ? o.decode(ckpt.config.decode) : ckpt.config.decode);
  to.workers = o.workers;
  to.search.nbest = 1;  // one translation per line is scored
  to.source_lang = o.source_lang;
  to.target_lang = o.target_lang;
  Translator translator(models, *ckpt.tokenizer, to);
  eval::System system{join(o.ckpts, " + "), {}};
  const auto start = std::chrono::steady_clock::now();
  const std::vector<LineControls> controls = o.controls ? o.controls(src) : std::vector<LineControls>{};
  for (const auto& t : translator.translate(src, controls)) {
    system.hyps.push_back(t.texts.empty() ? "" : t.texts.front());
  }
  log::info("translated {} lines of {} with {} (beam {}) in {:.1f} s", system.hyps.size(), o.src, system.name,
            to.search.beam, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (!o.output.empty()) {
    std::string text;
    for (const auto& h : system.hyps) text += h + "\n";
    write_file_atomic(o.output, text);
  }
  if (wants_ppl(o)) ppl = test_loss(ckpt, src, ref, device);
  return system;
}

}  // namespace

void validate(const EvalOptions& o) {
  for (const auto& name : o.report.metrics) {
    if (std::find(kEvalMetrics.begin(), kEvalMetrics.end(), name) == kEvalMetrics.end()) {
      throw ConfigError("--metric: unknown '" + name + "' (choose from " + join(kEvalMetrics, ", ") + ")");
    }
  }
  if (o.report.metrics.empty()) throw ConfigError("--metric: no metric given");
  if (!o.text.empty()) {
    if (o.report.metrics != std::vector<std::string>{"ppl"}) {
      throw ConfigError("--text scores a language model: --metric ppl only");
    }
    if (o.ckpts.empty()) throw ConfigError("--text needs --ckpt (a language model, task lm)");
    if (o.ckpts.size() > 1) throw ConfigError("--text scores one language model: give one --ckpt");
    if (!o.refs.empty() || !o.hyps.empty() || !o.src.empty()) {
      throw ConfigError("--text is a language model's test text: drop --ref, --hyp and --src");
    }
    return;
  }
  const bool ppl = wants_ppl(o);
  if (o.refs.empty()) throw ConfigError("--ref: at least one reference file is required");
  if (!o.ckpts.empty() && o.src.empty()) {
    throw ConfigError("--ckpt needs --src (the source text to translate), or --text for a language model");
  }
  if (ppl && o.ckpts.empty()) throw ConfigError("--metric ppl needs --ckpt and --src");
  if (ppl && o.ckpts.size() > 1) throw ConfigError("--metric ppl scores one model: give one --ckpt");
  if (!o.ckpts.empty() && !o.hyps.empty()) throw ConfigError("--ckpt translates --src itself: drop --hyp");
  if (o.report.paired_bs && o.hyps.size() < 2) {
    throw ConfigError("--paired-bs needs a baseline and at least one system: --hyp BASE --hyp SYS ...");
  }
  if (!o.ckpts.empty() && o.float_output && !o.int8) throw ConfigError("--float-output goes with --quantize int8");
  eval::validate(without_ppl(o));  // --confidence-n and the metrics' own options
}

void evaluate(const EvalOptions& o, std::istream& in, std::ostream& out) {
  validate(o);
  if (!o.text.empty()) return lm_perplexity(o, out);

  eval::References refs;
  for (const auto& r : o.refs) refs.push_back(read_eval_file("reference", r));
  for (size_t k = 1; k < refs.size(); ++k) {
    if (refs[k].size() != refs[0].size()) {
      throw DataError(fmt::format("reference '{}' has {} lines but '{}' has {}", o.refs[k], refs[k].size(), o.refs[0],
                                  refs[0].size()));
    }
  }

  // The systems to score: the checkpoint's translations of --src, files, or the input stream.
  std::vector<eval::System> systems;
  std::optional<LossEvaluation> ppl;
  if (!o.ckpts.empty()) {
    systems.push_back(translate_source(o, refs[0], ppl));
  } else if (o.hyps.empty()) {
    systems.push_back({"stdin", read_eval_stream(in)});
  } else {
    for (const auto& h : o.hyps) systems.push_back({h, read_eval_file("hypothesis", h)});
  }
  for (const auto& s : systems) {
    if (s.hyps.size() != refs[0].size()) {
      throw DataError(fmt::format("hypothesis '{}' has {} lines but reference '{}' has {}", s.name, s.hyps.size(),
                                  o.refs[0], refs[0].size()));
    }
  }

  const eval::ReportOptions report = without_ppl(o);
  eval::report(report, systems, refs, out);
  if (!ppl || report.sentence_level || report.paired_bs) return;  // per-line and paired reports have no ppl line
  if (report.json) {
    out << nlohmann::json({{"name", "PPL"},
                           {"score", ppl->ppl},
                           {"loss", ppl->loss},
                           {"tokens", ppl->tokens},
                           {"signature", "teacher-forced|nll-per-target-token"}})
               .dump()
        << "\n";
  } else {
    out << fmt::format("| Test Loss: {:.3f} | Test PPL: {:7.3f} |", ppl->loss, ppl->ppl) << "\n";
  }
}

}  // namespace mtx::decode
