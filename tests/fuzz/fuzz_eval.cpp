// mtx eval's tokenizers and metrics on any text: input = option byte, then hypothesis text '\0' reference
// text (lines at '\n'; the shorter side padded with empty lines). Every tokenizer (13a, intl, char, none,
// spacy, tercom) runs on every line; BLEU, chrF/chrF++, TER, ROUGE and WER score the corpus and each
// sentence. Scores are finite; BLEU and chrF stay within [0, 100]; TER and WER are >= 0.
#include <cmath>

#include "fuzz_util.h"
#include "mtx/eval/metrics.h"
#include "mtx/util/errors.h"

namespace ev = mtx::eval;

namespace {

void check(const ev::Metric& m, const std::vector<std::string>& hyps, const ev::References& refs, double hi) {
  const ev::Score s = ev::corpus_score(m, hyps, refs);
  if (!std::isfinite(s.score) || s.score < 0 || s.score > hi + 1e-9) mtx::fuzz::broken("corpus score out of range");
  const auto per = ev::sentence_scores(m, hyps, refs);
  if (per.size() != hyps.size()) mtx::fuzz::broken("not one sentence score per line");
  for (const double x : per) {
    if (!std::isfinite(x) || x < 0 || x > hi + 1e-9) mtx::fuzz::broken("sentence score out of range");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t opt = data[0];
  const auto sides = mtx::fuzz::split_all(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1), '\0');
  std::vector<std::string> hyps = mtx::fuzz::split_all(sides[0], '\n');
  ev::References refs;
  for (size_t k = 1; k < sides.size() && k <= 3; ++k) refs.push_back(mtx::fuzz::split_all(sides[k], '\n'));
  if (refs.empty()) refs.push_back({});
  size_t n = hyps.size();
  for (const auto& r : refs) n = std::max(n, r.size());
  hyps.resize(n);
  for (auto& r : refs) r.resize(n);

  const ev::BleuTokenizer toks[] = {ev::BleuTokenizer::k13a, ev::BleuTokenizer::intl, ev::BleuTokenizer::chars,
                                    ev::BleuTokenizer::none, ev::BleuTokenizer::spacy};
  ev::TerOptions ter;
  ter.normalized = opt & 1;
  ter.no_punct = opt & 2;
  ter.case_sensitive = opt & 4;
  for (const auto& line : hyps) {
    for (const auto t : toks) ev::tokenize_bleu(line, t);
    ev::tokenize_ter(line, ter);
  }
  try {
    ev::BleuOptions b;
    b.tokenize = toks[opt % 5];
    b.lowercase = opt & 8;
    const char* smooth[] = {"exp", "floor", "add-k", "none"};
    b.smooth_method = smooth[(opt >> 4) % 4];
    b.effective_order = opt & 64;
    check(*ev::make_bleu(b), hyps, refs, 100);
    ev::ChrfOptions c;
    c.word_order = opt & 16 ? 2 : 0;
    c.char_order = 1 + (opt >> 5) % 6;
    c.lowercase = opt & 8;
    c.whitespace = opt & 128;
    c.eps_smoothing = opt & 2;
    check(*ev::make_chrf(c), hyps, refs, 100);
    check(*ev::make_ter(ter), hyps, refs, HUGE_VAL);
    check(*ev::make_rouge(opt % 3), hyps, refs, 100);
    check(*ev::make_wer(), hyps, refs, HUGE_VAL);
  } catch (const mtx::Error&) {
  }
  return 0;
}
