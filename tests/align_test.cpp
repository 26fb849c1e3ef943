// Word alignments (decode/align.h): pieces to words, the shape of what align_words returns, and the formats.
// Whether they are right on a trained model: scripts/checks/align_pairs.sh (ctest Align.KnownWordPairs...).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <regex>

#include "mtx/bundle/bundle.h"
#include "mtx/data/prepare.h"
#include "mtx/decode/align.h"
#include "mtx/decode/translator.h"
#include "mtx/util/errors.h"
#include "test_utils.h"

using namespace mtx;

TEST(Align, PiecesJoinIntoTheWordsTheyStartOrContinue) {
  test::TempDir tmp;
  const config::Config config = test::toy_setup(tmp);
  const tokenizer::Tokenizer tok = data::prepare_data(config).tokenizer;
  const std::string text = "ein Hund läuft schnellstens";
  const std::vector<int32_t> ids = tok.src().encode(text);
  const std::vector<int> words = decode::word_of_pieces(tok.src(), ids);
  ASSERT_EQ(words.size(), ids.size());
  EXPECT_EQ(words.front(), 0);
  EXPECT_EQ(words.back(), 3);  // four whitespace words, however many pieces
  for (size_t i = 1; i < words.size(); ++i) EXPECT_TRUE(words[i] == words[i - 1] || words[i] == words[i - 1] + 1);
  EXPECT_GT(ids.size(), 4u) << "the test wants a word of several pieces";
}

namespace {

// The toy setup's tokenizer and a model drawn from `seed`, in eval mode.
struct ToyModel {
  config::Config config;
  tokenizer::Tokenizer tok;
  model::Transformer model;
};
ToyModel toy_model(const test::TempDir& tmp, uint64_t seed) {
  config::Config config = test::toy_setup(tmp);
  tokenizer::Tokenizer tok = data::prepare_data(config).tokenizer;
  torch::manual_seed(seed);
  model::Transformer model = bundle::build_model(config, tok);
  model->eval();
  return {config, tok, model};
}

}  // namespace

TEST(Align, EveryTargetWordGetsOneSourceWordFromAChosenLayer) {
  test::TempDir tmp;
  ToyModel toy = toy_model(tmp, 5);
  const tokenizer::Tokenizer& tok = toy.tok;
  model::Transformer& model = toy.model;
  const std::vector<int32_t> src = tok.src().encode("ein Hund läuft im Park");
  const std::vector<int32_t> tgt = tok.tgt().encode("a dog runs in the park");
  const int src_words = decode::word_of_pieces(tok.src(), src).back() + 1;
  const int tgt_words = decode::word_of_pieces(tok.tgt(), tgt).back() + 1;
  const decode::WordAlignment a = decode::align_words(model, tok, src, tgt);
  ASSERT_EQ(int(a.hard.size()), tgt_words);
  ASSERT_EQ(int(a.soft.size()), tgt_words);
  for (size_t w = 0; w < a.soft.size(); ++w) {
    ASSERT_EQ(int(a.soft[w].size()), src_words);
    float sum = 0;
    for (const float v : a.soft[w]) sum += v;
    EXPECT_NEAR(sum, 1.0, 1e-5);
    EXPECT_EQ(a.hard[w], int(std::max_element(a.soft[w].begin(), a.soft[w].end()) - a.soft[w].begin()));
  }
  // Pharaoh: "src-tgt" for each target word, in target order.
  const std::string pairs = decode::pharaoh(a);
  EXPECT_TRUE(std::regex_match(pairs, std::regex(R"(\d+-0( \d+-\d+)*)"))) << pairs;
  EXPECT_EQ(std::count(pairs.begin(), pairs.end(), '-'), tgt_words);
  const std::string soft = decode::soft_text(a);
  EXPECT_EQ(std::count(soft.begin(), soft.end(), ' '), tgt_words - 1);
  EXPECT_EQ(std::count(soft.begin(), soft.end(), ','), tgt_words * (src_words - 1));
  // Another layer reads other weights; a layer the model lacks is an error naming the range.
  const int layers = int(model->options.decoder_layers());
  if (layers > 1) {
    EXPECT_NE(decode::soft_text(decode::align_words(model, tok, src, tgt, 0)), soft);
  }
  const std::string e = test::boundary_error<ConfigError>([&] { decode::align_words(model, tok, src, tgt, layers); });
  EXPECT_NE(e.find("decoder layers 0.." + std::to_string(layers - 1)), std::string::npos) << e;
  EXPECT_TRUE(decode::align_words(model, tok, src, {}).hard.empty());
}

// A search asked for its attention (return_attention) chooses the same tokens, and each token's row is the
// teacher-forced cross-attention of the last layer over the source's pieces: the attention the text layer places
// inline markup with, without another pass over the model. In a batch of unequal lengths (padding), on one search
// and on several.
TEST(Align, SearchAttentionIsTheTeacherForcedAttention) {
  test::TempDir tmp;
  ToyModel toy = toy_model(tmp, 7);
  const config::Config& config = toy.config;
  const tokenizer::Tokenizer& tok = toy.tok;
  model::Transformer& model = toy.model;
  const std::vector<std::string> lines = {"ein Hund läuft im Park", "zwei Männer",
                                          "eine Frau liest ein Buch im Garten"};
  for (const int workers : {1, 2}) {
    decode::TranslateOptions plain = decode::options_from_config(config.decode);
    plain.search.beam = 3;
    plain.search.nbest = 2;
    plain.workers = workers;
    decode::TranslateOptions with = plain;
    with.search.return_attention = true;
    const std::vector<decode::Translation> a = decode::Translator(model, tok, plain).translate(lines);
    const std::vector<decode::Translation> b = decode::Translator(model, tok, with).translate(lines);
    ASSERT_EQ(a.size(), lines.size());
    ASSERT_EQ(b.size(), lines.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::vector<int32_t> src = tok.src().encode(lines[i]);
      ASSERT_EQ(a[i].hypotheses.size(), b[i].hypotheses.size());
      for (size_t n = 0; n < b[i].hypotheses.size(); ++n) {
        const decode::Hypothesis& h = b[i].hypotheses[n];
        EXPECT_EQ(h.tokens, a[i].hypotheses[n].tokens) << "line " << i << " hypothesis " << n;
        EXPECT_TRUE(a[i].hypotheses[n].attention.empty());
        ASSERT_EQ(h.attention.size(), h.tokens.size());
        if (h.tokens.empty()) continue;
        // Teacher-forced: source + EOS, BOS + tokens; row j produced token j.
        std::vector<int64_t> s(src.begin(), src.end()), t = {tok.special_ids().bos};
        s.push_back(tok.special_ids().eos);
        t.insert(t.end(), h.tokens.begin(), h.tokens.end());
        const torch::Tensor forced =
            model->cross_attention(torch::tensor(s).unsqueeze(0), torch::tensor(t).unsqueeze(0)).back().mean(1)[0];
        for (size_t j = 0; j < h.tokens.size(); ++j) {
          ASSERT_EQ(h.attention[j].size(), src.size());
          float sum = 0;
          for (size_t k = 0; k < src.size(); ++k) {
            EXPECT_NEAR(h.attention[j][k], forced[int64_t(j)][int64_t(k)].item<float>(), 1e-4)
                << "line " << i << " token " << j << " source piece " << k;
            sum += h.attention[j][k];
          }
          EXPECT_LE(sum, 1.0f + 1e-5f);  // the EOS column is left out
        }
      }
    }
  }
}
