#include "mtx/decode/evaluate.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>
#include <sstream>

#include "mtx/bundle/bundle.h"
#include "mtx/data/prepare.h"
#include "mtx/decode/scoring.h"
#include "mtx/decode/translator.h"
#include "mtx/util/errors.h"
#include "test_utils.h"

using namespace mtx;

namespace {

const char* const kRef = "The cat sat on the mat.\nA dog runs in the park.\n";
const char* const kHyp = "The cat sat on a mat.\nA dog is running in the park.\n";

std::string evaluate_to_string(const decode::EvalOptions& o, const std::string& in = "") {
  std::istringstream input(in);
  std::ostringstream out;
  decode::evaluate(o, input, out);
  return out.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST(Evaluate, ValidateNamesTheFlagOfABadCombination) {
  decode::EvalOptions ok;
  ok.refs = {"ref.en"};
  ok.hyps = {"hyp.en"};
  EXPECT_NO_THROW(decode::validate(ok));  // files are checked when read, not here

  // Each change to `ok`, and a word the error must hold.
  const std::vector<std::pair<std::function<void(decode::EvalOptions&)>, std::string>> cases = {
      {[](auto& o) { o.report.metrics = {"blue"}; }, "--metric: unknown 'blue'"},
      {[](auto& o) { o.report.metrics.clear(); }, "--metric: no metric given"},
      {[](auto& o) { o.refs.clear(); }, "--ref"},
      {[](auto& o) {
         o.report.metrics = {"bleu", "ppl"};
       },
       "--metric ppl needs --ckpt"},
      {[](auto& o) { o.report.paired_bs = true; }, "--paired-bs"},
      {[](auto& o) { o.report.confidence_n = 5; }, "--confidence-n"},
      {[](auto& o) { o.report.tokenize = "moses"; }, "--tokenize"},
      {[](auto& o) { o.report.smooth_method = "laplace"; }, "--smooth-method"},
      {[](auto& o) { o.ckpts = {"m.pt"}; }, "--ckpt needs --src"},
      {[](auto& o) {
         o.ckpts = {"m.pt"};
         o.src = "src.de";
       },
       "drop --hyp"},
      {[](auto& o) {
         o.ckpts = {"m.pt"};
         o.src = "src.de";
         o.hyps.clear();
         o.float_output = true;
       },
       "--float-output"},
      {[](auto& o) {
         o.ckpts = {"a.pt", "b.pt"};
         o.src = "s";
         o.hyps.clear();
         o.report.metrics = {"ppl"};
       },
       "--metric ppl scores one model"},
      {[](auto& o) {
         o.text = "test.en";
         o.ckpts = {"lm.pt"};
         o.report.metrics = {"ppl"};
       },
       "drop --ref"},
      {[](auto& o) {
         o.text = "test.en";
         o.refs.clear();
         o.hyps.clear();
       },
       "--metric ppl only"},
  };
  for (const auto& [change, word] : cases) {
    decode::EvalOptions o = ok;
    change(o);
    const std::string e = test::boundary_error<ConfigError>([&] { decode::validate(o); });
    EXPECT_NE(e.find(word), std::string::npos) << "'" << e << "' should name " << word;
  }
}

TEST(Evaluate, ScoresFilesOrTheInputStreamIntoTheGivenStream) {
  test::TempDir tmp;
  test::write_text(tmp / "ref.en", kRef);
  test::write_text(tmp / "hyp.en", kHyp);
  test::write_text(tmp / "same.en", kRef);
  test::write_text(tmp / "short.en", "The cat sat on the mat.\n");
  decode::EvalOptions o;
  o.refs = {(tmp / "ref.en").string()};
  o.report.metrics = {"bleu", "chrf"};
  o.report.json = true;

  // From the input stream: a JSON row per metric, as eval/ scores the lines.
  const auto rows = lines_of(evaluate_to_string(o, kHyp));
  ASSERT_EQ(rows.size(), 2u);
  const eval::References refs = {lines_of(kRef)};
  const eval::Score bleu = eval::corpus_score(*eval::make_bleu({}), lines_of(kHyp), refs);
  const auto j = nlohmann::json::parse(rows[0]);
  EXPECT_EQ(j["name"], "BLEU");
  EXPECT_DOUBLE_EQ(j["score"].get<double>(), bleu.score);
  EXPECT_EQ(j["signature"], bleu.signature);
  EXPECT_EQ(nlohmann::json::parse(rows[1])["name"], "chrF2");

  // Files: the same score, and sacreBLEU's one-line rendering with the signature.
  o.hyps = {(tmp / "hyp.en").string()};
  o.report.metrics = {"bleu"};
  o.report.json = false;
  const std::string text = evaluate_to_string(o, "ignored\n");
  EXPECT_EQ(text, "BLEU|" + bleu.signature + " = " + bleu.text.substr(std::string("BLEU = ").size()) + "\n");

  // Several systems: the paired test against the first.
  o.hyps = {(tmp / "hyp.en").string(), (tmp / "same.en").string()};
  o.report.paired_bs = true;
  o.report.confidence_n = 50;
  const auto paired = lines_of(evaluate_to_string(o));
  ASSERT_EQ(paired.size(), 3u) << evaluate_to_string(o);
  EXPECT_EQ(paired[0].rfind("Baseline " + o.hyps[0] + ": BLEU|", 0), 0u) << paired[0];
  EXPECT_EQ(paired[1].rfind("System   " + o.hyps[1] + ": BLEU|", 0), 0u) << paired[1];
  EXPECT_NE(paired[2].find("50 samples, seed 12345"), std::string::npos) << paired[2];

  // Bad input: DataError naming the file (or the stream).
  o.report.paired_bs = false;
  o.hyps = {(tmp / "short.en").string()};
  EXPECT_NE(test::boundary_error<DataError>([&] { evaluate_to_string(o); }).find("short.en' has 1 lines"),
            std::string::npos);
  o.hyps.clear();
  EXPECT_NE(test::boundary_error<DataError>([&] { evaluate_to_string(o, ""); }).find("stdin is empty"),
            std::string::npos);
  EXPECT_NE(test::boundary_error<DataError>([&] { evaluate_to_string(o, "a\n\xff\n"); }).find("stdin:2"),
            std::string::npos);
}

TEST(Evaluate, TranslatesWithACheckpointThenScoresWithItsPerplexity) {
  test::TempDir tmp;
  config::Config c = test::toy_setup(tmp);
  const tokenizer::Tokenizer tok = data::prepare_data(c).tokenizer;
  torch::manual_seed(5);
  model::Transformer model = bundle::build_model(c, tok);
  bundle::save_bundle(tmp / "m.pt", c, tok, model);
  const std::vector<std::string> src = {"ein Hund läuft", "eine Frau liest ein Buch"};
  const std::vector<std::string> ref = {"a dog runs", "a woman reads a book"};
  test::write_text(tmp / "src.de", src[0] + "\n" + src[1] + "\n");
  test::write_text(tmp / "ref.en", ref[0] + "\n" + ref[1] + "\n");

  decode::EvalOptions o;
  o.ckpts = {(tmp / "m.pt").string()};
  o.src = (tmp / "src.de").string();
  o.refs = {(tmp / "ref.en").string()};
  o.output = (tmp / "out.en").string();
  o.report.metrics = {"bleu", "ppl"};
  o.report.json = true;
  o.decode = [](config::DecodeConfig d) {
    d.beam = 2;
    return d;
  };
  o.device = mtx::DeviceChoice::cpu;
  o.threads = 1;
  const auto rows = lines_of(evaluate_to_string(o));
  ASSERT_EQ(rows.size(), 2u);

  // What the library's parts give on their own: the translator's output, its BLEU, the teacher-forced loss.
  decode::TranslateOptions to = decode::options_from_config(c.decode);
  to.search.beam = 2;
  to.search.nbest = 1;
  decode::Translator translator(model, tok, to);
  std::vector<std::string> hyps;
  for (const auto& t : translator.translate(src)) hyps.push_back(t.texts.empty() ? "" : t.texts.front());
  EXPECT_EQ(lines_of(evaluate_to_string(o)), rows) << "deterministic";
  std::ifstream written(tmp / "out.en");
  std::stringstream out;
  out << written.rdbuf();
  EXPECT_EQ(lines_of(out.str()), hyps);
  const auto bleu = nlohmann::json::parse(rows[0]);
  EXPECT_DOUBLE_EQ(bleu["score"].get<double>(), eval::corpus_score(*eval::make_bleu({}), hyps, {ref}).score);
  data::ParallelCorpus pc;
  pc.src = src;
  pc.tgt = ref;
  const auto corpus = data::encode_corpus(tok, pc, c.model.max_len, 1);
  const decode::LossEvaluation loss =
      decode::evaluate_loss(model, corpus, tok.special_ids(), c.train.max_tokens, torch::Device(torch::kCPU));
  const auto ppl = nlohmann::json::parse(rows[1]);
  EXPECT_EQ(ppl["name"], "PPL");
  EXPECT_NEAR(ppl["loss"].get<double>(), loss.loss, 1e-6);
  EXPECT_EQ(ppl["tokens"].get<int64_t>(), loss.tokens);

  // ppl alone: no text metric, the perplexity row only.
  o.report.metrics = {"ppl"};
  EXPECT_EQ(lines_of(evaluate_to_string(o)), std::vector<std::string>{rows[1]});
}
