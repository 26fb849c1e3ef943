// mtx eval's work: score hypotheses (files, a stream, or a checkpoint's or ensemble's translations of a source)
// against references with eval/'s metrics plus the test perplexity, or a language model's perplexity on a text.
#pragma once

#include <functional>
#include <istream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "mtx/config/config.h"
#include "mtx/decode/translator.h"
#include "mtx/eval/report.h"

namespace mtx::decode {

struct EvalOptions {
  // report.metrics may also name "ppl": the teacher-forced test loss / perplexity of the one checkpoint on
  // src and the first reference (after the scores, as the seq2seq tutorial's "Test Loss / Test PPL").
  eval::ReportOptions report;
  std::vector<std::string> refs;  // reference files (several: multi-reference)
  std::vector<std::string> hyps;  // hypothesis files, a system each (none and no ckpts: the input stream)

  // Translate src with ckpts, then score the translations (instead of hyps).
  std::vector<std::string> ckpts;  // several: an ensemble
  std::string src;
  std::string output;                    // also write the translations here
  std::string source_lang, target_lang;  // a multilingual model's languages (TranslateOptions)
  // The decoding options: the first checkpoint's decode section in, the options to translate with out (the
  // command's flags applied). Empty: the section as it is.
  std::function<config::DecodeConfig(const config::DecodeConfig&)> decode;
  // The target controls of src's lines (mtx eval --ckpt --target-prefix/--constraints/--glossary; empty: none).
  std::function<std::vector<LineControls>(const std::vector<std::string>& src)> controls;
  int workers = 0;            // searches at once (0: one per thread), as TranslateOptions::workers
  bool int8 = false;          // quantize the models (bundle::quantize_int8); an int8 bundle is int8 already
  bool float_output = false;  // with int8: keep the output projection in float

  // Or: the perplexity of one language model (task lm) in ckpts on this text (report.metrics: ppl only).
  std::string text;
  std::optional<int> text_streams;  // streams the text is cut into (unset: train.eval_batch_size)

  DeviceChoice device = DeviceChoice::auto_;  // with int8, auto is the CPU
  int threads = 0;                            // CPU threads (0 = one per core)
};

// Throws ConfigError naming the offending flag (--metric, --ref, --ckpt, --src, --paired-bs, ...) for an
// option or a combination of options that cannot run; checks files only when they are read.
void validate(const EvalOptions& options);

// validate(), then the report (eval::report's lines, and the perplexity's) written to `out`. Hypotheses come
// from `in` when neither hyps nor ckpts give them. Throws ConfigError, or DataError naming the file for a
// missing, empty or malformed input and for line counts that differ from the references'.
void evaluate(const EvalOptions& options, std::istream& in, std::ostream& out);

}  // namespace mtx::decode
