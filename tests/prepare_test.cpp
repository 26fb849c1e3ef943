#include "mtx/data/prepare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mtx/data/batch.h"
#include "mtx/data/batch_sampler.h"
#include "mtx/util/atomic_file.h"
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
  EXPECT_EQ(second.train.src.all_ids(), first.train.src.all_ids());
  EXPECT_EQ(second.train.tgt.all_ids(), first.train.tgt.all_ids());
  EXPECT_TRUE(second.train.src.mapped()) << "a prepared corpus is read through the page cache";
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
  EXPECT_EQ(d.src.all_ids(), c.src.all_ids());
  EXPECT_EQ(d.tgt.all_ids(), c.tgt.all_ids());
  EXPECT_EQ(d.tgt.length(1), 2u);
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
  data::BatchSamplerOptions o;
  o.max_tokens = 4096;
  const data::BatchSampler b = data::BatchSampler::for_corpus(p.train, o);
  const data::PaddingStats s = b.padding(b.plan(1));
  std::printf("Multi30k train at 4096 tokens: %lld batches, padding efficiency %.2f%%\n",
              static_cast<long long>(s.batches), 100.0 * s.efficiency());
  EXPECT_GT(s.efficiency(), 0.85);
  EXPECT_LE(s.max_batch_slots, 4096);
}

namespace {

// Two files of n pairs: line i is "s<i> ..." / "t<i> ...", every 10th pair too long for a 3-token filter.
data::SplitFiles numbered_pairs(const mtx::test::TempDir& tmp, int n) {
  std::string s, t;
  for (int i = 0; i < n; ++i) {
    // (appended piece by piece: GCC 12 warns falsely on "literal" + std::string&& under -fPIC)
    const std::string number = std::to_string(i);
    s.append("s").append(number).append(i % 10 == 9 ? " a b c d" : " a").append("\n");
    t.append("t").append(number).append("\n");
  }
  mtx::test::write_text(tmp / "p.de", s);
  mtx::test::write_gzip(tmp / "p.en.gz", t);
  return {tmp / "p.de", tmp / "p.en.gz"};
}

std::vector<int> numbers(const std::vector<std::string>& lines) {
  std::vector<int> out;
  for (const auto& l : lines) out.push_back(std::stoi(l.substr(1)));
  return out;
}

}  // namespace

TEST(Prepare, TokenizerSampleIsASeededReservoirInFileOrder) {
  mtx::test::TempDir tmp;
  const data::SplitFiles f = numbered_pairs(tmp, 1000);
  const data::LengthFilter filter{0, 3, 0};
  const auto all = data::sample_pairs(f, filter, 0, 1);
  EXPECT_EQ(all.size(), 900u) << "the filter applies before sampling";
  EXPECT_EQ(all.stats.read, 1000u);
  EXPECT_EQ(data::sample_pairs(f, filter, 900, 1).src, all.src) << "k >= the pairs: all of them, in order";

  const auto a = data::sample_pairs(f, filter, 50, 7);
  ASSERT_EQ(a.size(), 50u);
  EXPECT_EQ(a.stats.kept, 900u);
  const std::vector<int> na = numbers(a.src), ta = numbers(a.tgt);
  EXPECT_EQ(na, ta) << "pairs stay pairs";
  EXPECT_TRUE(std::is_sorted(na.begin(), na.end())) << "file order";
  for (int i : na) EXPECT_NE(i % 10, 9) << "filtered pairs are never sampled";
  EXPECT_GT(na.back() - na.front(), 500) << "drawn from the whole file, not its head";
  EXPECT_EQ(data::sample_pairs(f, filter, 50, 7).src, a.src) << "deterministic for a seed";
  EXPECT_NE(data::sample_pairs(f, filter, 50, 8).src, a.src) << "the seed changes the sample";
}

TEST(Prepare, TokenizerSampleKeepsWithinItsByteBudget) {
  mtx::test::TempDir tmp;
  const data::SplitFiles f = numbered_pairs(tmp, 1000);
  const data::LengthFilter filter{0, 3, 0};
  auto bytes = [](const data::ParallelCorpus& c) {
    size_t n = 0;
    for (size_t i = 0; i < c.size(); ++i) n += c.src[i].size() + c.tgt[i].size();
    return n;
  };
  const auto all = data::sample_pairs(f, filter, 0, 1);
  EXPECT_EQ(data::sample_pairs(f, filter, 0, 1, int64_t(bytes(all))).src, all.src) << "a budget that fits: all";

  const auto a = data::sample_pairs(f, filter, 0, 3, 2000);
  EXPECT_LE(bytes(a), 2000u);
  EXPECT_GT(bytes(a), 2000u - 20) << "filled up to the budget";
  EXPECT_EQ(a.stats.kept, 900u);
  const std::vector<int> na = numbers(a.src), ta = numbers(a.tgt);
  EXPECT_EQ(na, ta) << "pairs stay pairs";
  EXPECT_TRUE(std::is_sorted(na.begin(), na.end())) << "file order";
  EXPECT_GT(na.front(), -1);
  EXPECT_LT(na.front(), 100) << "drawn from the whole file, not its tail";
  EXPECT_GT(na.back(), 900) << "drawn from the whole file, not its head";
  EXPECT_EQ(data::sample_pairs(f, filter, 0, 3, 2000).src, a.src) << "deterministic for a seed";

  const auto b = data::sample_pairs(f, filter, 500, 3, 2000);
  EXPECT_LE(bytes(b), 2000u) << "both bounds hold";
  for (int i : numbers(b.src)) EXPECT_NE(i % 10, 9) << "filtered pairs are never sampled";
  EXPECT_EQ(data::sample_pairs(f, filter, 0, 3, 1).size(), 1u) << "one pair at least";
}

TEST(Prepare, ShardFilesMapAsOneCorpusAcrossShards) {
  mtx::test::TempDir tmp;
  // kShardPairs + 3 one-token pairs as two shard files.
  data::EncodedCorpus first, second;
  for (size_t i = 0; i < data::kShardPairs; ++i) {
    const int32_t v = int32_t(i % 1000);
    first.src.push_back(&v, 1);
    first.tgt.push_back(&v, i % 3 == 0 ? 0 : 1);
  }
  for (int32_t v : {7, 8, 9}) {
    const std::vector<int32_t> two{v, v};
    second.src.push_back(two);
    second.tgt.push_back(&v, 1);
  }
  second.truncated = 2;
  data::save_corpus(first, tmp / "a.bin");
  data::save_corpus(second, tmp / "b.bin");
  const data::EncodedCorpus c = data::load_corpus(std::vector<fs::path>{tmp / "a.bin", tmp / "b.bin"});
  ASSERT_EQ(c.size(), data::kShardPairs + 3);
  EXPECT_EQ(c.truncated, 2u);
  EXPECT_EQ(c.src.total_tokens(), data::kShardPairs + 6);
  EXPECT_EQ(c.src[12345][0], 345);
  EXPECT_EQ(c.tgt.length(3), 0u);
  EXPECT_EQ(c.tgt.length(4), 1u);
  EXPECT_EQ(c.src.length(data::kShardPairs + 1), 2u);
  EXPECT_EQ(c.src[data::kShardPairs + 2][1], 9);
  EXPECT_EQ(c.tgt[data::kShardPairs][0], 7);
  c.release_pages();
  EXPECT_EQ(c.src[data::kShardPairs - 1][0], int32_t((data::kShardPairs - 1) % 1000)) << "readable after release";
  const std::string msg = mtx::test::boundary_error<mtx::DataError>([&] {
    data::load_corpus(std::vector<fs::path>{tmp / "b.bin", tmp / "a.bin"});
  });
  EXPECT_NE(msg.find("b.bin: a shard before the last holds 3 pairs"), std::string::npos) << msg;
}

// Pages of this process's file mappings that are resident, in KB.
int64_t resident_file_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("RssFile:", 0) == 0) return std::stoll(line.substr(8));
  }
  return -1;
}

TEST(Prepare, BatchesFromAMappedCorpusMapNoneOfIt) {
  mtx::test::TempDir tmp;
  data::EncodedCorpus c;  // 24 MB of ids
  for (int i = 0; i < 4000; ++i) {
    c.src.push_back(std::vector<int32_t>(1000, i));
    c.tgt.push_back(std::vector<int32_t>(size_t(1 + i % 500), -i));
  }
  data::save_corpus(c, tmp / "c.bin");
  const data::EncodedCorpus mapped = data::load_corpus(tmp / "c.bin");
  std::vector<uint32_t> rows;
  for (uint32_t i = 3; i < 4000; i += 40) rows.push_back(i);
  const mtx::tokenizer::SpecialIds ids;
  const data::Batch want = data::make_batch(c, rows, ids);
  mapped.release_pages();
  const int64_t before = resident_file_kb();
  ASSERT_GE(before, 0) << "no RssFile in /proc/self/status";
  const data::Batch got = data::make_batch(mapped, rows, ids);
  const int64_t grown = resident_file_kb() - before;
  EXPECT_TRUE(torch::equal(got.src, want.src) && torch::equal(got.tgt_in, want.tgt_in) &&
              torch::equal(got.tgt_out, want.tgt_out));
  // Read through the mapping, 100 rows would map at least 100 pages, and on kernels whose page cache holds large
  // folios up to 2 MB each.
  EXPECT_LT(grown, 256) << "KB of the corpus mapped while building a batch";
  std::vector<int32_t> row;
  mapped.tgt.read(3999, row);
  EXPECT_EQ(row, std::vector<int32_t>(size_t(1 + 3999 % 500), -3999));
}

TEST(Prepare, CorruptOrTruncatedShardsAreOneLineDataErrors) {
  mtx::test::TempDir tmp;
  data::EncodedCorpus c;
  for (int i = 0; i < 100; ++i) {
    c.src.push_back(std::vector<int32_t>(size_t(1 + i % 5), i));
    c.tgt.push_back(std::vector<int32_t>(size_t(1 + i % 3), i));
  }
  data::save_corpus(c, tmp / "ok.bin");
  const std::string bytes = mtx::read_file(tmp / "ok.bin");
  auto error_for = [&](const std::string& name, const std::string& content) {
    mtx::test::write_text(tmp / name, content);
    return mtx::test::boundary_error<mtx::DataError>([&] {
      const data::EncodedCorpus d = data::load_corpus(tmp / name);
      for (size_t i = 0; i < d.size(); ++i) (void)d.src[i];
    });
  };
  auto read_error_for = [&](const std::string& name) {
    return mtx::test::boundary_error<mtx::DataError>([&] {
      const data::EncodedCorpus d = data::load_corpus(tmp / name);
      std::vector<int32_t> row;
      for (size_t i = 0; i < d.size(); ++i) d.src.read(i, row);
    });
  };
  const std::string cut = error_for("cut.bin", bytes.substr(0, bytes.size() - 4));
  EXPECT_NE(cut.find("cut.bin: truncated or corrupt shard"), std::string::npos) << cut;
  std::string header = bytes;
  header[20] = char(header[20] ^ 0x40);  // the pair count: huge, but caught by the checksum before any use
  const std::string bad_header = error_for("header.bin", header);
  EXPECT_NE(bad_header.find("header.bin: corrupt shard header"), std::string::npos) << bad_header;
  std::string offsets = bytes;
  offsets[64 + 8 * 50 + 6] = char(0x7f);  // source offset 50: far past the ids
  const std::string bad_offset = error_for("offsets.bin", offsets);
  EXPECT_NE(bad_offset.find("offsets.bin: corrupt shard: the offsets of pair 49"), std::string::npos) << bad_offset;
  EXPECT_EQ(bad_offset.find('\n'), std::string::npos) << "one line";
  EXPECT_EQ(read_error_for("offsets.bin"), bad_offset) << "read() checks the offsets alike";
  const std::string old = error_for("old.bin", "MTXCORP1" + bytes.substr(8));
  EXPECT_NE(old.find("not an mtx shard file of format 2"), std::string::npos) << old;
  EXPECT_EQ(error_for("ok2.bin", bytes), "") << "the intact file loads";
}

TEST(Prepare, StoredDigestsSkipRehashingUntilTheFileChanges) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = small_setup(tmp);
  const data::PreparedData first = data::prepare_data(c);
  const fs::path digests = fs::path(c.data.cache_dir) / "digests";
  ASSERT_TRUE(fs::is_directory(digests));
  // Forge every stored digest: an unchanged file is not re-read, so the forged digests key a new corpus ...
  for (const auto& e : fs::directory_iterator(digests)) {
    auto j = nlohmann::json::parse(mtx::read_file(e.path()));
    j["sha256"] = std::string(64, 'f');
    mtx::test::write_text(e.path(), j.dump());
  }
  const data::PreparedData forged = data::prepare_data(c);
  EXPECT_NE(forged.corpus_dir, first.corpus_dir) << "the stored digest was used, not a fresh hash";
  // ... and force re-hashes, back to the real digests.
  data::PrepareOptions force;
  force.force = true;
  EXPECT_EQ(data::prepare_data(c, force).corpus_dir, first.corpus_dir);
  // A file rewritten with the same size and modification time is caught by its sampled blocks.
  const fs::path val = fs::path(c.data.dir) / "val.en";
  const auto when = fs::last_write_time(val);
  std::string text = mtx::read_file(val);
  text[0] = text[0] == 'x' ? 'y' : 'x';
  mtx::test::write_text(val, text);
  fs::last_write_time(val, when);
  EXPECT_NE(data::prepare_data(c).corpus_dir, first.corpus_dir);
}

TEST(Prepare, StreamsACorpusOfSeveralChunks) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = small_setup(tmp);
  // 70000 pairs: more than one chunk of 65536, so reading overlaps encoding; the result equals one-shot encoding.
  std::string de, en;
  const char* words[] = {"ein", "Hund", "Mann", "Frau", "läuft", "liest", "Buch", "Park"};
  for (int i = 0; i < 70000; ++i) {
    de += std::string(words[i % 8]) + " " + words[(i / 8) % 8] + " " + words[(i / 64) % 8] + "\n";
    en += std::string(words[(i / 3) % 8]) + " " + std::to_string(i % 97) + "\n";
  }
  mtx::test::write_text(tmp / "data" / "train.de", de);
  mtx::test::write_text(tmp / "data" / "train.en", en);
  fs::remove(tmp / "data" / "train.de.gz");
  fs::remove(tmp / "data" / "train.en.gz");
  const data::PreparedData p = data::prepare_data(c);
  ASSERT_EQ(p.train.size(), 70000u);
  const data::ParallelCorpus text = data::read_parallel(tmp / "data" / "train.de", tmp / "data" / "train.en");
  const data::EncodedCorpus whole = data::encode_corpus(p.tokenizer, text, c.model.max_len, 2);
  EXPECT_EQ(p.train.src.all_ids(), whole.src.all_ids());
  EXPECT_EQ(p.train.tgt.all_ids(), whole.tgt.all_ids());
  for (size_t i : {size_t(0), size_t(65535), size_t(65536), size_t(69999)}) {
    EXPECT_EQ(p.train.src.length(i), whole.src.length(i)) << i;
  }
}
