#include "mtx/data/corpus.h"

#include <gtest/gtest.h>

#include "mtx/util/errors.h"
#include "test_utils.h"

namespace data = mtx::data;
using mtx::DataError;

namespace {

template <class F>
std::string data_error(F fn) {
  return mtx::test::boundary_error<DataError>(fn);
}

}  // namespace

TEST(LineReader, ReadsPlainAndGzipAlike) {
  mtx::test::TempDir tmp;
  const std::string text = "first line\r\nsecond  line\n\nlast without newline";
  mtx::test::write_text(tmp / "a.txt", text);
  mtx::test::write_gzip(tmp / "a.txt.gz", text);
  const std::vector<std::string> expected = {"first line", "second  line", "", "last without newline"};
  EXPECT_EQ(data::read_lines(tmp / "a.txt"), expected);
  EXPECT_EQ(data::read_lines(tmp / "a.txt.gz"), expected);
}

TEST(LineReader, HandlesLinesLongerThanTheBuffer) {
  mtx::test::TempDir tmp;
  const std::string long_line(300000, 'x');
  mtx::test::write_gzip(tmp / "long.gz", "a\n" + long_line + "\nb\n");
  const auto lines = data::read_lines(tmp / "long.gz");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1], long_line);
  EXPECT_EQ(lines[2], "b");
}

TEST(LineReader, MissingFileIsNamed) {
  EXPECT_NE(data_error([] { data::read_lines("/nonexistent/train.de.gz"); }).find("/nonexistent/train.de.gz"),
            std::string::npos);
}

TEST(ParallelCorpus, LineCountMismatchNamesBothFilesAndCounts) {
  mtx::test::TempDir tmp;
  mtx::test::write_gzip(tmp / "x.de.gz", "a\nb\nc\n");
  mtx::test::write_gzip(tmp / "x.en.gz", "a\nb\n");
  const std::string msg = data_error([&] { data::read_parallel(tmp / "x.de.gz", tmp / "x.en.gz"); });
  EXPECT_NE(msg.find("x.de.gz' has 3 lines"), std::string::npos) << msg;
  EXPECT_NE(msg.find("x.en.gz' has 2"), std::string::npos) << msg;
}

TEST(ParallelCorpus, InvalidUtf8NamesFileAndLine) {
  mtx::test::TempDir tmp;
  mtx::test::write_text(tmp / "x.de", "gut\nauch gut\nkaputt \xc3\x28 hier\n");
  mtx::test::write_text(tmp / "x.en", "good\nalso good\nbroken here\n");
  const std::string msg = data_error([&] { data::read_parallel(tmp / "x.de", tmp / "x.en"); });
  EXPECT_NE(msg.find("x.de:3: invalid UTF-8 at byte 8"), std::string::npos) << msg;
}

TEST(ParallelCorpus, LengthFilterCountsWhatItDrops) {
  mtx::test::TempDir tmp;
  mtx::test::write_text(tmp / "x.de", "ein Hund\n\nsehr sehr sehr sehr lang\nzwei Wörter\neins\n");
  mtx::test::write_text(tmp / "x.en", "a dog\nempty\nlong\ntwo words\none two three four five six\n");
  data::LengthFilter filter;
  filter.min_tokens = 1;
  filter.max_tokens = 4;
  filter.max_ratio = 3;
  const data::ParallelCorpus c = data::read_parallel(tmp / "x.de", tmp / "x.en", filter);
  EXPECT_EQ(c.stats.read, 5u);
  EXPECT_EQ(c.stats.too_short, 1u);  // empty source
  EXPECT_EQ(c.stats.too_long, 2u);   // 5 source tokens; 6 target tokens
  EXPECT_EQ(c.stats.bad_ratio, 0u);
  EXPECT_EQ(c.stats.kept, 2u);
  EXPECT_EQ(c.stats.dropped(), 3u);
  EXPECT_EQ(c.src, (std::vector<std::string>{"ein Hund", "zwei Wörter"}));
  EXPECT_EQ(c.tgt, (std::vector<std::string>{"a dog", "two words"}));

  data::LengthFilter ratio_only;
  ratio_only.max_ratio = 2;
  EXPECT_EQ(ratio_only.judge(1, 3), data::LengthFilter::Verdict::bad_ratio);
  EXPECT_EQ(ratio_only.judge(2, 4), data::LengthFilter::Verdict::keep);
  EXPECT_EQ(data::LengthFilter{}.judge(0, 1000), data::LengthFilter::Verdict::keep);
}

TEST(ParallelCorpus, CountsWhitespaceTokens) {
  EXPECT_EQ(data::count_tokens(""), 0u);
  EXPECT_EQ(data::count_tokens("  a \t b  c "), 3u);
}
