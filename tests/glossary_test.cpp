#include "mtx/decode/glossary.h"

#include <gtest/gtest.h>

#include "mtx/util/errors.h"
#include "test_utils.h"

using mtx::decode::Glossary;

// A source term counts where it stands as whole words: not inside a longer word, in any script; every entry
// whose term occurs gives its target term once, in file order.
TEST(Glossary, WholeWordsGiveTheirTargetTermsInFileOrder) {
  const Glossary g = Glossary::of({{"Hund", "dog"},
                                   {"roten Ball", "red ball"},
                                   {"Ball", "ball"},
                                   {"Straße", "street"},
                                   {"Köter", "dog"},
                                   {"e-Mail", "email"}});
  EXPECT_EQ(g.constraints_for("Ein Hund spielt."), (std::vector<std::string>{"dog"}));
  EXPECT_TRUE(g.constraints_for("Ein Hundehalter spielt.").empty()) << "inside a longer word";
  EXPECT_TRUE(g.constraints_for("Der Schäferhund").empty());
  EXPECT_EQ(g.constraints_for("Ein Hund und Köter, Hund"), (std::vector<std::string>{"dog"})) << "each target once";
  EXPECT_EQ(g.constraints_for("mit dem roten Ball auf der Straße"),
            (std::vector<std::string>{"red ball", "ball", "street"}));
  EXPECT_TRUE(g.constraints_for("Straßenbahn").empty()) << "a non-ASCII letter ends no word";
  EXPECT_EQ(g.constraints_for("ein (Hund)"), (std::vector<std::string>{"dog"}));
  EXPECT_EQ(g.constraints_for("eine e-Mail"), (std::vector<std::string>{"email"}));
  EXPECT_TRUE(g.constraints_for("hund").empty()) << "case-sensitive";
  EXPECT_TRUE(g.constraints_for("").empty());
}

TEST(Glossary, FilesNameTheirBadLines) {
  mtx::test::TempDir tmp;
  mtx::test::write_text(tmp / "ok.tsv", "# comment\n\nHund\tdog\r\nBall\tball\n");
  EXPECT_EQ(Glossary::load((tmp / "ok.tsv").string()).size(), 2u);
  const auto error_of = [&](const std::string& text) {
    mtx::test::write_text(tmp / "bad.tsv", text);
    try {
      Glossary::load((tmp / "bad.tsv").string());
    } catch (const mtx::DataError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("Hund\tdog\nBall ball\n").find("bad.tsv' line 2: expected"), std::string::npos);
  EXPECT_NE(error_of("Hund\tdog\tpuppy\n").find("line 1: expected"), std::string::npos);
  EXPECT_NE(error_of("\tdog\n").find("line 1: an empty term"), std::string::npos);
  EXPECT_NE(error_of("Hund\t\xff\n").find("line 1: not valid UTF-8"), std::string::npos);
  EXPECT_THROW(Glossary::load((tmp / "missing.tsv").string()), mtx::DataError);
  // Entries given in code (the Python package's dict) name the entry.
  const auto entry_error = [](std::vector<std::pair<std::string, std::string>> entries) {
    try {
      Glossary::of(std::move(entries));
    } catch (const mtx::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(entry_error({{"Hund", "dog"}, {"Ball", ""}}), "glossary entry 2 (\"Ball\"): an empty term");
  EXPECT_NE(entry_error({{"Hund|", "dog"}}).find("entry 1 (\"Hund|\"): an empty term"), std::string::npos);
  EXPECT_NE(entry_error({{"Hund", "dog\nline"}}).find("a tab or line break"), std::string::npos);
  EXPECT_NE(entry_error({{"Hund", "\xff"}}).find("not valid UTF-8"), std::string::npos);
}

// An entry's forms: any source form matches, the target form at its place is the term (the first where the target
// lists fewer), and each term knows the bytes of the source form it matched -- what ties it to its source words.
TEST(Glossary, FormsPickTheirTermAndTermsKnowTheirSourceBytes) {
  const Glossary g = Glossary::of({{"Hund|Hunde|Hundes", "puppy|puppies"}, {"Straße", "road|roads"}});
  const auto terms = g.terms_for("Zwei große Hunde auf der Straße.");
  ASSERT_EQ(terms.size(), 2u);
  EXPECT_EQ(terms[0].target, "puppies");
  EXPECT_EQ(std::string("Zwei große Hunde auf der Straße.").substr(terms[0].begin, terms[0].end - terms[0].begin),
            "Hunde");
  EXPECT_EQ(terms[1].target, "road");
  EXPECT_EQ(std::string("Zwei große Hunde auf der Straße.").substr(terms[1].begin, terms[1].end - terms[1].begin),
            "Straße");
  EXPECT_EQ(g.constraints_for("Das Fell des Hundes"), (std::vector<std::string>{"puppy"})) << "no third target form";
  // Each occurrence is a term of its own, tied to its words, in line order.
  const auto both = g.terms_for("Ein Hund und zwei Hunde");
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].target, "puppy");
  EXPECT_EQ(both[1].target, "puppies");
  EXPECT_LT(both[0].begin, both[1].begin);
  EXPECT_EQ(g.constraints_for("Ein Hund"), (std::vector<std::string>{"puppy"}));
  EXPECT_TRUE(g.constraints_for("Hundehütte").empty());
  // A term knows its entry's other forms, each other target once with the first source form giving it, in the
  // term's case: "einen Jungen" may want "lad".
  using Forms = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(both[0].forms, (Forms{{"Hunde", "puppies"}}));
  EXPECT_EQ(both[1].forms, (Forms{{"Hund", "puppy"}}));
  EXPECT_TRUE(terms[1].forms.empty()) << "one target form";
  const Glossary boys = Glossary::of({{"Junge|Jungen", "lad|lads"}});
  EXPECT_EQ(boys.terms_for("Ein Mann hält einen Jungen")[0].forms, (Forms{{"Junge", "lad"}}));
  EXPECT_EQ(boys.terms_for("Jungen spielen")[0].forms, (Forms{{"Junge", "Lad"}}));
}

// A term for the line's first word starts with a capital, as the translation's first word will ("Hunde rennen"
// -> "Puppies run"); elsewhere it is as the glossary writes it.
TEST(Glossary, ATermForTheFirstWordStartsWithACapital) {
  const Glossary g = Glossary::of({{"Hund|Hunde", "puppy|puppies"}, {"Ärger", "ärger"}, {"Hemd", "T-shirt"}});
  const auto terms = g.terms_for("Hunde jagen Hunde.");
  ASSERT_EQ(terms.size(), 2u);
  EXPECT_EQ(terms[0].target, "Puppies");
  EXPECT_EQ(terms[1].target, "puppies");
  EXPECT_EQ(g.constraints_for("\"Hund\", sagt er"), (std::vector<std::string>{"Puppy"})) << "after a quote";
  EXPECT_EQ(g.constraints_for("Ärger!"), (std::vector<std::string>{"Ärger"})) << "a non-ASCII capital";
  EXPECT_EQ(g.constraints_for("Hemd"), (std::vector<std::string>{"T-shirt"})) << "a capital stays";
}

// Matching in any case, or by Snowball stems: an inflected form the entry does not list is found, word by word,
// and the term is the entry's first target form; a longer word with the same start is not.
TEST(Glossary, InflectedFormsMatchByTheirStems) {
  const Glossary exact = Glossary::of({{"Hund", "puppy"}, {"roter Ball", "red sphere"}});
  EXPECT_TRUE(exact.constraints_for("Zwei Hunde und ein Hundes").empty());
  const Glossary cased = Glossary::of({{"Hund", "puppy"}}, {true, ""});
  EXPECT_EQ(cased.constraints_for("ein HUND!"), (std::vector<std::string>{"puppy"}));
  const Glossary stemmed = Glossary::of({{"Hund", "puppy"}, {"roter Ball", "red sphere"}}, {false, "german"});
  for (const std::string line : {"Zwei Hunde", "des Hundes", "ein hund", "mit dem Hunden"}) {
    EXPECT_EQ(stemmed.constraints_for(line), (std::vector<std::string>{"puppy"})) << line;
  }
  const auto terms = stemmed.terms_for("mit roten Bällen spielen");
  ASSERT_EQ(terms.size(), 1u);
  EXPECT_EQ(terms[0].target, "red sphere");
  EXPECT_EQ(std::string("mit roten Bällen spielen").substr(terms[0].begin, terms[0].end - terms[0].begin),
            "roten Bällen");
  EXPECT_TRUE(stemmed.constraints_for("Die Hundehütte").empty()) << "another word";
  EXPECT_EQ(Glossary::of({{"Hund", "puppy"}}, {false, "de"}).constraints_for("Hunde").size(), 1u) << "by code";
  EXPECT_THROW(Glossary::of({{"Hund", "puppy"}}, {false, "klingon"}), mtx::ConfigError);
}
