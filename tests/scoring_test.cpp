// mtx score's work (decode::score_pairs): teacher-forced log-probabilities per pair and per token, the same in
// any company, equal to what a translation's search counted for its own output.
#include "mtx/decode/scoring.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include "mtx/bundle/bundle.h"
#include "mtx/data/prepare.h"
#include "mtx/decode/translator.h"
#include "test_utils.h"

namespace mtx {
namespace {

const std::vector<std::string> kPairLines = {"ein Hund läuft", "zwei Männer spielen Fußball im Park heute", "Kinder",
                                             "eine Frau liest ein Buch", "ein Hund läuft"};

TEST(Scoring, PairScoresAreTeacherForcedAndTheSameInAnyCompany) {
  test::TempDir tmp;
  config::Config c = test::toy_setup(tmp);
  tokenizer::Tokenizer tok = data::prepare_data(c).tokenizer;
  torch::manual_seed(4);
  std::vector<model::Transformer> models = {bundle::build_model(c, tok)};
  models.front()->eval();
  const auto ids = tok.special_ids();
  decode::TranslateOptions o;
  o.search.beam = 1;
  decode::Translator translator(models, tok, o);
  std::vector<std::vector<int32_t>> sources, targets;
  for (const auto& line : kPairLines) sources.push_back(tok.src().encode(line));
  const auto hyps = translator.translate_ids(sources);
  for (const auto& h : hyps) targets.push_back(h.at(0).tokens);
  targets[4] = tok.tgt().encode("a dog runs");  // one pair the model did not write
  const auto all = decode::score_pairs(models, ids, sources, targets);
  ASSERT_EQ(all.size(), sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    // Alone: the same numbers, bit for bit.
    const auto one = decode::score_pairs(models, ids, {sources[i]}, {targets[i]});
    EXPECT_EQ(one[0].token_log_probs, all[i].token_log_probs) << "pair " << i;
    ASSERT_EQ(all[i].tokens.size(), targets[i].size() + 1);
    EXPECT_EQ(all[i].tokens.back(), ids.eos);
    double sum = 0;
    for (const double v : all[i].token_log_probs) sum += v;
    EXPECT_DOUBLE_EQ(sum, all[i].log_prob);
    // The teacher-forced numbers: the full forward pass, log-softmax in double.
    std::vector<int64_t> src(sources[i].begin(), sources[i].end()), in = {ids.bos};
    src.push_back(ids.eos);
    for (const int32_t t : targets[i]) in.push_back(t);
    const torch::Tensor lp = torch::log_softmax(
        models.front()->forward(torch::tensor(src).unsqueeze(0), torch::tensor(in).unsqueeze(0))[0].to(torch::kDouble),
        -1);  // [T, V]
    for (size_t j = 0; j < all[i].tokens.size(); ++j) {
      EXPECT_NEAR(all[i].token_log_probs[j], lp[int64_t(j)][all[i].tokens[j]].item<double>(), 1e-5) << i << " " << j;
    }
    // And what the search counted for its own output (incremental decoding, fp32 sums).
    if (i < 4) {
      EXPECT_NEAR(all[i].log_prob, hyps[i][0].log_prob, 1e-3) << "pair " << i;
    }
  }
  // A target longer than the model writes is named.
  std::vector<int32_t> long_target(size_t(c.model.max_len + 5), targets[0].empty() ? 5 : targets[0][0]);
  EXPECT_THROW(decode::score_pairs(models, ids, {sources[0]}, {long_target}), ConfigError);
}

TEST(Scoring, MtxScoreReadsPairsFromFilesOrTabSeparatedStdin) {
  test::TempDir tmp;
  config::Config c = test::toy_setup(tmp);
  tokenizer::Tokenizer tok = data::prepare_data(c).tokenizer;
  model::Transformer model = bundle::build_model(c, tok);
  bundle::save_bundle(tmp / "m.pt", c, tok, model);
  test::write_text(tmp / "src.de", "ein Hund läuft\nKinder\n");
  test::write_text(tmp / "tgt.en", "a dog runs\nchildren\n");
  test::write_text(tmp / "pairs.tsv", "ein Hund läuft\ta dog runs\nKinder\tchildren\n");
  const std::string ckpt = (tmp / "m.pt").string();
  const test::CommandResult files = test::run_mtx("score --ckpt " + ckpt + " --src " + (tmp / "src.de").string() +
                                                  " --tgt " + (tmp / "tgt.en").string() + " 2>/dev/null");
  ASSERT_EQ(files.code, 0) << files.output;
  const test::CommandResult piped =
      test::run_mtx("score --ckpt " + ckpt + " --tokens < " + (tmp / "pairs.tsv").string() + " 2>/dev/null");
  ASSERT_EQ(piped.code, 0) << piped.output;
  std::istringstream a(files.output), b(piped.output);
  std::string la, lb;
  int lines = 0;
  while (std::getline(a, la) && std::getline(b, lb)) {
    ++lines;
    EXPECT_EQ(lb.substr(0, lb.find(" |||")), la);
    EXPECT_NE(lb.find(" ||| "), std::string::npos) << lb;
    EXPECT_LT(std::stod(la), 0.0);
  }
  EXPECT_EQ(lines, 2);
  const test::CommandResult bad = test::run_mtx("score --ckpt " + ckpt + " < " + (tmp / "src.de").string());
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("stdin line 1: no tab"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace mtx
