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
  EXPECT_EQ(g.constraints_for("Hund und Köter, Hund"), (std::vector<std::string>{"dog"})) << "each target once";
  EXPECT_EQ(g.constraints_for("mit dem roten Ball auf der Straße"),
            (std::vector<std::string>{"red ball", "ball", "street"}));
  EXPECT_TRUE(g.constraints_for("Straßenbahn").empty()) << "a non-ASCII letter ends no word";
  EXPECT_EQ(g.constraints_for("(Hund)"), (std::vector<std::string>{"dog"}));
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
}
