// The text layer's own parts (text/): sentence segmentation with ICU, layouts of plain text and HTML and their
// rendering (inline markup placed on aligned words), the language table and language identification with CLD2.
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "mtx/text/language_id.h"
#include "mtx/text/languages.h"
#include "mtx/text/layout.h"
#include "mtx/text/segment.h"
#include "mtx/util/errors.h"

using namespace mtx;

namespace {

std::vector<std::string> sentences_of(const text::Segmenter& s, const std::string& t) {
  std::vector<std::string> out;
  for (const text::Range r : s.sentences(t)) out.push_back(t.substr(r.begin, r.size()));
  return out;
}

// Each sentence "translated" as itself in capitals: what render puts back is visible.
std::vector<std::string> upper(const std::vector<std::string>& sentences) {
  std::vector<std::string> out;
  for (std::string s : sentences) {
    for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
    out.push_back(s);
  }
  return out;
}

std::string strip_tags(const std::string& html) { return std::regex_replace(html, std::regex("<[^>]*>"), ""); }

}  // namespace

TEST(Segment, SplitsSentencesAndKeepsAbbreviationsNumbersAndQuotes) {
  const text::Segmenter de("de");
  EXPECT_EQ(de.locale(), "de@ss=standard");
  EXPECT_EQ(sentences_of(de, "Ein Hund läuft. Eine Frau liest! Wer spielt? Zwei Männer."),
            (std::vector<std::string>{"Ein Hund läuft.", "Eine Frau liest!", "Wer spielt?", "Zwei Männer."}));
  // Abbreviations of the locale (ICU's suppressions), decimals, quotes that close a sentence.
  EXPECT_EQ(sentences_of(de, "Er kam ca. um 3.5 Uhr an. „Hallo!“ Sie ging."),
            (std::vector<std::string>{"Er kam ca. um 3.5 Uhr an.", "„Hallo!“", "Sie ging."}));
  // Whole words only: ICU's own filter took "Wasser." for the abbreviation "r." and did not split here.
  EXPECT_EQ(sentences_of(de, "Er trinkt Wasser. Sie steht am Tor. Er geht."),
            (std::vector<std::string>{"Er trinkt Wasser.", "Sie steht am Tor.", "Er geht."}));
  EXPECT_EQ(sentences_of(de, "Ein Mann, z. B. ein Koch, steht am 3. Mai in der Küche. Er kocht."),
            (std::vector<std::string>{"Ein Mann, z. B. ein Koch, steht am 3. Mai in der Küche.", "Er kocht."}));
  const text::Segmenter en("eng_Latn");
  EXPECT_EQ(sentences_of(en, "Mr. Smith met Dr. Jones at 5 p.m. on Friday. They talked."),
            (std::vector<std::string>{"Mr. Smith met Dr. Jones at 5 p.m. on Friday.", "They talked."}));
  // A line break ends a sentence: lists and headings keep their lines.
  EXPECT_EQ(sentences_of(en, "Shopping list\n- bread\n- milk"),
            (std::vector<std::string>{"Shopping list", "- bread", "- milk"}));
  EXPECT_TRUE(de.sentences(" \n\t  \n").empty());
}

TEST(Segment, CutsALongSentenceAtClausesThenAtWords) {
  const std::string t = "Ein Mann, der einen Hut trägt, steht am Strand; eine Frau liest.";
  const auto fits = [](std::string_view s) { return s.size() <= 32; };
  std::vector<std::string> got;
  for (const text::Range r : text::Segmenter::clauses(t, {0, t.size()}, fits))
    got.push_back(t.substr(r.begin, r.size()));
  EXPECT_EQ(got, (std::vector<std::string>{"Ein Mann, der einen Hut trägt,", "steht am Strand;", "eine Frau liest."}));
  got.clear();
  const std::string words = "eins zwei drei vier fünf sechs sieben";
  for (const text::Range r :
       text::Segmenter::clauses(words, {0, words.size()}, [](std::string_view s) { return s.size() <= 10; })) {
    got.push_back(words.substr(r.begin, r.size()));
  }
  EXPECT_EQ(got, (std::vector<std::string>{"eins zwei", "drei vier", "fünf", "sechs", "sieben"}));
}

TEST(Layout, PlainTextComesBackWithEveryByteBetweenSentences) {
  const text::Segmenter de("de");
  const std::string t = "  Ein Hund läuft.  Eine Frau liest.\r\nZwei Männer.\n\n\nKinder spielen. \n";
  const text::Layout l = text::layout(t, text::Format::text, de, {});
  EXPECT_EQ(l.sentences,
            (std::vector<std::string>{"Ein Hund läuft.", "Eine Frau liest.", "Zwei Männer.", "Kinder spielen."}));
  EXPECT_EQ(text::render(l, upper(l.sentences)),
            "  EIN HUND LäUFT.  EINE FRAU LIEST.\r\nZWEI MäNNER.\n\n\nKINDER SPIELEN. \n");
  EXPECT_EQ(text::render(l, l.sentences), t);
  // A sentence the model does not take whole is translated in clauses, the space between them kept.
  const text::Layout cut = text::layout("Ein Mann, der einen Hut trägt, steht.", text::Format::text, de,
                                        [](std::string_view s) { return s.size() <= 24; });
  EXPECT_EQ(cut.sentences, (std::vector<std::string>{"Ein Mann,", "der einen Hut trägt,", "steht."}));
  EXPECT_THROW(text::parse_format("pdf", "--format"), ConfigError);
}

TEST(Layout, InlineMarkupGoesOntoTheAlignedWordsWellNestedAndOnce) {
  const text::Segmenter de("de");
  const std::string html =
      "<p class=\"x\">Ein <b>großer</b> Hund läuft. Eine <i>Frau</i> liest.</p>\n<ul><li>Zwei "
      "<a href=\"/m?a=1&amp;b=2\">Männer</a></li></ul>";
  const text::Layout l = text::layout(html, text::Format::html, de, {});
  ASSERT_EQ(l.sentences, (std::vector<std::string>{"Ein großer Hund läuft.", "Eine Frau liest.", "Zwei Männer"}));
  EXPECT_EQ(l.needs_alignment, (std::vector<uint8_t>{1, 1, 1}));
  // "A dog big runs." with big <- großer: the element moves with its word.
  const std::vector<std::string> translations = {"A dog big runs.", "A woman reads.", "Two men"};
  const std::vector<text::WordLinks> links = {{0, 2, 1, 3}, {0, 1, 2}, {0, 1}};
  EXPECT_EQ(text::render(l, translations, links),
            "<p class=\"x\">A dog <b>big</b> runs. A <i>woman</i> reads.</p>\n<ul><li>Two <a "
            "href=\"/m?a=1&amp;b=2\">men</a></li></ul>");
  // Without alignments, by position; still well nested, each element once.
  const std::string placed = text::render(l, translations);
  // Words nothing was aligned to: the element goes onto the nearest aligned words, never empty.
  EXPECT_EQ(text::render(l, translations, {{3, 2, 3, 3}, {0, 1, 2}, {0, 1}}),
            "<p class=\"x\">A <b>dog</b> big runs. A <i>woman</i> reads.</p>\n<ul><li>Two <a "
            "href=\"/m?a=1&amp;b=2\">men</a></li></ul>");
  EXPECT_EQ(strip_tags(placed), "A dog big runs. A woman reads.\nTwo men");
  for (const char* tag : {"<b>", "</b>", "<i>", "</i>", "</a>"}) {
    EXPECT_EQ(placed.find(tag), placed.rfind(tag)) << placed;
    EXPECT_NE(placed.find(tag), std::string::npos) << placed;
  }
}

TEST(Layout, KeepsWhatIsNotToBeTranslated) {
  const text::Segmenter en("en");
  const std::string html =
      "<!-- c --><p>Run <code>make &lt;x&gt;</code> now.<br>Then <span translate=\"no\">mtx</span> "
      "works.</p><pre>keep  this</pre><script>var a = '<p>';</script><style>p{}</style>";
  const text::Layout l = text::layout(html, text::Format::html, en, {});
  EXPECT_EQ(l.sentences, (std::vector<std::string>{"Run now.", "Then works."}));
  const std::string out = text::render(l, l.sentences);
  EXPECT_NE(out.find("<code>make &lt;x&gt;</code>"), std::string::npos) << out;
  EXPECT_NE(out.find("<span translate=\"no\">mtx</span>"), std::string::npos) << out;
  EXPECT_NE(out.find("<pre>keep  this</pre><script>var a = '<p>';</script><style>p{}</style>"), std::string::npos);
  EXPECT_EQ(out.rfind("<!-- c -->", 0), 0u) << out;
  EXPECT_NE(out.find("<br>"), std::string::npos) << out;
  // Escaped text, and markup-like plain text left alone unless the format is html.
  const text::Layout amp = text::layout("<p>a</p>", text::Format::html, en, {});
  EXPECT_EQ(text::render(amp, {"x < y & z"}), "<p>x &lt; y &amp; z</p>");
  const text::Layout plain = text::layout("Use <b> here.", text::Format::text, en, {});
  EXPECT_EQ(plain.sentences, (std::vector<std::string>{"Use <b> here."}));
  // Broken markup still lays out, and nothing but whitespace has no sentence.
  for (const char* s : {"<p>a <b>b <i>c</b> d</i>", "<table><b>x</b><tr><td>y</td></tr></table>", "</p>", "<", ""}) {
    const text::Layout any = text::layout(s, text::Format::html, en, {});
    EXPECT_NO_THROW(text::render(any, any.sentences)) << s;
  }
}

TEST(Languages, EveryModelsCodesNameOneLanguage) {
  const text::Language* de = text::find_language("de");
  ASSERT_NE(de, nullptr);
  EXPECT_EQ(de->name, "German");
  for (const char* code : {"deu", "deu_Latn", "de_DE", "DE", "de-AT"}) EXPECT_EQ(text::find_language(code), de) << code;
  EXPECT_EQ(text::code_for(*de, {"eng_Latn", "deu_Latn"}), "deu_Latn");
  EXPECT_EQ(text::code_for(*de, {"en_XX", "de_DE"}), "de_DE");
  EXPECT_EQ(text::code_for(*de, {"fr"}), "");
  EXPECT_EQ(text::language_name("xx_Yyyy"), "xx_Yyyy");
  EXPECT_GE(text::languages().size(), 200u);
}

TEST(LanguageId, TellsLanguagesApartWithAConfidence) {
  const std::vector<std::pair<std::string, std::string>> samples = {
      {"de", "Ein Hund läuft durch das hohe Gras und bellt die Kinder an."},
      {"en", "A dog runs through the tall grass and barks at the children."},
      {"fr", "Un chien court dans les hautes herbes et aboie après les enfants."},
      {"es", "Un perro corre por la hierba alta y les ladra a los niños."},
      {"ru", "Собака бежит по высокой траве и лает на детей."},
  };
  for (const auto& [code, sentence] : samples) {
    const std::vector<text::Detection> d = text::detect_language(sentence);
    ASSERT_FALSE(d.empty()) << sentence;
    EXPECT_EQ(d[0].language->iso639_1, code) << sentence;
    EXPECT_GT(d[0].confidence, 50) << sentence;
  }
  EXPECT_TRUE(text::detect_language("").empty());
  EXPECT_NO_THROW(text::detect_language(std::string("\xff\xfe abc", 6)));
}

// The measurement behind the choice of ICU (docs/serving.md): German and English paragraphs with abbreviations,
// numbers, ordinals and quotes, cut by the Segmenter and by the simple rule many pipelines use (a sentence ends at
// . ! or ? followed by a space and a capital letter or an opening quote). Both counts are printed.
TEST(Segment, IcuBeatsTheSimpleRuleOnAbbreviationsNumbersAndQuotes) {
  struct Case {
    const char* language;
    std::string text;
    std::vector<std::string> sentences;
  };
  const std::vector<Case> gold = {
      {"de", "Ein Hund läuft. Eine Frau liest.", {"Ein Hund läuft.", "Eine Frau liest."}},
      {"de", "Er kam z. B. spät. Sie nicht.", {"Er kam z. B. spät.", "Sie nicht."}},
      {"de", "Am 3. Mai regnete es. Dann kam die Sonne.", {"Am 3. Mai regnete es.", "Dann kam die Sonne."}},
      {"de", "Dr. Müller kommt um 9.30 Uhr. Er ist pünktlich.", {"Dr. Müller kommt um 9.30 Uhr.", "Er ist pünktlich."}},
      {"de", "Das kostet ca. 5 Euro, d. h. wenig. Gut so.", {"Das kostet ca. 5 Euro, d. h. wenig.", "Gut so."}},
      {"de", "„Komm her!“ rief er. Sie kam.", {"„Komm her!“ rief er.", "Sie kam."}},
      {"de", "Er trinkt Wasser. Sie steht am Tor. Er geht.", {"Er trinkt Wasser.", "Sie steht am Tor.", "Er geht."}},
      {"de", "Wer kommt? Niemand! Schade.", {"Wer kommt?", "Niemand!", "Schade."}},
      {"de", "Die Str. ist gesperrt, usw. Bitte umfahren.", {"Die Str. ist gesperrt, usw. Bitte umfahren."}},
      {"en", "Mr. Smith met Dr. Jones. They talked.", {"Mr. Smith met Dr. Jones.", "They talked."}},
      {"en", "It costs $3.50 today. Buy now!", {"It costs $3.50 today.", "Buy now!"}},
      {"en", "\"Stop!\" she said. He stopped.", {"\"Stop!\" she said.", "He stopped."}},
      {"en", "We met at 5 p.m. on Friday. It rained.", {"We met at 5 p.m. on Friday.", "It rained."}},
      {"en", "See Fig. 3 for details. The U.S. economy grew.", {"See Fig. 3 for details.", "The U.S. economy grew."}},
      {"en", "Is it done? Yes. Good.", {"Is it done?", "Yes.", "Good."}},
      {"en", "He works for Acme Inc. in Ohio. She does not.", {"He works for Acme Inc. in Ohio.", "She does not."}},
  };
  const auto simple = [](const std::string& t) {
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t i = 0; i + 2 < t.size(); ++i) {
      if (t[i] != '.' && t[i] != '!' && t[i] != '?') continue;
      size_t j = i + 1;
      while (j < t.size() && (t[j] == '"' || t.compare(j, 3, "\xe2\x80\x9c") == 0)) j += t[j] == '"' ? 1 : 3;
      if (j >= t.size() || t[j] != ' ') continue;
      const unsigned char next = static_cast<unsigned char>(t[j + 1]);
      if (std::isupper(next) || next == '"' || next >= 0xC3) {
        out.push_back(t.substr(start, j - start));
        start = j + 1;
      }
    }
    out.push_back(t.substr(start));
    return out;
  };
  int icu_right = 0, simple_right = 0;
  for (const Case& c : gold) {
    const std::vector<std::string> got = sentences_of(text::Segmenter(c.language), c.text);
    icu_right += got == c.sentences;
    simple_right += simple(c.text) == c.sentences;
    EXPECT_EQ(got, c.sentences) << c.text;
  }
  std::printf("segmentation: ICU %d of %zu paragraphs right, the simple rule %d\n", icu_right, gold.size(),
              simple_right);
  EXPECT_LT(simple_right, icu_right);
}
