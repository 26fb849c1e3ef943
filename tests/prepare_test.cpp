#include "mtx/data/prepare.h"

#include <gtest/gtest.h>

#include "mtx/data/batcher.h"
#include "mtx/util/errors.h"
#include "test_utils.h"

namespace fs = std::filesystem;
namespace data = mtx::data;

namespace {

mtx::config::Config small_setup(const mtx::test::TempDir& tmp) { return mtx::test::toy_setup(tmp); }

}  // namespace

TEST(Prepare, EncodesSplitsAndReusesTheCache) {
  mtx::test::TempDir tmp;
  const mtx::config::Config c = small_setup(tmp);
  const data::PreparedData first = data::prepare_data(c);
  EXPECT_FALSE(first.tokenizer_reused);
  EXPECT_FALSE(first.corpus_reused);
  EXPECT_EQ(first.filter.read, 301u);
  EXPECT_EQ(first.filter.too_long, 1u);
  EXPECT_EQ(first.train.size(), 300u);
  ASSERT_TRUE(first.valid.has_value());
  EXPECT_EQ(first.valid->size(), 20u);
  EXPECT_FALSE(first.test.has_value());
  EXPECT_EQ(first.tokenizer.src().decode(first.train.src[1].data, first.train.src[1].size),
            "zwei Männer spielen Fußball");
  EXPECT_TRUE(fs::exists(first.corpus_dir / "config.json")) << "resolved config written next to the outputs";

  const data::PreparedData second = data::prepare_data(c);
  EXPECT_TRUE(second.tokenizer_reused);
  EXPECT_TRUE(second.corpus_reused);
  EXPECT_EQ(second.corpus_dir, first.corpus_dir);
  EXPECT_EQ(second.tokenizer.hash(), first.tokenizer.hash());
  EXPECT_EQ(second.train.src.ids(), first.train.src.ids());
  EXPECT_EQ(second.train.tgt.offsets(), first.train.tgt.offsets());
  EXPECT_EQ(second.filter.too_long, 1u);

  // Changing a validation file keeps the tokenizer (trained on train only) but re-encodes.
  std::string ven;
  for (int i = 0; i < 20; ++i) ven += "changed " + std::to_string(i) + "\n";
  mtx::test::write_text(tmp / "data" / "val.en", ven);
  const data::PreparedData third = data::prepare_data(c);
  EXPECT_TRUE(third.tokenizer_reused);
  EXPECT_FALSE(third.corpus_reused);
  EXPECT_NE(third.corpus_dir, first.corpus_dir);

  // Changing the training data re-trains the tokenizer too.
  std::string ten;
  for (int i = 0; i < 301; ++i) ten += "new english text " + std::to_string(i % 13) + "\n";
  mtx::test::write_gzip(tmp / "data" / "train.en.gz", ten);
  const data::PreparedData fourth = data::prepare_data(c);
  EXPECT_FALSE(fourth.tokenizer_reused);
  EXPECT_NE(fourth.tokenizer.hash(), first.tokenizer.hash());
}

TEST(Prepare, DirectionFollowsTheLanguageKeys) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = small_setup(tmp);
  std::swap(c.data.src_lang, c.data.tgt_lang);  // en -> de
  const data::PreparedData p = data::prepare_data(c);
  EXPECT_EQ(p.tokenizer.src().decode(p.train.src[1].data, p.train.src[1].size), "two men play soccer");
  EXPECT_EQ(p.tokenizer.tgt().decode(p.train.tgt[1].data, p.train.tgt[1].size), "zwei Männer spielen Fußball");
}

TEST(Prepare, MissingSplitIsNamedBeforeAnyWork) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = small_setup(tmp);
  c.data.valid = "dev";
  try {
    data::prepare_data(c);
    FAIL() << "expected a DataError";
  } catch (const mtx::DataError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("data.valid"), std::string::npos) << msg;
    EXPECT_NE(msg.find("dev.de.gz"), std::string::npos) << msg;
    EXPECT_EQ(e.exit_code(), 2);
  }
  EXPECT_FALSE(fs::exists(tmp / "cache")) << "nothing was trained before the check";
  c.data.dir = (tmp / "nowhere").string();
  EXPECT_THROW(data::find_data_files(c.data), mtx::DataError);
}

TEST(Prepare, CorpusFileRoundTripsAndRejectsGarbage) {
  mtx::test::TempDir tmp;
  data::EncodedCorpus c;
  c.src.push_back(std::vector<int32_t>{5, 6, 7});
  c.tgt.push_back(std::vector<int32_t>{8});
  c.src.push_back(std::vector<int32_t>{});
  c.tgt.push_back(std::vector<int32_t>{9, 10});
  c.truncated = 4;
  data::save_corpus(c, tmp / "c.bin");
  const data::EncodedCorpus d = data::load_corpus(tmp / "c.bin");
  EXPECT_EQ(d.src.ids(), c.src.ids());
  EXPECT_EQ(d.tgt.offsets(), c.tgt.offsets());
  EXPECT_EQ(d.truncated, 4u);
  mtx::test::write_text(tmp / "bad.bin", "not a corpus");
  EXPECT_THROW(data::load_corpus(tmp / "bad.bin"), mtx::DataError);
}

TEST(Prepare, Multi30kPaddingEfficiencyAt4096Tokens) {
  MTX_REQUIRE_MULTI30K();
  mtx::test::TempDir tmp;
  mtx::config::Config c;
  c.data.dir = mtx::test::multi30k_dir().string();
  c.data.cache_dir = (tmp / "cache").string();
  c.tokenizer.vocab_size = 8000;
  const data::PreparedData p = data::prepare_data(c);
  EXPECT_EQ(p.filter.read, 29000u);
  EXPECT_EQ(p.valid->size(), 1014u);
  EXPECT_EQ(p.test->size(), 1000u);
  data::BatcherOptions o;
  o.max_tokens = 4096;
  const data::Batcher b = data::Batcher::for_corpus(p.train, o);
  const data::PaddingStats s = b.padding(b.plan(1));
  std::printf("Multi30k train at 4096 tokens: %lld batches, padding efficiency %.2f%%\n",
              static_cast<long long>(s.batches), 100.0 * s.efficiency());
  EXPECT_GT(s.efficiency(), 0.85);
  EXPECT_LE(s.max_batch_slots, 4096);
}
