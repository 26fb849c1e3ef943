#include "mtx/decode/translator.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sstream>

#include "mtx/data/prepare.h"
#include "mtx/decode/stream.h"
#include "mtx/train/checkpoint.h"
#include "test_utils.h"

using namespace mtx;

namespace {

// A tokenizer trained on the toy corpus and a small random model: its outputs are arbitrary but
// deterministic, which is all these properties need.
struct Toy {
  test::TempDir tmp;
  config::Config config;
  std::optional<tokenizer::Tokenizer> tok;
  model::Transformer model{nullptr};

  Toy() {
    config = test::toy_setup(tmp);
    config.model.dropout = 0.1;  // must not matter: translation runs in eval mode
    tok = data::prepare_data(config).tokenizer;
    torch::manual_seed(11);
    model = train::build_model(config, *tok);
  }

  decode::Translator translator(int beam, int batch_tokens = 4096, int nbest = 1) {
    decode::TranslateOptions o;
    o.search.beam = beam;
    o.search.nbest = nbest;
    o.batch_tokens = batch_tokens;
    return decode::Translator(model, *tok, o);
  }
};

const std::vector<std::string> kLines = {"ein Hund läuft", "zwei Männer spielen Fußball im Park heute",
                                         "Kinder", "eine Frau liest ein Buch", "ein Mann fährt Fahrrad und ein Hund läuft"};

// Plain greedy decoding by re-running the whole decoder each step (no cache, no search component).
std::vector<int32_t> naive_greedy(model::Transformer& m, const std::vector<int32_t>& src_ids, int64_t max_len,
                                  const tokenizer::SpecialIds& ids) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> src(src_ids.begin(), src_ids.end());
  src.push_back(ids.eos);
  const torch::Tensor s = torch::tensor(src, torch::kLong).unsqueeze(0);
  std::vector<int64_t> tgt = {ids.bos};
  std::vector<int32_t> out;
  for (int64_t t = 0; t < max_len; ++t) {
    const torch::Tensor logits = m->forward(s, torch::tensor(tgt, torch::kLong).unsqueeze(0));  // [1, t, V]
    int64_t next = logits[0][-1].argmax().item<int64_t>();
    if (t + 1 >= max_len) next = ids.eos;
    if (next == ids.eos) break;
    out.push_back(int32_t(next));
    tgt.push_back(next);
  }
  return out;
}

}  // namespace

TEST(Translator, GreedyIsBeamOneAndMatchesNaiveDecoding) {
  Toy toy;
  auto tr = toy.translator(1);
  toy.model->eval();
  for (const auto& line : kLines) {
    const auto src = toy.tok->src().encode(line);
    const auto hyps = tr.translate_ids({src});
    const int64_t limit = int64_t(std::floor(1.2 * double(src.size()) + 10));
    EXPECT_EQ(hyps[0][0].tokens, naive_greedy(toy.model, src, limit, toy.tok->special_ids())) << line;
  }
}

TEST(Translator, OutputDoesNotDependOnTheBatch) {
  Toy toy;
  for (const int beam : {1, 5}) {
    auto together = toy.translator(beam).translate(kLines);
    auto tiny_batches = toy.translator(beam, 12).translate(kLines);  // a sentence or two per batch
    ASSERT_EQ(together.size(), kLines.size());
    for (size_t i = 0; i < kLines.size(); ++i) {
      const auto alone = toy.translator(beam).translate({kLines[i]});
      ASSERT_EQ(alone[0].hypotheses.size(), 1u);
      EXPECT_EQ(together[i].hypotheses[0].tokens, alone[0].hypotheses[0].tokens) << "beam " << beam << ": " << kLines[i];
      EXPECT_NEAR(together[i].hypotheses[0].score, alone[0].hypotheses[0].score, 1e-4);
      EXPECT_EQ(tiny_batches[i].hypotheses[0].tokens, alone[0].hypotheses[0].tokens);
      EXPECT_EQ(together[i].texts[0], alone[0].texts[0]) << "outputs come back in input order";
    }
  }
}

TEST(Translator, NbestGivesSortedDistinctHypotheses) {
  Toy toy;
  const auto out = toy.translator(5, 4096, 3).translate({kLines[1]});
  ASSERT_EQ(out[0].hypotheses.size(), 3u);
  ASSERT_EQ(out[0].texts.size(), 3u);
  EXPECT_GE(out[0].hypotheses[0].score, out[0].hypotheses[1].score);
  EXPECT_GE(out[0].hypotheses[1].score, out[0].hypotheses[2].score);
  EXPECT_NE(out[0].hypotheses[0].tokens, out[0].hypotheses[1].tokens);
}

TEST(TranslateStream, OneLineOutPerLineInWhateverTheInput) {
  Toy toy;
  auto tr = toy.translator(2);
  std::string overlong;
  for (int i = 0; i < 100; ++i) overlong += "ein Hund läuft ";  // ~300 tokens; the model allows 63
  const std::string input = kLines[0] + "\n\n" + "bad \xff\xfe line\n" + overlong + "\n" + kLines[3];  // no final \n
  std::istringstream in(input);
  std::ostringstream out;
  auto source = decode::istream_line_source(in);
  decode::StreamOptions so;
  so.chunk_lines = 2;  // several chunks
  const auto stats = decode::translate_stream(tr, *source, out, so);
  std::vector<std::string> lines;
  std::istringstream read(out.str());
  for (std::string l; std::getline(read, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 5u) << out.str();
  EXPECT_EQ(stats.lines, 5);
  EXPECT_EQ(stats.invalid_utf8, 1);
  EXPECT_EQ(stats.truncated, 1);
  EXPECT_EQ(stats.translated, 3);
  EXPECT_EQ(lines[1], "") << "empty in, empty out";
  EXPECT_EQ(lines[2], "") << "invalid UTF-8: empty out";
  EXPECT_EQ(lines[0], tr.translate({kLines[0]})[0].texts[0]);
  EXPECT_EQ(lines[4], tr.translate({kLines[3]})[0].texts[0]);
}

TEST(TranslateStream, NbestFormatIsParseable) {
  Toy toy;
  auto tr = toy.translator(4, 4096, 2);
  std::istringstream in(kLines[0] + "\n\n" + kLines[2] + "\n");
  std::ostringstream out;
  auto source = decode::istream_line_source(in);
  decode::StreamOptions so;
  so.nbest_format = true;
  decode::translate_stream(tr, *source, out, so);
  std::istringstream read(out.str());
  std::vector<int> indices;
  for (std::string l; std::getline(read, l);) {
    const size_t a = l.find(" ||| "), b = l.rfind(" ||| ");
    ASSERT_NE(a, std::string::npos) << l;
    ASSERT_NE(a, b) << l;
    indices.push_back(std::stoi(l.substr(0, a)));
    EXPECT_NO_THROW(std::stod(l.substr(b + 5))) << l;
  }
  EXPECT_EQ(indices, (std::vector<int>{0, 0, 1, 2, 2})) << "two per line; one empty entry for the empty line";
}

// Defect 7 of issue #12: search never yields pad or BOS, even from a model that prefers them.
TEST(Translator, NeverGeneratesPadOrBos) {
  Toy toy;
  toy.config.model.tie_output = false;
  toy.model = train::build_model(toy.config, *toy.tok);
  const auto ids = toy.tok->special_ids();
  {
    torch::NoGradGuard g;
    auto bias = toy.model->named_parameters()["output.bias"];
    bias[ids.pad].fill_(50);
    bias[ids.bos].fill_(49);
  }
  for (const int beam : {1, 4}) {
    const auto hyps = toy.translator(beam).translate_ids({toy.tok->src().encode(kLines[0])});
    ASSERT_FALSE(hyps[0].empty());
    EXPECT_FALSE(hyps[0][0].tokens.empty());
    for (const int32_t t : hyps[0][0].tokens) {
      EXPECT_NE(t, ids.pad) << "beam " << beam;
      EXPECT_NE(t, ids.bos) << "beam " << beam;
    }
  }
}
