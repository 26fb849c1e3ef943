// Word alignments (decode/align.h): pieces to words, the shape of what align_words returns, and the formats.
// Whether they are right on a trained model: scripts/checks/align_pairs.sh (ctest Align.KnownWordPairs...).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <regex>

#include "mtx/bundle/bundle.h"
#include "mtx/data/prepare.h"
#include "mtx/decode/align.h"
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

TEST(Align, EveryTargetWordGetsOneSourceWordFromAChosenLayer) {
  test::TempDir tmp;
  config::Config config = test::toy_setup(tmp);
  const tokenizer::Tokenizer tok = data::prepare_data(config).tokenizer;
  torch::manual_seed(5);
  model::Transformer model = bundle::build_model(config, tok);
  model->eval();
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
