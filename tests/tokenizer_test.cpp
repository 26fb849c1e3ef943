#include "mtx/tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mtx/data/corpus.h"
#include "mtx/util/errors.h"
#include "test_utils.h"

namespace fs = std::filesystem;
namespace tok = mtx::tokenizer;

namespace {

// One tokenizer trained on Multi30k train (both sides, joint unigram) for the whole suite.
const tok::Tokenizer& multi30k_tokenizer() {
  static const tok::Tokenizer t = [] {
    const auto corpus =
        mtx::data::read_parallel(mtx::test::multi30k_dir() / "train.de.gz", mtx::test::multi30k_dir() / "train.en.gz");
    mtx::config::TokenizerConfig s;
    s.vocab_size = 4000;
    return tok::Tokenizer::train(s, corpus.src, corpus.tgt);
  }();
  return t;
}

// A small tokenizer trained on generated text (fast; no Multi30k needed).
tok::Tokenizer toy_tokenizer(bool joint, mtx::config::SpmType type) {
  std::vector<std::string> de(400), en(400);
  const char* words_de[] = {"ein", "Hund", "läuft", "im", "Park", "zwei", "Männer", "spielen", "Fußball", "Frau"};
  const char* words_en[] = {"a", "dog", "runs", "in", "the", "park", "two", "men", "play", "soccer", "woman"};
  for (int i = 0; i < 400; ++i) {
    for (int k = 0; k < 6; ++k) de[i] += std::string(words_de[(i * 7 + k * 3) % 10]) + (k < 5 ? " " : "");
    for (int k = 0; k < 6; ++k) en[i] += std::string(words_en[(i * 5 + k * 2) % 11]) + (k < 5 ? " " : "");
  }
  mtx::config::TokenizerConfig s;
  s.vocab_size = 300;
  s.joint = joint;
  s.type = type;
  return tok::Tokenizer::train(s, de, en);
}

}  // namespace

TEST(Tokenizer, SpecialIdsAreFixed) {
  const tok::Tokenizer t = toy_tokenizer(true, mtx::config::SpmType::unigram);
  const tok::SpecialIds ids = t.special_ids();
  EXPECT_EQ(ids.pad, 0);
  EXPECT_EQ(ids.unk, 1);
  EXPECT_EQ(ids.bos, 2);
  EXPECT_EQ(ids.eos, 3);
  EXPECT_EQ(t.src().piece(0), "<pad>");
  EXPECT_EQ(t.src().piece(3), "</s>");
  EXPECT_TRUE(t.joint());
  EXPECT_EQ(t.src().vocab_size(), 300);
}

TEST(Tokenizer, RoundTripsTrickyTextIncludingUnseenCharacters) {
  for (auto type : {mtx::config::SpmType::unigram, mtx::config::SpmType::bpe}) {
    const tok::Tokenizer t = toy_tokenizer(true, type);
    for (const std::string s : {"ein Hund läuft im Park", "  leading and  double  spaces ", "tab\there", "",
                                "Ünïcödé 東京 😀 € “quotes” — dash", "x", "ZWEI MÄNNER!!!"}) {
      const auto ids = t.src().encode(s);
      EXPECT_EQ(t.src().decode(ids), s) << "type " << mtx::config::to_string(type);
      for (int32_t id : ids) EXPECT_NE(id, t.special_ids().unk) << "byte fallback leaves no <unk>: " << s;
    }
  }
}

TEST(Tokenizer, SaveLoadAndFromBytesKeepTheHash) {
  mtx::test::TempDir tmp;
  const tok::Tokenizer joint = toy_tokenizer(true, mtx::config::SpmType::unigram);
  joint.save(tmp / "saved");
  const tok::Tokenizer loaded = tok::Tokenizer::load(tmp / "saved");
  EXPECT_EQ(loaded.hash(), joint.hash());
  EXPECT_TRUE(loaded.joint());
  EXPECT_EQ(loaded.src().encode("zwei Männer"), joint.src().encode("zwei Männer"));
  EXPECT_EQ(tok::Tokenizer::from_bytes(joint.src().bytes(), "").hash(), joint.hash());
  EXPECT_EQ(loaded.describe()["special_ids"]["eos"], 3);

  mtx::test::TempDir tmp2;
  const tok::Tokenizer separate = toy_tokenizer(false, mtx::config::SpmType::bpe);
  EXPECT_FALSE(separate.joint());
  EXPECT_NE(separate.hash(), joint.hash());
  separate.save(tmp2 / "saved");
  const tok::Tokenizer loaded2 = tok::Tokenizer::load(tmp2 / "saved");
  EXPECT_FALSE(loaded2.joint());
  EXPECT_EQ(loaded2.hash(), separate.hash());
  EXPECT_TRUE(fs::exists(tmp2 / "saved" / "src.model"));
  EXPECT_TRUE(fs::exists(tmp2 / "saved" / "tgt.model"));
}

TEST(Tokenizer, TrainingIsDeterministic) {
  const tok::Tokenizer a = toy_tokenizer(true, mtx::config::SpmType::unigram);
  const tok::Tokenizer b = toy_tokenizer(true, mtx::config::SpmType::unigram);
  EXPECT_EQ(a.src().bytes(), b.src().bytes());
  EXPECT_EQ(a.hash(), b.hash());
}

TEST(Tokenizer, BadInputsAreReported) {
  EXPECT_THROW(tok::SpmModel::from_bytes("definitely not a model"), mtx::DataError);
  mtx::test::TempDir tmp;
  EXPECT_THROW(tok::Tokenizer::load(tmp.path()), mtx::DataError);
}

TEST(Tokenizer, LosslessOnEveryMulti30kValidationLine) {
  MTX_REQUIRE_MULTI30K();
  const tok::Tokenizer& t = multi30k_tokenizer();
  size_t lines = 0;
  for (const char* file : {"val.de.gz", "val.en.gz"}) {
    const auto text = mtx::data::read_lines(mtx::test::multi30k_dir() / file);
    ASSERT_EQ(text.size(), 1014u);
    const tok::Model& m = std::string(file).find(".de") != std::string::npos ? t.src() : t.tgt();
    for (size_t i = 0; i < text.size(); ++i) {
      ASSERT_EQ(m.decode(m.encode(text[i])), text[i]) << file << " line " << i + 1;
      ++lines;
    }
  }
  EXPECT_EQ(lines, 2028u);
}

// A sentencepiece model read through a vocabulary of its own (Marian's vocab.json): ids are the vocabulary's,
// pieces it lacks are <unk>, and the text comes back through sentencepiece; the bytes carry the vocabulary.
TEST(Tokenizer, VocabularyModelMapsPiecesToItsOwnIds) {
  const tok::Tokenizer base = toy_tokenizer(true, mtx::config::SpmType::unigram);
  const auto& spm = dynamic_cast<const tok::SpmModel&>(base.src());
  auto spm_ptr = tok::SpmModel::from_bytes(spm.bytes());
  // The vocabulary: mtx's special pieces at 0..3, then the model's other pieces in reverse order, less the first
  // one "Hund" encodes to, plus a piece the model lacks.
  const int32_t hund = spm.encode("Hund").front();
  std::vector<std::string> pieces = {"<pad>", "<unk>", "<s>", "</s>"};
  for (int32_t id = spm.vocab_size() - 1; id >= 4; --id) {
    if (id != hund) pieces.push_back(spm.piece(id));
  }
  pieces.push_back("▁nowhere");
  auto model = tok::VocabModel::create(spm_ptr, pieces, tok::SpecialIds{});
  EXPECT_EQ(model->vocab_size(), int32_t(pieces.size()));
  const std::string text = "zwei Männer spielen im Park";
  const std::vector<int32_t> spm_ids = spm.encode(text), ids = model->encode(text);
  ASSERT_EQ(ids.size(), spm_ids.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(model->piece(ids[i]), spm.piece(spm_ids[i])) << i;
  EXPECT_EQ(model->decode(ids), text);
  EXPECT_EQ(model->encode("Hund").front(), 1) << "a piece the vocabulary lacks is <unk>";
  EXPECT_EQ(model->decode(std::vector<int32_t>{int32_t(pieces.size()) - 1}), spm.decode(std::vector<int32_t>{1}))
      << "a piece the model lacks decodes as its unknown piece";
  // Through bytes, as a checkpoint stores it: the same ids, and another hash than the model alone.
  const tok::Tokenizer loaded = tok::Tokenizer::from_bytes(model->bytes(), model->bytes());
  EXPECT_EQ(loaded.src().encode(text), ids);
  EXPECT_EQ(loaded.src().kind(), "sentencepiece+vocabulary");
  EXPECT_NE(loaded.src().sha256(), spm.sha256());
  // Bad vocabularies are named.
  auto twice = pieces;
  twice.push_back("▁nowhere");
  EXPECT_THROW(tok::VocabModel::create(spm_ptr, twice, tok::SpecialIds{}), mtx::DataError);
  EXPECT_THROW(tok::VocabModel::create(spm_ptr, {"<pad>", "<unk>"}, tok::SpecialIds{}), mtx::DataError);
  std::string damaged = model->bytes();
  damaged[20] = '!';
  EXPECT_THROW(tok::VocabModel::from_bytes(damaged), mtx::DataError);
}
