#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "mtx/plot/figures.h"
#include "mtx/tokenizer/tokenizer.h"
#include "mtx/util/errors.h"
#include "mtx/util/svg.h"
#include "mtx/util/utf8.h"
#include "test_utils.h"

namespace plot = mtx::plot;
namespace svg = mtx::svg;

namespace {

// A small XML well-formedness check: one root <svg>, every element closed in order, attributes quoted,
// only the five predefined entities, valid UTF-8, no control characters. Returns "" or what is wrong.
std::string xml_problem(const std::string& x) {
  if (!mtx::utf8::is_valid(x)) return "invalid UTF-8";
  std::vector<std::string> open;
  size_t i = 0, roots = 0;
  while (i < x.size()) {
    const char c = x[i];
    if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r') return "control character";
    if (c == '&') {
      const size_t semi = x.find(';', i);
      const std::string e = semi == std::string::npos ? "" : x.substr(i, semi - i + 1);
      if (e != "&amp;" && e != "&lt;" && e != "&gt;" && e != "&quot;" && e != "&apos;")
        return "bad entity at " + std::to_string(i);
      i = semi + 1;
      continue;
    }
    if (c == '>') return "stray '>' at " + std::to_string(i);
    if (c != '<') {
      ++i;
      continue;
    }
    const size_t end = x.find('>', i);
    if (end == std::string::npos) return "unclosed tag";
    std::string tag = x.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return "mismatched </" + tag.substr(1) + ">";
      open.pop_back();
      continue;
    }
    const bool self = tag.back() == '/';
    if (self) tag.pop_back();
    static const std::regex element(
        R"(^([A-Za-z][A-Za-z0-9:_-]*)(\s+[A-Za-z_:][A-Za-z0-9:_.-]*="[^"<&]*(&(amp|lt|gt|quot|apos);[^"<&]*)*")*\s*$)");
    std::smatch m;
    if (!std::regex_match(tag, m, element)) return "bad element <" + tag.substr(0, 60) + ">";
    if (open.empty() && ++roots > 1) return "more than one root";
    if (!self) open.push_back(m[1]);
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return roots == 1 ? "" : "no root";
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST(Plot, TheWellFormednessCheckCanFail) {
  EXPECT_EQ(xml_problem("<svg><g></svg>"), "mismatched </svg>");
  EXPECT_EQ(xml_problem("<svg><text>a & b</text></svg>"), "bad entity at 13");
  EXPECT_EQ(xml_problem("<svg width=3></svg>"), "bad element <svg width=3>");
  EXPECT_EQ(xml_problem("<svg><text>\xc3</text></svg>"), "invalid UTF-8");
  EXPECT_EQ(xml_problem("<svg><text x=\"1\">a &amp; b</text></svg>"), "");
}

TEST(Plot, LabelsAreEscapedAndCutAtCharacterBoundaries) {
  svg::LineChart c;
  c.title = "loss <train> & \"valid\"";
  c.series.push_back({"a<b", {1, 2, 3}, {3, 2, NAN}});
  const std::string svg = svg::line_chart_svg(c);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_NE(svg.find("loss &lt;train&gt; &amp; &quot;valid&quot;"), std::string::npos);
  EXPECT_NE(svg.find(">a&lt;b<"), std::string::npos);
  svg::Heatmap m;
  m.rows = 1;
  m.cols = 2;
  m.values = {0, 1};
  m.row_labels = {"▁Straßenbahnhaltestellenschild"};  // 30 characters, most of them 1 byte, 'ß' and '▁' more
  m.col_labels = {"x", "€€€€€€€€€€€€€€€€€€€€€€€€€"};
  const std::string grid = svg::heatmap_grid_svg({m}, 1, "t");
  EXPECT_EQ(xml_problem(grid), "");
  EXPECT_NE(grid.find("▁Straßenbahnhaltestell.."), std::string::npos) << "cut to 22 characters + ..";
}

TEST(Plot, PositionsChartTheChosenDimensionsAndMapThemAll) {
  const std::string svg = plot::positions_svg(100, 20, {4, 5, 6, 7});
  ASSERT_EQ(xml_problem(svg), "");
  for (const char* label : {">dim 4<", ">dim 5<", ">dim 6<", ">dim 7<", ">position<", "d_model 20"}) {
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  }
  EXPECT_EQ(count(svg, "<polyline"), 4u);
  EXPECT_EQ(count(svg, "<rect x="), 100u * 20u + 1u) << "one cell per position and dimension, and the frame";
  // Position 0 encodes sin(0) = 0 (white) in even and cos(0) = 1 (full red) in odd dimensions.
  EXPECT_NE(svg.find("fill=\"#ffffff\""), std::string::npos);
  EXPECT_NE(svg.find("fill=\"#ff0000\""), std::string::npos);
  EXPECT_THROW(plot::positions_svg(10, 7, {1}), mtx::ConfigError);
  EXPECT_THROW(plot::positions_svg(10, 8, {8}), mtx::ConfigError);
}

TEST(Plot, MaskIsLowerTriangular) {
  const std::string svg = plot::mask_svg(5);
  ASSERT_EQ(xml_problem(svg), "");
  const std::string dark = "fill=\"#08306b\"", light = "fill=\"#ffffff\"";
  EXPECT_EQ(count(svg, dark), 15u) << "1 + 2 + 3 + 4 + 5 cells may attend";
  EXPECT_EQ(count(svg, light), 10u);
  // Row i's cells come in order: the first i+1 dark, the rest light.
  std::vector<std::string> cells;
  std::regex fill("<rect x=\"[0-9.]+\" y=\"[0-9.]+\" width=\"[0-9.]+\" height=\"[0-9.]+\" fill=\"(#[0-9a-f]{6})\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), fill); it != std::sregex_iterator(); ++it) {
    cells.push_back((*it)[1]);
  }
  ASSERT_EQ(cells.size(), 25u);
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 5; ++j) EXPECT_EQ(cells[size_t(i * 5 + j)], j <= i ? "#08306b" : "#ffffff") << i << "," << j;
  }
  for (const char* label : {">0<", ">4<"}) EXPECT_NE(svg.find(label), std::string::npos);
}

TEST(Plot, SchedulesDrawTheTutorialsThreeNoamCurves) {
  const auto curves = plot::annotated_transformer_schedules();
  ASSERT_EQ(curves.size(), 3u);
  const std::string svg = plot::schedule_svg(curves, 20000);
  ASSERT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<polyline"), 3u);
  for (const char* label : {"noam d_model 512 warm-up 4000", "noam d_model 512 warm-up 8000",
                            "noam d_model 256 warm-up 4000", ">update<", ">learning rate<"}) {
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  }
  // The y axis reaches the highest peak: d_model 256, warm-up 4000: 256^-0.5 * 4000^-0.5 = 0.00098821.
  EXPECT_NE(svg.find(">0.00099<"), std::string::npos);
  EXPECT_THROW(plot::schedule_svg(curves, 0), mtx::ConfigError);
}

namespace {

// A word tokenizer and a fresh encoder-decoder (or decoder-only) model over it: 2 layers, 2 heads.
struct AttentionFixture {
  mtx::tokenizer::Tokenizer tok = mtx::tokenizer::Tokenizer::from_bytes(
      mtx::tokenizer::WordModel::train({"ein hund läuft .", "a dog runs & <jumps> ."}, 1)->bytes(), "");
  mtx::model::Transformer make(bool decoder_only) const {
    torch::manual_seed(1);
    const int64_t v = tok.tgt().vocab_size();
    return mtx::model::Transformer(mtx::model::TransformerOptions(v, v)
                                       .d_model(8)
                                       .heads(2)
                                       .encoder_layers(2)
                                       .decoder_layers(2)
                                       .ffn_dim(8)
                                       .max_len(16)
                                       .decoder_only(decoder_only));
  }
};

}  // namespace

TEST(Plot, AttentionMapsAreDistributionsCausalWhereTheyMustBe) {
  AttentionFixture f;
  mtx::model::Transformer m = f.make(false);
  const torch::Tensor src = torch::tensor({5, 6, 7, 3}, torch::kLong).unsqueeze(0);  // [1, 4]
  const torch::Tensor tgt = torch::tensor({2, 8, 9}, torch::kLong).unsqueeze(0);     // [1, 3]
  m->eval();
  const torch::Tensor before = m->forward(src, tgt);
  const mtx::model::AttentionMaps maps = m->attention_maps(src, tgt);
  ASSERT_EQ(maps.encoder_self.size(), 2u);
  ASSERT_EQ(maps.cross.size(), 2u);
  EXPECT_EQ(maps.encoder_self[0].sizes(), (torch::IntArrayRef{2, 4, 4}));
  EXPECT_EQ(maps.decoder_self[1].sizes(), (torch::IntArrayRef{2, 3, 3}));
  EXPECT_EQ(maps.cross[1].sizes(), (torch::IntArrayRef{2, 3, 4}));
  for (const auto* kind : {&maps.encoder_self, &maps.decoder_self, &maps.cross}) {
    for (const auto& w : *kind)
      EXPECT_TRUE(torch::allclose(w.sum(-1), torch::ones({w.size(0), w.size(1)}), 1e-5, 1e-5));
  }
  for (const auto& w : maps.decoder_self) EXPECT_EQ(w.triu(1).abs().max().item<double>(), 0.0) << "causal";
  EXPECT_TRUE(torch::allclose(m->forward(src, tgt), before)) << "keeping weights changes nothing";
  for (auto& module : m->modules()) {
    if (auto* a = module->as<mtx::model::SelfAttention>()) {
      EXPECT_FALSE(a->keep_weights || a->weights.defined());
    }
  }
}

TEST(Plot, AttentionGridsCarryEveryLayerAndHeadWithThePiecesOnTheAxes) {
  AttentionFixture f;
  mtx::model::Transformer m = f.make(false);
  const auto files = plot::attention_svgs(m, f.tok, f.tok.src().encode("ein hund läuft ."),
                                          f.tok.tgt().encode("a dog runs & <jumps>"));
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].first, "encoder_self.svg");
  EXPECT_EQ(files[1].first, "decoder_self.svg");
  EXPECT_EQ(files[2].first, "cross.svg");
  for (const auto& [name, svg] : files) {
    EXPECT_EQ(xml_problem(svg), "") << name;
    for (const char* title : {"layer 1 head 1", "layer 1 head 2", "layer 2 head 1", "layer 2 head 2"}) {
      EXPECT_EQ(count(svg, title), 1u) << name << ": " << title;
    }
  }
  // Every map of a grid has its labels: 4 maps x (rows + columns).
  EXPECT_EQ(count(files[0].second, ">läuft<"), 8u);
  EXPECT_EQ(count(files[0].second, ">&lt;eos&gt;<"), 8u) << "the source's end";
  EXPECT_EQ(count(files[1].second, ">&lt;s&gt;<"), 8u) << "the target's start";
  // Rows (right-aligned labels) are the target, columns (turned labels) the source.
  EXPECT_EQ(count(files[2].second, "text-anchor=\"end\">&amp;<"), 4u) << "target pieces label the cross maps' rows";
  EXPECT_EQ(count(files[2].second, "text-anchor=\"end\">&lt;jumps&gt;<"), 4u);
  EXPECT_EQ(count(files[2].second, ")\">hund<"), 4u) << "source pieces label its columns";

  mtx::model::Transformer lm = f.make(true);
  const auto lm_files = plot::attention_svgs(lm, f.tok, {}, f.tok.tgt().encode("a dog runs ."));
  ASSERT_EQ(lm_files.size(), 1u);
  EXPECT_EQ(lm_files[0].first, "self.svg");
  EXPECT_EQ(xml_problem(lm_files[0].second), "");
  EXPECT_EQ(count(lm_files[0].second, ">dog<"), 8u);
}

TEST(Plot, LinesReadTheNamedColumnsOfATable) {
  mtx::test::TempDir tmp;
  const std::string file = (tmp / "curve.tsv").string();
  std::ofstream(file) << "minutes\tupdate\tbleu\n1.5\t50\t3.25\n\n3.0\t100\t12.5\n4.75\t150\t21\n";
  const svg::Series s = plot::tsv_series(file, "minutes", "bleu", "quick");
  EXPECT_EQ(s.label, "quick");
  EXPECT_EQ(s.x, (std::vector<double>{1.5, 3.0, 4.75}));
  EXPECT_EQ(s.y, (std::vector<double>{3.25, 12.5, 21}));
  EXPECT_EQ(plot::tsv_series(file, "update", "minutes", "").y, (std::vector<double>{1.5, 3.0, 4.75}));
  auto error = [&](const std::string& x, const std::string& y) -> std::string {
    try {
      plot::tsv_series(file, x, y, "");
    } catch (const mtx::Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error("minutes", "BLEU").find("has no column 'BLEU' (its columns: minutes, update, bleu)"),
            std::string::npos);
  std::ofstream(file, std::ios::app) << "6.0\tn/a\t25\n";
  EXPECT_NE(error("update", "bleu").find("curve.tsv:6: column 'update' is not a number"), std::string::npos)
      << error("update", "bleu");
  const svg::LineChart chart{"BLEU against minutes",
                             "minutes",
                             "BLEU",
                             {plot::tsv_series(file, "minutes", "minutes", "q"), plot::point_series("peer", 60, 35.95)},
                             true,
                             true};
  const std::string svg = svg::line_chart_svg(chart);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_NE(svg.find(">peer<"), std::string::npos);
  EXPECT_NE(svg.find(">q<"), std::string::npos);
  // x from zero: the first x tick is 0 (else the data's minimum, 1.5).
  svg::LineChart from_zero = chart;
  from_zero.x_from_zero = true;
  EXPECT_NE(svg::line_chart_svg(from_zero).find("text-anchor=\"middle\">0</text>"), std::string::npos);
  EXPECT_EQ(svg.find("text-anchor=\"middle\">0</text>"), std::string::npos);
}
