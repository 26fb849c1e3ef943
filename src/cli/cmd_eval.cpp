// mtx eval: score translations as sacreBLEU does (BLEU, chrF, TER), plus ROUGE and WER, or translate --src with
// --ckpt first and add the test perplexity. Flags only: decode::evaluate (mtx/decode/evaluate.h) does the work.
#include <iostream>
#include <string>

#include "commands.h"
#include "mtx/decode/evaluate.h"
#include "mtx/util/strings.h"

namespace mtx::cli {

Command add_eval(CLI::App& app) {
  struct EvalArgs {
    decode::EvalOptions o;
    DecodeFlags decode;
    ControlFlags controls;
    std::string device = "auto";
    QuantizeArgs quantize;
  };
  auto a = std::make_shared<EvalArgs>();
  eval::ReportOptions& r = a->o.report;
  auto* cmd =
      app.add_subcommand("eval", "Score translations: BLEU, chrF, TER exactly as sacreBLEU, ROUGE, WER, test PPL");
  cmd->add_option_function<std::string>(
      "--metric,-m",
      [a](const std::string& list) {
        a->o.report.metrics.clear();
        for (const auto& m : split(list, ','))
          if (!trim(m).empty()) a->o.report.metrics.emplace_back(trim(m));
      },
      "Comma-separated: bleu,chrf,ter,rouge,wer,ppl (ppl needs --ckpt)");
  cmd->add_option("--ref,-r", a->o.refs, "Reference file; repeat for multiple references (required but with --text)");
  cmd->add_option("--hyp", a->o.hyps, "Hypothesis file (default: stdin); repeat to score several systems");
  cmd->add_option(
      "--tokenize", r.tokenize,
      "BLEU tokenizer: 13a | intl | char | none | spacy (spaCy 2 English, the seq2seq tutorials' convention)");
  cmd->add_flag("--lowercase", r.lowercase, "Case-insensitive BLEU and chrF");
  cmd->add_option("--smooth-method", r.smooth_method, "BLEU smoothing: exp | floor | add-k | none");
  cmd->add_option("--smooth-value", r.smooth_value, "Value for floor (default 0.1) and add-k (default 1)");
  cmd->add_option("--chrf-char-order", r.chrf_char_order, "chrF character n-gram order");
  cmd->add_option("--chrf-word-order", r.chrf_word_order, "chrF word n-gram order (2 = chrF++)");
  cmd->add_option("--chrf-beta", r.chrf_beta, "chrF beta");
  cmd->add_flag("--chrf-whitespace", r.chrf_whitespace, "Keep whitespace in chrF character n-grams");
  cmd->add_flag("--chrf-eps-smoothing", r.chrf_eps_smoothing, "chrF++.py-style epsilon smoothing");
  cmd->add_flag("--ter-case-sensitive", r.ter_case_sensitive, "Case-sensitive TER");
  cmd->add_flag("--ter-normalized", r.ter_normalized, "TER with tercom's normalisation");
  cmd->add_flag("--ter-no-punct", r.ter_no_punct, "TER without punctuation");
  cmd->add_flag("--json", r.json, "One JSON object per metric (per line)");
  cmd->add_flag("--confidence", r.confidence, "95% confidence interval by bootstrap resampling");
  cmd->add_option("--confidence-n", r.confidence_n, "Bootstrap resamples (default 1000)");
  cmd->add_option("--seed", r.seed, "Bootstrap seed (default 12345)");
  cmd->add_flag("--paired-bs", r.paired_bs,
                "Paired bootstrap: first --hyp is the baseline, the others are tested against it");
  cmd->add_flag("--sentence-level", r.sentence_level, "Per-line scores (BLEU with effective order)");
  cmd->add_option("--ckpt", a->o.ckpts,
                  "Translate --src with this checkpoint, then score (and ppl); repeat for an ensemble (see mtx "
                  "translate --help)");
  cmd->add_option("--src", a->o.src, "Source text for --ckpt");
  cmd->add_option("--text", a->o.text, "With --ckpt of a language model (task lm): its perplexity on this text");
  cmd->add_option("--batch-size", a->o.text_streams,
                  "With --text: streams the text is cut into (default: train.eval_batch_size)");
  cmd->add_option("--output", a->o.output, "With --ckpt: also write the translations here");
  a->decode.add(*cmd, " (with --ckpt)");
  a->controls.add(*cmd, " (with --ckpt: line-aligned with --src)");
  cmd->add_option("--workers", a->o.workers,
                  "With --ckpt: searches at once, one thread each (0: one per thread; see mtx translate --help)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--device", a->device, "With --ckpt: auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--threads", a->o.threads, "With --ckpt: CPU threads (0 = one per core)");
  add_quantize_flags(*cmd, a->quantize);
  return {cmd, [a] {
            a->o.device = parse_device(a->device);
            a->o.int8 = a->quantize.int8();
            a->o.float_output = a->quantize.float_output;
            a->o.decode = [a](const config::DecodeConfig& d) { return a->decode.apply(d); };
            decode::TranslateOptions languages;
            a->controls.apply(languages);
            a->o.source_lang = languages.source_lang;
            a->o.target_lang = languages.target_lang;
            a->o.controls = [a](const std::vector<std::string>& src) {
              decode::StreamOptions files;
              a->controls.open(files);
              std::vector<decode::LineControls> controls = decode::read_controls(src, 1, files);
              decode::check_controls_end(files, int64_t(src.size()));
              return controls;
            };
            decode::evaluate(a->o, std::cin, std::cout);
            return 0;
          }};
}

}  // namespace mtx::cli
