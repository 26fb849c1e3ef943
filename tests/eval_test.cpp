#include "mtx/eval/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "mtx/eval/report.h"
#include "mtx/util/errors.h"

using namespace mtx::eval;
namespace fs = std::filesystem;

namespace {

// The parity fixtures: tests/fixtures/eval in the repository (always), plus any extra directories of the same
// format named in MTX_EVAL_FIXTURES_EXTRA (':'-separated; CMake passes ../shared/eval-fixtures), used only
// where they exist. Each holds text files and expected.json, written by scripts/make_eval_fixtures.py.
std::vector<fs::path> fixture_dirs() {
  // eval-random: the fixed-seed slice of scripts/eval_differential.py (random sets, options inline).
  std::vector<fs::path> dirs{fs::path(MTX_SOURCE_DIR) / "tests" / "fixtures" / "eval",
                             fs::path(MTX_SOURCE_DIR) / "tests" / "fixtures" / "eval-random"};
  if (const char* env = std::getenv("MTX_EVAL_FIXTURES_EXTRA"); env && *env) {
    std::stringstream list(env);
    for (std::string d; std::getline(list, d, ':');)
      if (!d.empty() && fs::exists(fs::path(d) / "expected.json")) dirs.push_back(d);
  }
  return dirs;
}

nlohmann::json expected_of(const fs::path& dir) {
  std::ifstream in(dir / "expected.json");
  if (!in) throw std::runtime_error("cannot read " + (dir / "expected.json").string());
  return nlohmann::json::parse(in);
}

std::vector<std::string> lines(const fs::path& p) {
  std::ifstream in(p);
  if (!in) throw std::runtime_error("cannot read fixture " + p.string());
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// A case's texts: files beside expected.json, or inline ("hyp_lines", "refs_lines") in random cases.
std::vector<std::string> hyps_of(const fs::path& dir, const nlohmann::json& c) {
  if (c.contains("hyp_lines")) return c["hyp_lines"].get<std::vector<std::string>>();
  return lines(dir / c["hyp"].get<std::string>());
}

References refs_of(const fs::path& dir, const nlohmann::json& c) {
  if (c.contains("refs_lines")) return c["refs_lines"].get<References>();
  References refs;
  for (const auto& r : c["refs"]) refs.push_back(lines(dir / r.get<std::string>()));
  return refs;
}

// Options as sacreBLEU's Python API names them, mapped onto mtx's structs.
std::unique_ptr<Metric> metric_for(const nlohmann::json& c, bool sentence = false) {
  const auto& o = c["options"];
  const std::string m = c["metric"];
  if (m == "bleu") {
    BleuOptions b;
    b.lowercase = o.value("lowercase", false);
    b.tokenize = parse_bleu_tokenizer(o.value("tokenize", "13a"));
    b.smooth_method = o.value("smooth_method", "exp");
    if (o.contains("smooth_value")) b.smooth_value = o["smooth_value"].get<double>();
    b.effective_order = sentence || o.value("use_effective_order", false);
    return make_bleu(b);
  }
  if (m == "chrf") {
    ChrfOptions ch;
    ch.char_order = o.value("char_order", 6);
    ch.word_order = o.value("word_order", 0);
    ch.beta = o.value("beta", 2);
    ch.lowercase = o.value("lowercase", false);
    ch.whitespace = o.value("whitespace", false);
    ch.eps_smoothing = o.value("eps_smoothing", false);
    return make_chrf(ch);
  }
  if (m != "ter") throw std::runtime_error("unknown metric in fixtures: " + m);
  TerOptions t;
  t.case_sensitive = o.value("case_sensitive", false);
  t.normalized = o.value("normalized", false);
  t.no_punct = o.value("no_punct", false);
  return make_ter(t);
}

std::string without_version(const std::string& sig) { return sig.substr(0, sig.rfind("|version:")); }

std::string describe(const fs::path& dir, const nlohmann::json& c) {
  return dir.filename().string() + ": " + c["metric"].get<std::string>() + " " + c["hyp"].get<std::string>() + " vs " +
         c["refs"].dump() + " " + c["options"].dump();
}

}  // namespace

TEST(EvalParity, EveryFixtureCaseMatchesSacreBleu) {
  int total = 0;
  for (const auto& dir : fixture_dirs()) {
    const auto expected = expected_of(dir);
    int cases = 0;
    for (const auto& c : expected["cases"]) {
      const auto metric = metric_for(c);
      const Score s = corpus_score(*metric, hyps_of(dir, c), refs_of(dir, c));
      EXPECT_NEAR(s.score, c["score"].get<double>(), 0.01) << describe(dir, c);
      EXPECT_EQ(without_version(s.signature), without_version(c["signature"])) << describe(dir, c);
      EXPECT_EQ(s.text, c["text"].get<std::string>()) << describe(dir, c);
      ++cases;
    }
    std::cout << "[ parity   ] " << cases << " corpus cases of sacreBLEU "
              << expected["sacrebleu_version"].get<std::string>() << " from " << dir << "\n";
    total += cases;
  }
  EXPECT_GE(total, 100) << "the repository's fixtures hold over 100 corpus cases";
}

TEST(EvalParity, SentenceLevelScoresMatchSacreBleu) {
  int total = 0;
  for (const auto& dir : fixture_dirs()) {
    auto expected = expected_of(dir);
    auto cases = expected.value("sentence_cases", nlohmann::json::array());
    if (expected.contains("sentence_bleu_sysB_first20"))  // the older fixture format: sentence BLEU of sysB
      cases.push_back({{"metric", "bleu"},
                       {"hyp", "sysB.en"},
                       {"refs", {"ref.en"}},
                       {"options", nlohmann::json::object()},
                       {"scores", expected["sentence_bleu_sysB_first20"]}});
    for (const auto& c : cases) {
      const auto& want = c["scores"];
      auto hyps = hyps_of(dir, c);
      auto refs = refs_of(dir, c);
      ASSERT_LE(want.size(), hyps.size()) << describe(dir, c);
      hyps.resize(want.size());  // a case may cover the first lines only
      for (auto& r : refs) r.resize(want.size());
      const auto scores = sentence_scores(*metric_for(c, true), hyps, refs);
      ASSERT_EQ(scores.size(), want.size()) << describe(dir, c);
      for (size_t i = 0; i < scores.size(); ++i)
        EXPECT_NEAR(scores[i], want[i].get<double>(), 0.01) << describe(dir, c) << " line " << i + 1;
      total += int(scores.size());
    }
  }
  EXPECT_GE(total, 500) << "the repository's fixtures hold over 500 sentence scores";
}

TEST(EvalTokenizers, TrickyStrings) {
  // 13a: punctuation split except inside numbers; &-entities unescaped.
  EXPECT_EQ(tokenize_bleu("Hello, world... (test)[x] {y}", BleuTokenizer::k13a),
            "Hello , world . . . ( test ) [ x ] { y }");
  EXPECT_EQ(tokenize_bleu("It costs 1,000.50 $ - e-mail 3-4", BleuTokenizer::k13a),
            "It costs 1,000.50 $ - e-mail 3 - 4");
  EXPECT_EQ(tokenize_bleu("a &amp; b &quot;c&quot;", BleuTokenizer::k13a), "a & b \" c \"");
  EXPECT_EQ(tokenize_bleu("  trailing spaces   ", BleuTokenizer::k13a), "trailing spaces");
  // intl: Unicode punctuation and symbols (€, «, 「), numbers kept together.
  EXPECT_EQ(tokenize_bleu("1.000,50€ «günstig»!", BleuTokenizer::intl), "1.000,50 € « günstig » !");
  EXPECT_EQ(tokenize_bleu("数字「引号」", BleuTokenizer::intl), "数字 「 引号 」");
  // char: every non-space code point.
  EXPECT_EQ(tokenize_bleu("ab c€", BleuTokenizer::chars), "a b c €");
  EXPECT_EQ(tokenize_bleu("no  change,here", BleuTokenizer::none), "no change,here");
  // Python's str.split(): Unicode spaces (no-break space, ideographic space) separate tokens.
  EXPECT_EQ(tokenize_bleu("a\u00a0b\u3000c", BleuTokenizer::none), "a b c");
  // tercom: lowercased unless case-sensitive; normalisation; punctuation removal.
  TerOptions t;
  EXPECT_EQ(tokenize_ter("The Dog's bone.", t), "the dog's bone.");
  t.normalized = true;
  EXPECT_EQ(tokenize_ter("The Dog's bone.", t), "the dog 's bone .");
  t = {};
  t.no_punct = true;
  t.case_sensitive = true;
  EXPECT_EQ(tokenize_ter("Hi, (you)!", t), "Hi you");
}

// spaCy 2's English tokenizer (the seq2seq tutorials' convention). Expected tokenisations are the cases of
// spaCy's own English tokenizer tests (spacy/tests/lang/en: test_prefix_suffix_infix, test_punct,
// test_exceptions) that hold for spaCy 2, plus the Multi30k patterns (possessives, hyphens, quotes).
TEST(EvalTokenizers, SpacyEnglishMatchesSpacysOwnCases) {
  auto tok = [](const std::string& s) { return tokenize_bleu(s, BleuTokenizer::spacy); };
  auto count = [&](const std::string& s) {
    const auto t = tok(s);
    return t.empty() ? 0 : 1 + std::count(t.begin(), t.end(), ' ');
  };
  // prefixes, suffixes and exceptions interacting
  EXPECT_EQ(tok("(can)"), "( can )");
  EXPECT_EQ(tok("can't"), "ca n't");
  EXPECT_EQ(tok("(can't"), "( ca n't");
  EXPECT_EQ(tok("can't)"), "ca n't )");
  EXPECT_EQ(tok("(can't)"), "( ca n't )");
  EXPECT_EQ(tok("(can't?)"), "( ca n't ? )");
  EXPECT_EQ(count("U.S."), 1);
  EXPECT_EQ(tok("us."), "us .");
  EXPECT_EQ(tok("(U.S."), "( U.S.");
  EXPECT_EQ(tok("U.S.)"), "U.S. )");
  EXPECT_EQ(tok("(U.S.?)"), "( U.S. ? )");
  // infixes
  EXPECT_EQ(tok("best-known"), "best - known");
  for (const char* r : {"0.1-13.5", "0.0-0.1", "103.27-300"}) EXPECT_EQ(count(r), 3) << r;
  EXPECT_EQ(tok("best.Known"), "best . Known");
  EXPECT_EQ(tok("Hello,world"), "Hello , world");
  EXPECT_EQ(tok("best...known"), "best ... known");
  EXPECT_EQ(tok("No decent--let alone well-bred--people."), "No decent -- let alone well - bred -- people .");
  EXPECT_EQ(tok("want/need"), "want / need");
  EXPECT_EQ(count("3/4/2012"), 1);
  // punctuation
  EXPECT_EQ(tok("(("), "( (");
  EXPECT_EQ(tok("<"), "<");
  EXPECT_EQ(tok("*Hello*"), "* Hello *");
  EXPECT_EQ(tok("`(Hello)'"), "` ( Hello ) '");
  EXPECT_EQ(tok("[[[Hello"), "[ [ [ Hello");
  EXPECT_EQ(tok("'The"), "' The");
  EXPECT_EQ(tok("(And a 6a.m. run through Washington Park)."), "( And a 6 a.m. run through Washington Park ) .");
  // exceptions
  EXPECT_EQ(tok("i said don't!"), "i said do n't !");
  for (const char* c : {"`ain't", "\"isn't", "can't!"}) EXPECT_EQ(count(c), 3) << c;
  EXPECT_EQ(tok("Robin's Alexis's schools' Alexis'"), "Robin 's Alexis 's schools ' Alexis '");
  EXPECT_EQ(tok("'em nothin' ol'"), "'em nothin' ol'");
  EXPECT_EQ(tok("we'll You'll there'll"), "we 'll You 'll there 'll");
  EXPECT_EQ(tok("Can't Ain't"), "Ca n't Ai n't");
  EXPECT_EQ(tok("I'll She'd"), "I 'll She 'd");
  EXPECT_EQ(tok("Ill ill Hell Well We were scared"), "Ill ill Hell Well We were scared");
  EXPECT_EQ(tok("`We've couldn't)"), "` We 've could n't )");
  EXPECT_EQ(tok("e.g. p.m. Jan. Dec. Inc."), "e.g. p.m. Jan. Dec. Inc.");
  EXPECT_EQ(tok("It's mediocre i.e. bad."), "It 's mediocre i.e. bad .");
  EXPECT_EQ(tok("1am 12a.m. 11p.m. 4pm"), "1 am 12 a.m. 11 p.m. 4 pm");
  EXPECT_EQ(tok("would've"), "would 've");
  // Multi30k English
  EXPECT_EQ(tok("A man's t-shirt, \"blue\" and off-screen at 5 o'clock."),
            "A man 's t - shirt , \" blue \" and off - screen at 5 o'clock .");
  EXPECT_EQ(tok("A dog plays tug-of-war."), "A dog plays tug - of - war .");
  EXPECT_EQ(parse_bleu_tokenizer("spacy"), BleuTokenizer::spacy);
}

TEST(EvalBleu, TutorialConventionLowercasesSpacyTokens) {
  // The tutorials lowercase after spaCy tokenises ("Can't" -> "ca n't", as "can't" would be too).
  BleuOptions o;
  o.tokenize = BleuTokenizer::spacy;
  o.lowercase = true;
  o.smooth_method = "none";
  const auto m = make_bleu(o);
  EXPECT_NEAR(corpus_score(*m, {"A Man's T-Shirt, Can't."}, {{"a man's t-shirt, can't."}}).score, 100.0, 1e-9);
  // Text already in spaCy's tokens scores the same; 13a splits it differently.
  EXPECT_NEAR(corpus_score(*m, {"A Man's T-Shirt, Can't."}, {{"a man 's t - shirt , ca n't ."}}).score, 100.0, 1e-9);
  BleuOptions lc13a;
  lc13a.lowercase = true;
  EXPECT_LT(corpus_score(*make_bleu(lc13a), {"A Man's T-Shirt, Can't."}, {{"a man 's t - shirt , ca n't ."}}).score,
            50.0);
  EXPECT_NE(m->signature(1).find("case:lc|eff:no|tok:spacy|smooth:none"), std::string::npos) << m->signature(1);
}

TEST(EvalBleu, SmoothingVariantsOnAShortSentence) {
  // One 3-word hypothesis against a 3-word reference with no 2-gram match: only smoothing gives credit.
  const std::vector<std::string> hyp = {"the cat sat"};
  const References ref = {{"the dog sat"}};
  auto bleu = [&](const std::string& method, bool eff = false) {
    BleuOptions o;
    o.smooth_method = method;
    o.effective_order = eff;
    return corpus_score(*make_bleu(o), hyp, ref).score;
  };
  EXPECT_EQ(bleu("none"), 0.0);
  // exp: p1 = 2/3, p2 = 1/(2*2), p3 = 1/(4*1) (no 4-grams: stop; log(0) for p4) -> 0 without effective order.
  EXPECT_NEAR(bleu("exp"), 0.0, 1e-9);
  EXPECT_NEAR(bleu("exp", true), 100 * std::exp((std::log(2.0 / 3) + std::log(0.25) + std::log(0.25)) / 3), 1e-6);
  EXPECT_NEAR(bleu("floor", true), 100 * std::exp((std::log(2.0 / 3) + std::log(0.1 / 2) + std::log(0.1 / 1)) / 3),
              1e-6);
  // add-k adds k to the counts of orders 2..4, so even the empty 4-gram order counts: p4 = 1/1.
  EXPECT_NEAR(bleu("add-k", true), 100 * std::exp((std::log(2.0 / 3) + std::log(1.0 / 3) + std::log(1.0 / 2) + 0) / 4),
              1e-6);
}

TEST(EvalBleu, MultipleReferencesTakeMaxCountsAndClosestLength) {
  BleuOptions o;
  o.effective_order = true;
  const auto m = make_bleu(o);
  // Reference lengths 2 and 6 for a 5-word hypothesis: the closest (6) counts.
  const auto stats = corpus_stats(*m, {"a b c d e"}, {{"a b"}, {"a b c d e f"}});
  EXPECT_EQ(stats[0][0], 5);
  EXPECT_EQ(stats[0][1], 6);
  EXPECT_EQ(stats[0][2], 5) << "all unigrams matched by the second reference";
  // Equal distance: the shorter reference length wins.
  EXPECT_EQ(corpus_stats(*m, {"a b c"}, {{"a b c d"}, {"a b"}})[0][1], 2);
  // Clipping uses the largest count in any one reference.
  const auto clip = corpus_stats(*m, {"the the the"}, {{"the cat"}, {"the the dog"}});
  EXPECT_EQ(clip[0][2], 2);
}

TEST(EvalBootstrap, DeterministicForASeedAndSensible) {
  std::vector<std::string> hyps, refs;
  for (int i = 0; i < 200; ++i) {
    hyps.push_back(i % 3 ? "a man rides a red bike" : "a woman reads");
    refs.push_back(i % 2 ? "a man rides a bike" : "a woman reads a book");
  }
  const auto m = make_bleu({});
  const auto stats = corpus_stats(*m, hyps, {refs});
  const Confidence a = bootstrap(*m, stats, 300, 7), b = bootstrap(*m, stats, 300, 7), c = bootstrap(*m, stats, 300, 8);
  EXPECT_EQ(a.mean, b.mean);
  EXPECT_EQ(a.ci, b.ci);
  EXPECT_NE(a.mean, c.mean);
  const double score = m->score(sum_stats(stats)).score;
  EXPECT_NEAR(a.mean, score, 3.0);
  EXPECT_GT(a.ci, 0.0);
  // A system against itself: p = 1; against a clearly worse one: small p.
  EXPECT_NEAR(paired_bootstrap(*m, stats, stats, 200).p_value, 1.0, 1e-9);
  std::vector<std::string> worse(hyps.size(), "bike");
  const auto pw = paired_bootstrap(*m, stats, corpus_stats(*m, worse, {refs}), 200);
  EXPECT_LT(pw.p_value, 0.05);
}

TEST(EvalOther, RougeAndWer) {
  const References ref = {{"the cat sat on the mat"}};
  EXPECT_NEAR(corpus_score(*make_rouge(1), {"the cat sat on the mat"}, ref).score, 100.0, 1e-9);
  // ROUGE-1: all 5 hypothesis words in the 6-word reference: P 5/5, R 5/6.
  EXPECT_NEAR(corpus_score(*make_rouge(1), {"the cat sat on mat"}, ref).score,
              100 * 2 * 1.0 * (5.0 / 6) / (1.0 + 5.0 / 6), 1e-9);
  EXPECT_NEAR(corpus_score(*make_rouge(0), {"cat the sat"}, ref).score,
              100 * 2 * (2.0 / 3) * (2.0 / 6) / (2.0 / 3 + 2.0 / 6), 1e-9);
  // WER: one substitution and one deletion over 6 reference words.
  EXPECT_NEAR(corpus_score(*make_wer(), {"the dog sat on mat"}, ref).score, 100 * 2.0 / 6, 1e-9);
}

TEST(EvalTer, ReferencesAreTokenizedTwiceLikeSacreBleu) {
  // sacreBLEU 2.6.0 runs tercom's (not idempotent) normalisation over each reference twice and over the
  // hypothesis once: "it's\u00a0a" only splits off "'s" on the second pass. Its scores (sentence_score):
  // hyp "it 's a dog" vs ref "it's\u00a0a dog" -> 0.00; the other way round -> 50.00 (3 words vs 4).
  TerOptions o;
  o.normalized = true;
  EXPECT_NEAR(corpus_score(*make_ter(o), {"it 's a dog"}, {{"it's\u00a0a dog"}}).score, 0.0, 1e-9);
  EXPECT_NEAR(corpus_score(*make_ter(o), {"it's\u00a0a dog"}, {{"it 's a dog"}}).score, 50.0, 1e-9);
}

TEST(EvalErrors, MismatchedLineCountsAreDataErrors) {
  EXPECT_THROW(corpus_score(*make_bleu({}), {"a", "b"}, {{"a"}}), mtx::DataError);
  EXPECT_THROW(parse_bleu_tokenizer("zh"), mtx::ConfigError);
  BleuOptions o;
  o.smooth_method = "laplace";
  EXPECT_THROW(make_bleu(o), mtx::ConfigError);
}

TEST(EvalReport, WritesEachSystemsScoresAndRefusesBadOptions) {
  const References refs = {{"the cat sat on the mat", "a dog runs"}};
  const std::vector<System> systems = {{"a", {"the cat sat on a mat", "a dog ran"}}, {"b", refs[0]}};
  ReportOptions o;
  o.metrics = {"bleu", "wer"};
  std::ostringstream out;
  report(o, systems, refs, out);
  const Score bleu = corpus_score(*make_bleu({}), systems[0].hyps, refs);
  std::vector<std::string> rows;
  std::istringstream in(out.str());
  for (std::string l; std::getline(in, l);) rows.push_back(l);
  ASSERT_EQ(rows.size(), 6u) << out.str();
  EXPECT_EQ(rows[0], "a:");
  EXPECT_EQ(rows[1], "  BLEU|" + bleu.signature + " = " + bleu.text.substr(std::string("BLEU = ").size()));
  EXPECT_EQ(rows[2].rfind("  WER|", 0), 0u) << rows[2];
  EXPECT_EQ(rows[3], "b:");
  EXPECT_EQ(rows[4].rfind("  BLEU|" + bleu.signature + " = 100.00 ", 0), 0u) << rows[4];

  // Bad options and inputs (ppl is not eval/'s: decode scores it).
  o.metrics = {"ppl"};
  EXPECT_THROW(validate(o), mtx::ConfigError);
  o.metrics.clear();  // mtx eval --metric ppl: no scores to write
  EXPECT_NO_THROW(validate(o));
  o.metrics = {"bleu"};
  o.confidence_n = 9;
  EXPECT_THROW(validate(o), mtx::ConfigError);
  o.confidence_n = 1000;
  o.paired_bs = true;
  EXPECT_THROW(report(o, {systems[0]}, refs, out), mtx::ConfigError);
  o.paired_bs = false;
  EXPECT_THROW(report(o, {{"short", {"the cat"}}}, refs, out), mtx::DataError);
}
