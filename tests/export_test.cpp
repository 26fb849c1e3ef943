// Exports: the safetensors file as the format defines it, an export holding every weight and both
// vocabularies, and a CTranslate2 conversion that scores target sentences as mtx does (through the
// ctranslate2 package in the project's .venv; skipped, saying so, where that is not installed).
#include "mtx/bundle/export.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <map>

#include "mtx/data/prepare.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/errors.h"
#include "test_utils.h"

using namespace mtx;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The header and the data of a safetensors file.
struct Safetensors {
  json header;
  std::string data;
};

Safetensors parse(const fs::path& p) {
  const std::string bytes = read_file(p);
  EXPECT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[size_t(i)]);
  EXPECT_EQ(n % 8, 0u) << "the data should start 8-byte aligned";
  Safetensors s;
  s.header = json::parse(bytes.substr(8, n));
  s.data = bytes.substr(8 + n);
  return s;
}

torch::Tensor tensor_of(const Safetensors& s, const std::string& name) {
  const json& e = s.header.at(name);
  EXPECT_EQ(e.at("dtype"), "F32") << name;
  const auto shape = e.at("shape").get<std::vector<int64_t>>();
  const auto begin = e.at("data_offsets")[0].get<size_t>(), end = e.at("data_offsets")[1].get<size_t>();
  torch::Tensor t = torch::empty(shape, torch::kFloat);
  EXPECT_EQ(end - begin, size_t(t.numel()) * sizeof(float)) << name;
  std::memcpy(t.data_ptr<float>(), s.data.data() + begin, end - begin);
  return t;
}

struct Toy {
  test::TempDir tmp;
  config::Config config;
  std::optional<tokenizer::Tokenizer> tok;
  model::Transformer model{nullptr};

  // variant 0: pre-norm, tied; 1: the other branches of the mapping; 2: MarianMT's options (post-norm, swish,
  // positions in halves, a tied output projection with a bias).
  explicit Toy(int variant = 0) {
    config = test::toy_setup(tmp);
    if (variant == 2) {
      config.model.norm = config::Norm::post;
      config.model.activation = config::Activation::swish;
      config.model.positions = config::Positions::sinusoidal_halves;
      config.model.output_bias = true;
    } else if (variant == 1) {  // the other branches of the mapping
      config.model.norm = config::Norm::post;
      config.model.activation = config::Activation::gelu;
      config.model.tie_output = false;
      config.model.share_embeddings = false;
      config.model.positions = config::Positions::learned;
      config.model.decoder_layers = 2;
    } else {
      config.model.norm = config::Norm::pre;
    }
    tok = data::prepare_data(config).tokenizer;
    torch::manual_seed(3);
    model = bundle::build_model(config, *tok);
    // Larger weights than the init gives, so the distributions are far from uniform and errors show.
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.3);
    model->eval();
  }
};

// The Python of the project's .venv when it has ctranslate2, safetensors and numpy; "" otherwise.
std::string ct2_python() { return test::venv_python("ctranslate2, safetensors, numpy"); }

}  // namespace

TEST(Export, SafetensorsFileIsWhatTheFormatSays) {
  test::TempDir tmp;
  const torch::Tensor a = torch::arange(12, torch::kFloat).view({3, 4});
  const torch::Tensor b = torch::tensor({-1, 2, 127}, torch::kChar);
  const torch::Tensor c = torch::tensor({7}, torch::kLong);
  bundle::write_safetensors(tmp / "t.safetensors", {{"a", a.t()}, {"b", b}, {"c", c}}, {{"k", "v"}});
  const Safetensors s = parse(tmp / "t.safetensors");
  EXPECT_EQ(s.header.at("__metadata__").at("k"), "v");
  EXPECT_EQ(s.header.at("a").at("shape"), json({4, 3}));
  EXPECT_EQ(s.header.at("b").at("dtype"), "I8");
  EXPECT_EQ(s.header.at("c").at("dtype"), "I64");
  EXPECT_TRUE(torch::equal(tensor_of(s, "a"), a.t().contiguous()))
      << "a transposed view is written in its logical order";
  // Offsets tile the data with no gap or overlap, in the order written.
  EXPECT_EQ(s.header.at("a").at("data_offsets"), json({0, 48}));
  EXPECT_EQ(s.header.at("b").at("data_offsets"), json({48, 51}));
  EXPECT_EQ(s.header.at("c").at("data_offsets"), json({51, 59}));
  EXPECT_EQ(s.data.size(), 59u);
  EXPECT_THROW(bundle::write_safetensors(tmp / "u.safetensors", {{"a", a}, {"a", a}}), Error);
}

TEST(Export, SafetensorsExportHoldsEveryWeightAndBothVocabularies) {
  Toy toy;
  bundle::save_bundle(toy.tmp / "m.pt", toy.config, *toy.tok, toy.model);
  const test::CommandResult r = test::run_mtx("export --format safetensors --ckpt " + (toy.tmp / "m.pt").string() +
                                              " --out " + (toy.tmp / "x").string());
  ASSERT_EQ(r.code, 0) << r.output;
  const Safetensors s = parse(toy.tmp / "x" / "model.safetensors");
  size_t n = 0;
  for (const auto& p : toy.model->named_parameters()) {
    EXPECT_TRUE(torch::equal(tensor_of(s, p.key()), p.value())) << p.key();
    ++n;
  }
  for (const auto& p : toy.model->named_buffers()) {
    EXPECT_TRUE(torch::equal(tensor_of(s, p.key()), p.value())) << p.key();
    ++n;
  }
  EXPECT_EQ(s.header.size(), n + 1) << "every tensor and __metadata__, nothing else";
  const json meta = json::parse(read_file(toy.tmp / "x" / "mtx_export.json"));
  EXPECT_EQ(meta.at("format"), "mtx-export-1");
  EXPECT_EQ(meta.at("source_vocabulary").size(), size_t(toy.tok->src().vocab_size()));
  EXPECT_EQ(meta.at("target_vocabulary")[3], "</s>");
  EXPECT_EQ(meta.at("model").at("pre_norm"), true);
  EXPECT_EQ(read_file(toy.tmp / "x" / "source.spm.model"), toy.tok->src().bytes());
  EXPECT_FALSE(fs::exists(toy.tmp / "x" / "target.spm.model")) << "a joint tokenizer is one model";
}

// read_safetensors gives back what write_safetensors wrote (every dtype both know, an empty tensor, the metadata),
// in data order, and names the file and the fault of a damaged one; a file written by Python's safetensors reads
// too.
TEST(Export, SafetensorsReadBackWhatWasWrittenAndDamageIsNamed) {
  test::TempDir tmp;
  const std::vector<std::pair<std::string, torch::Tensor>> tensors = {
      {"w", torch::arange(12, torch::kFloat).view({3, 4}).t()},
      {"i8", torch::tensor({-128, 0, 127}, torch::kChar)},
      {"i64", torch::tensor(std::vector<int64_t>{int64_t(1) << 40, -5}, torch::kLong)},
      {"half", torch::tensor({0.5, -2.0, 65504.0}).to(torch::kHalf)},
      {"bf16", torch::tensor({1.0, -3.5}).to(torch::kBFloat16)},
      {"empty", torch::zeros({0, 3})}};
  const fs::path file = tmp / "t.safetensors";
  bundle::write_safetensors(file, tensors, {{"format", "pt"}});
  const bundle::Safetensors back = bundle::read_safetensors(file);
  ASSERT_EQ(back.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(back.tensors[i].first, tensors[i].first);
    EXPECT_EQ(back.tensors[i].second.scalar_type(), tensors[i].second.scalar_type()) << tensors[i].first;
    EXPECT_TRUE(torch::equal(back.tensors[i].second, tensors[i].second.contiguous())) << tensors[i].first;
  }
  EXPECT_EQ(back.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));

  const std::string bytes = read_file(file);
  const auto damaged = [&](const std::string& content, const std::string& expected) {
    const fs::path bad = tmp / "bad.safetensors";
    write_file_atomic(bad, content);
    try {
      bundle::read_safetensors(bad);
      ADD_FAILURE() << "no error for " << expected;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(bad.string()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  damaged(bytes.substr(0, 5), "shorter than its 8-byte header size");
  damaged(bytes.substr(0, bytes.size() - 1), "'bf16' has data offsets outside");
  std::string wide = bytes;
  wide[6] = 1;
  damaged(wide, "a header of");
  std::string unknown = bytes;
  unknown.replace(unknown.find("\"F32\""), 5, "\"F99\"");
  damaged(unknown, "unknown dtype F99");
  std::string reshaped = bytes;
  reshaped.replace(reshaped.find("[4,3]"), 5, "[4,4]");
  damaged(reshaped, "'w' holds 48 bytes");
  std::string not_json = bytes;
  not_json[8] = '[';
  damaged(not_json, "not JSON");

  const std::string py = ct2_python();
  if (py.empty()) GTEST_SKIP() << "no .venv with safetensors and numpy: Python's file not read";
  const fs::path theirs = tmp / "py.safetensors";
  const std::string cmd = "'" + py +
                          "' -c \"import numpy as np, safetensors.numpy as s; s.save_file({'b': "
                          "np.array([[1, -2, 3]], np.int8), 'a': np.arange(6, dtype=np.float16).reshape(2, 3) / 4}, '" +
                          theirs.string() + "', metadata={'k': 'v'})\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const bundle::Safetensors py_back = bundle::read_safetensors(theirs);
  ASSERT_EQ(py_back.tensors.size(), 2u);
  std::map<std::string, torch::Tensor> by_name(py_back.tensors.begin(), py_back.tensors.end());
  EXPECT_TRUE(torch::equal(by_name.at("a"), (torch::arange(6).view({2, 3}) / 4.0).to(torch::kHalf)));
  EXPECT_TRUE(torch::equal(by_name.at("b"), torch::tensor({1, -2, 3}, torch::kChar).view({1, 3})));
  EXPECT_EQ(py_back.metadata.at("k"), "v");
}

TEST(Export, Ct2ScoresTargetsAsMtxDoes) {
  const std::string py = ct2_python();
  if (py.empty()) GTEST_SKIP() << "no .venv with ctranslate2 (scripts/venv.sh ctranslate2 safetensors numpy)";
  for (const int variant : {0, 1, 2}) {
    Toy toy(variant);
    bundle::save_bundle(toy.tmp / "m.pt", toy.config, *toy.tok, toy.model);
    const fs::path out = toy.tmp / "ct2";
    const test::CommandResult r = test::run_mtx("export --format ct2 --python " + py + " --ckpt " +
                                                (toy.tmp / "m.pt").string() + " --out " + out.string());
    ASSERT_EQ(r.code, 0) << r.output;
    ASSERT_TRUE(fs::exists(out / "model.bin")) << r.output;
    // Pairs of the toy corpus and a made-up one; mtx's teacher-forced log-probabilities of each target token
    // (EOS included) against CTranslate2's score_batch.
    const std::vector<std::pair<std::string, std::string>> pairs = {
        {"ein Hund läuft", "a dog runs"},
        {"zwei Männer spielen Fußball im Park", "two men play soccer in the park"},
        {"Kinder", "a woman reads"}};
    json requests = json::array();
    std::vector<std::vector<float>> expected;
    const auto ids = toy.tok->special_ids();
    for (const auto& [de, en] : pairs) {
      const auto s = toy.tok->src().encode(de);
      const auto t = toy.tok->tgt().encode(en);
      json src_pieces = json::array(), tgt_pieces = json::array();
      for (const int32_t i : s) src_pieces.push_back(toy.tok->src().piece(i));
      for (const int32_t i : t) tgt_pieces.push_back(toy.tok->tgt().piece(i));
      requests.push_back({src_pieces, tgt_pieces});
      std::vector<int64_t> src(s.begin(), s.end()), tin = {ids.bos}, tout(t.begin(), t.end());
      src.push_back(ids.eos);
      tin.insert(tin.end(), t.begin(), t.end());
      tout.push_back(ids.eos);
      torch::NoGradGuard no_grad;
      const torch::Tensor logp = torch::log_softmax(
          toy.model->forward(torch::tensor(src).unsqueeze(0), torch::tensor(tin).unsqueeze(0))[0], -1);  // [t, V]
      std::vector<float> e;
      for (size_t k = 0; k < tout.size(); ++k) e.push_back(logp[int64_t(k)][tout[k]].item<float>());
      expected.push_back(e);
    }
    test::write_text(toy.tmp / "req.json", requests.dump());
    test::write_text(toy.tmp / "score.py", R"PY(
import json, sys, ctranslate2
reqs = json.load(open(sys.argv[2]))
tr = ctranslate2.Translator(sys.argv[1], device="cpu", intra_threads=1)
res = tr.score_batch([r[0] for r in reqs], [r[1] for r in reqs])
print(json.dumps([r.log_probs for r in res]))
)PY");
    const std::string cmd = "'" + py + "' " + (toy.tmp / "score.py").string() + " " + out.string() + " " +
                            (toy.tmp / "req.json").string() + " > " + (toy.tmp / "scores.json").string();
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const json got = json::parse(read_file(toy.tmp / "scores.json"));
    ASSERT_EQ(got.size(), pairs.size());
    for (size_t i = 0; i < pairs.size(); ++i) {
      ASSERT_EQ(got[i].size(), expected[i].size()) << pairs[i].second << " (variant " << variant << ")";
      for (size_t k = 0; k < expected[i].size(); ++k) {
        EXPECT_NEAR(got[i][k].get<float>(), expected[i][k], 2e-3)
            << "token " << k << " of '" << pairs[i].second << "' (variant " << variant << ")";
      }
    }
  }
}
