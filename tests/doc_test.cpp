// Documents (doc/document.h): formats read and written back with their formatting, hostile archives refused. The
// translation is a fake with known word links -- each sentence's words upper-cased in reverse order, each aligned
// to its source word -- run through the text layer's real placement, so that where a run lands is known.
#include <gtest/gtest.h>
#include <minizip/unzip.h>
#include <minizip/zip.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "mtx/doc/document.h"
#include "mtx/util/errors.h"
#include "test_utils.h"

namespace fs = std::filesystem;
using mtx::doc::Format;

namespace {

std::string upper(std::string w) {
  for (char& c : w) c = char(std::toupper(static_cast<unsigned char>(c)));
  return w;
}

// Each sentence reversed and upper-cased, every word linked to its source word; counts the sentences it saw.
struct FakeTranslator {
  size_t sentences = 0;
  bool ignore_links = false;  // placement by position only: what a test must tell apart
  std::vector<std::string> operator()(const std::vector<std::string>& texts, mtx::text::Format format) {
    static const mtx::text::Segmenter segmenter("de");
    std::vector<std::string> out;
    for (const std::string& t : texts) {
      const mtx::text::Layout l = mtx::text::layout(t, format, segmenter, nullptr);
      std::vector<std::string> translations;
      std::vector<mtx::text::WordLinks> links;
      for (const std::string& s : l.sentences) {
        ++sentences;
        const std::vector<mtx::text::Range> w = mtx::text::words_of(s);
        std::string translation;
        mtx::text::WordLinks link;
        for (size_t i = w.size(); i-- > 0;) {
          translation += (translation.empty() ? "" : " ") + upper(s.substr(w[i].begin, w[i].size()));
          link.push_back(int(i));
        }
        translations.push_back(translation);
        links.push_back(ignore_links ? mtx::text::WordLinks{} : link);
      }
      out.push_back(mtx::text::render(l, translations, links));
    }
    return out;
  }
};

std::string zip_of(const std::vector<std::pair<std::string, std::string>>& entries) {
  const fs::path path = fs::temp_directory_path() / ("mtx_doc_test_" + std::to_string(::getpid()) + ".zip");
  zipFile z = zipOpen64(path.c_str(), APPEND_STATUS_CREATE);
  for (const auto& e : entries) {
    zip_fileinfo info{};
    zipOpenNewFileInZip64(z, e.first.c_str(), &info, nullptr, 0, nullptr, 0, nullptr, Z_DEFLATED, 9, 0);
    zipWriteInFileInZip(z, e.second.data(), unsigned(e.second.size()));
    zipCloseFileInZip(z);
  }
  zipClose(z, nullptr);
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  fs::remove(path);
  return s.str();
}

const char* kTypes =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Types "
    "xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\"><Override PartName=\"/word/document.xml\" "
    "ContentType=\"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml\"/></Types>";

std::string docx_of(const std::string& body) {
  const std::string document =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><w:document "
      "xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\"><w:body>" +
      body + "</w:body></w:document>";
  return zip_of({{"[Content_Types].xml", kTypes}, {"word/document.xml", document}});
}

// The entry `name` of the zip archive `bytes`, read back with minizip.
std::string entry_of(const std::string& bytes, const std::string& name) {
  const fs::path path = fs::temp_directory_path() / ("mtx_doc_test_out_" + std::to_string(::getpid()) + ".zip");
  std::ofstream(path, std::ios::binary) << bytes;
  unzFile z = unzOpen64(path.c_str());
  EXPECT_NE(z, nullptr);
  std::string out;
  if (z && unzLocateFile(z, name.c_str(), 1) == UNZ_OK && unzOpenCurrentFile(z) == UNZ_OK) {
    char buf[4096];
    for (int n; (n = unzReadCurrentFile(z, buf, sizeof(buf))) > 0;) out.append(buf, size_t(n));
    unzCloseCurrentFile(z);
  }
  if (z) unzClose(z);
  fs::remove(path);
  return out;
}

std::string translated(const std::string& bytes, Format format, FakeTranslator& fake,
                       const mtx::doc::Limits& limits = {}) {
  return mtx::doc::translate_document(
      bytes, format, "test.docx",
      [&fake](const std::vector<std::string>& t, mtx::text::Format f) { return fake(t, f); }, limits);
}

const char* kBoldRun = "<w:r><w:rPr><w:b/></w:rPr><w:t>große</w:t></w:r>";

// A message that says what was refused and where.
void expect_refused(const std::string& bytes, const std::string& says, const mtx::doc::Limits& limits = {}) {
  FakeTranslator fake;
  try {
    translated(bytes, Format::docx, fake, limits);
    ADD_FAILURE() << "not refused; expected a message with \"" << says << "\"";
  } catch (const mtx::DataError& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("test.docx"), std::string::npos) << e.what();
  }
  EXPECT_EQ(fake.sentences, 0u) << "translated before refusing";
}

}  // namespace

TEST(Documents, ARunStaysOnTheWordsAlignedToItsSourceWords) {
  // "Der große Hund läuft." -> "LäUFT. HUND GROßE DER": the bold run must hold GROßE, the third target word, where
  // its source word's link points -- not the second, where its position would put it.
  const std::string body = "<w:p><w:r><w:t xml:space=\"preserve\">Der </w:t></w:r>" + std::string(kBoldRun) +
                           "<w:r><w:t xml:space=\"preserve\"> Hund läuft.</w:t></w:r></w:p>";
  FakeTranslator fake;
  const std::string xml = entry_of(translated(docx_of(body), Format::docx, fake), "word/document.xml");
  EXPECT_NE(xml.find("<w:r><w:rPr><w:b/></w:rPr><w:t xml:space=\"preserve\">GROßE</w:t></w:r>"), std::string::npos)
      << xml;
  EXPECT_EQ(xml.find("große"), std::string::npos) << xml;
  FakeTranslator by_position;
  by_position.ignore_links = true;
  const std::string moved = entry_of(translated(docx_of(body), Format::docx, by_position), "word/document.xml");
  EXPECT_EQ(moved.find("<w:t xml:space=\"preserve\">GROßE</w:t></w:r>"), std::string::npos)
      << "placement by position should have moved the run (the test tells the two apart): " << moved;
}

TEST(Documents, EveryTableCellIsTranslated) {
  std::string body = "<w:tbl>";
  for (const char* row : {"Ein Hund.|Zwei Katzen.", "Drei Vögel.|Vier Pferde."}) {
    const std::string r(row);
    const size_t bar = r.find('|');
    body += "<w:tr><w:tc><w:p><w:r><w:t>" + r.substr(0, bar) + "</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>" +
            r.substr(bar + 1) + "</w:t></w:r></w:p></w:tc></w:tr>";
  }
  body += "</w:tbl><w:p><w:r><w:t>Ende.</w:t></w:r></w:p>";
  FakeTranslator fake;
  const std::string xml = entry_of(translated(docx_of(body), Format::docx, fake), "word/document.xml");
  for (const char* want : {"HUND. EIN", "KATZEN. ZWEI", "VöGEL. DREI", "PFERDE. VIER", "ENDE."}) {
    EXPECT_NE(xml.find(want), std::string::npos) << want << " in " << xml;
  }
  EXPECT_EQ(fake.sentences, 5u);
}

TEST(Documents, FieldsTabsAndBookmarksAreKeptAsTheyAre) {
  const std::string body =
      "<w:p><w:bookmarkStart w:id=\"0\" w:name=\"b\"/><w:r><w:t>Seite</w:t></w:r><w:r><w:tab/></w:r>"
      "<w:r><w:fldChar w:fldCharType=\"begin\"/></w:r><w:r><w:instrText>PAGE</w:instrText></w:r>"
      "<w:r><w:fldChar w:fldCharType=\"separate\"/></w:r><w:r><w:t>drei</w:t></w:r>"
      "<w:r><w:fldChar w:fldCharType=\"end\"/></w:r><w:bookmarkEnd w:id=\"0\"/><w:r><w:t> von vier.</w:t></w:r></w:p>";
  FakeTranslator fake;
  const std::string xml = entry_of(translated(docx_of(body), Format::docx, fake), "word/document.xml");
  for (const char* kept : {"<w:bookmarkStart w:id=\"0\" w:name=\"b\"/>", "<w:tab/>", "<w:instrText>PAGE</w:instrText>",
                           "<w:t>drei</w:t>", "<w:bookmarkEnd w:id=\"0\"/>", "fldCharType=\"end\""}) {
    EXPECT_NE(xml.find(kept), std::string::npos) << kept << " in " << xml;
  }
  EXPECT_NE(xml.find("VIER."), std::string::npos) << xml;
  EXPECT_EQ(xml.find("Seite"), std::string::npos) << "text outside the field is translated: " << xml;
}

TEST(Documents, AZipBombIsRefusedBeforeItIsInflated) {
  const std::string bomb =
      zip_of({{"[Content_Types].xml", kTypes}, {"word/media/zeros.bin", std::string(8 << 20, '\0')}});
  ASSERT_LT(bomb.size(), 64u << 10);
  expect_refused(bomb, "zip bomb");
  mtx::doc::Limits small;
  small.max_entry_bytes = 1 << 20;
  expect_refused(bomb, "entry word/media/zeros.bin: inflates to 8388608 bytes", small);
  small = {};
  small.max_entries = 1;
  expect_refused(bomb, "2 entries, more than the 1", small);
}

TEST(Documents, AnEntityDeclarationIsRefused) {
  const std::string billion =
      "<?xml version=\"1.0\"?><!DOCTYPE w:document [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;\">"
      "<!ENTITY x SYSTEM \"file:///etc/passwd\">]><w:document "
      "xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\"><w:body><w:p><w:r><w:t>&b;&x;</w:t>"
      "</w:r></w:p></w:body></w:document>";
  expect_refused(zip_of({{"[Content_Types].xml", kTypes}, {"word/document.xml", billion}}),
                 "word/document.xml: declares a DTD");
}

TEST(Documents, APathTraversalIsRefused) {
  for (const char* name : {"../../etc/cron.d/evil", "/etc/evil", "word/../../evil", "C:\\evil", "a\\..\\evil"}) {
    const std::string bytes = zip_of({{"[Content_Types].xml", kTypes}, {name, "x"}});
    expect_refused(bytes, "absolute or \"..\" path");
  }
}

TEST(Documents, DamagedFilesGetOneLineNamingThePart) {
  const std::string good = docx_of("<w:p><w:r><w:t>Ein Hund.</w:t></w:r></w:p>");
  expect_refused(good.substr(0, good.size() / 2), "not a readable zip archive");
  expect_refused(zip_of({{"[Content_Types].xml", kTypes}, {"word/document.xml", "<w:document><w:body>"}}),
                 "word/document.xml: damaged XML");
  expect_refused(zip_of({{"word/document.xml", "<x/>"}}), "no [Content_Types].xml");
  // Deflated data: a byte of the document part's entry flipped (it no longer inflates, or its CRC fails).
  const size_t at = good.find("word/document.xml") + std::string("word/document.xml").size() + 4;
  std::string flipped = good;
  flipped[at] = char(flipped[at] ^ 0x55);
  expect_refused(flipped, "entry word/document.xml: damaged");
}

TEST(Documents, TheFormatFollowsTheExtensionAndPdfSaysItIsNotTranslated) {
  EXPECT_EQ(mtx::doc::format_of_path("a/Report.DOCX"), Format::docx);
  EXPECT_EQ(mtx::doc::format_of_path("film.srt"), Format::srt);
  EXPECT_EQ(mtx::doc::format_of_path("page.htm"), Format::html);
  try {
    mtx::doc::format_of_path("scan.pdf");
    ADD_FAILURE() << "a PDF was taken";
  } catch (const mtx::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("PDF is not translated"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mtx::doc::format_of_path("notes.xyz"), mtx::DataError);
  EXPECT_THROW(mtx::doc::parse_format("pdf", "--format"), mtx::ConfigError);
}

TEST(Documents, SubtitlesKeepTheirTimingsAndLineCounts) {
  const std::string srt =
      "1\r\n00:00:01,000 --> 00:00:02,500\r\nEin Mann mit einem roten Hut\r\nsitzt auf <i>einer</i> Bank.\r\n\r\n"
      "2\r\n00:00:03,000 --> 00:00:04,000\r\n{\\an8}Zwei Hunde.\r\n";
  FakeTranslator fake;
  const std::string out = mtx::doc::translate_document(
      srt, Format::srt, "film.srt",
      [&fake](const std::vector<std::string>& t, mtx::text::Format f) { return fake(t, f); });
  EXPECT_EQ(out,
            "1\r\n00:00:01,000 --> 00:00:02,500\r\nBANK. <i>EINER</i> AUF SITZT\r\nHUT ROTEN EINEM MIT MANN EIN\r\n\r\n"
            "2\r\n00:00:03,000 --> 00:00:04,000\r\n{\\an8}HUNDE. ZWEI\r\n");
}

TEST(Documents, MarkdownKeepsItsMarkersCodeAndBlocks) {
  const std::string md =
      "# Der *große* Hund\n\nEin **roter** Hut und `Code bleibt`\nauf [einer Bank](https://x.org \"T\").\n\n"
      "> Ein Zitat.\n\n- Ein _Punkt_.\n\n| Spalte | Zwei |\n|---|---|\n| Ein Hund | Drei |\n\n```\nCode bleibt\n```\n";
  FakeTranslator fake;
  const std::string out = mtx::doc::translate_document(
      md, Format::md, "a.md", [&fake](const std::vector<std::string>& t, mtx::text::Format f) { return fake(t, f); });
  EXPECT_EQ(
      out,
      "# HUND *GROßE* DER\n\n`Code bleibt` [BANK. EINER](https://x.org \"T\") AUF UND HUT **ROTER** EIN\n\n"
      "> ZITAT. EIN\n\n- _PUNKT._ EIN\n\n| SPALTE | ZWEI |\n|---|---|\n| HUND EIN | DREI |\n\n```\nCode bleibt\n```\n")
      << out;
}

// The corpus PyPI's writers make (tests/documents/corpus.py): every format read back by PyPI's readers with the
// same structure, nothing left untranslated, and every run on the words aligned to its source words.
TEST(Documents, ThePypiWritersCorpusComesBackWithItsStructureAndRuns) {
  const std::string py = mtx::test::venv_python("docx, pptx, odf, pysrt, lxml");
  if (py.empty()) {
    if (std::getenv("MTX_REQUIRE_ORACLES")) FAIL() << "no .venv with python-docx, python-pptx, odfpy, pysrt";
    GTEST_SKIP() << "no .venv with python-docx, python-pptx, odfpy, pysrt (scripts/venv.sh, see scripts/test.sh)";
  }
  const fs::path dir = fs::temp_directory_path() / ("mtx_doc_corpus_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string script = std::string(MTX_SOURCE_DIR) + "/tests/documents/corpus.py";
  ASSERT_EQ(std::system(("'" + py + "' '" + script + "' make '" + dir.string() + "'").c_str()), 0);
  fs::create_directories(dir / "out");
  // The check's verdict on `file` translated by `fake`, and what it printed.
  const auto checked = [&](const fs::path& file, FakeTranslator& fake, std::string& output) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    const std::string name = file.filename().string();
    const std::string out = mtx::doc::translate_document(
        s.str(), mtx::doc::format_of_path(name), name,
        [&fake](const std::vector<std::string>& t, mtx::text::Format f) { return fake(t, f); });
    std::ofstream(dir / "out" / name, std::ios::binary) << out;
    const std::string check = "'" + py + "' '" + script + "' check '" + file.string() + "' '" +
                              (dir / "out" / name).string() + "' --mode fake 2>&1";
    output.clear();
    FILE* pipe = ::popen(check.c_str(), "r");
    if (!pipe) return -1;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof(buf), pipe)) > 0;) output.append(buf, n);
    return ::pclose(pipe);
  };
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    FakeTranslator fake;
    std::string output;
    EXPECT_EQ(checked(e.path(), fake, output), 0) << e.path().filename() << ":\n" << output;
    ++files;
  }
  EXPECT_EQ(files, 9u);
  // The check tells runs placed by position from runs placed on the aligned words.
  for (const char* name : {"report.docx", "letter.odt", "film.srt", "readme.md"}) {
    FakeTranslator by_position;
    by_position.ignore_links = true;
    std::string output;
    EXPECT_NE(checked(dir / name, by_position, output), 0) << name << ": runs placed by position passed the check";
    EXPECT_NE(output.find("the run"), std::string::npos) << output;
  }
  fs::remove_all(dir);
}

// Found by fuzz_subtitles: a cue line that starts with a blank was broken there, which made a blank line that split
// the cue from its timing. Written back, a cue's lines are never blank, and the file reads back with its cues.
TEST(Documents, ACueWrittenBackKeepsItsTextWithItsTiming) {
  const std::string srt(
      "1\r\n00:00:01,000 --> 00:00:02,000\r\n Hund\r\nl\0\0\0\0.\r\n\r\n2\r\n00:00:03,000 --> "
      "00:00:04,000\r\n\t  Ein   Hund \r\n \r\n",
      104);
  std::vector<size_t> texts;
  const mtx::doc::Translate same = [&texts](const std::vector<std::string>& t, mtx::text::Format) {
    texts.push_back(t.size());
    return t;
  };
  const std::string once = mtx::doc::translate_document(srt, Format::srt, "x.srt", same);
  EXPECT_EQ(once, std::string("1\r\n00:00:01,000 --> 00:00:02,000\r\nHund\r\nl\0\0\0\0.\r\n\r\n2\r\n00:00:03,000 --> "
                              "00:00:04,000\r\nEin   Hund\r\n \r\n",
                              99));
  EXPECT_EQ(mtx::doc::translate_document(once, Format::srt, "x.srt", same), once);
  EXPECT_EQ(texts, (std::vector<size_t>{2, 2}));
  // A literal '<' that a '>' follows once the lines are joined and broken again would read back as a tag: it is
  // written as its look-alike.
  const std::string angle = "1\n00:00:01,000 --> 00:00:02,000\na <\nb > ccccccccccccc\n";
  const std::string out = mtx::doc::translate_document(angle, Format::srt, "x.srt", same);
  EXPECT_EQ(out, "1\n00:00:01,000 --> 00:00:02,000\na \u2039 b >\nccccccccccccc\n");
  EXPECT_EQ(mtx::doc::translate_document(out, Format::srt, "x.srt", same), out);
}
