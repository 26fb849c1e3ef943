// mtx import against its oracle: tests/oracles/hf_marian.py builds a small MarianMTModel (trained briefly on
// Multi30k, random output bias, swish) with transformers and records what transformers computes with it; mtx
// imports the directory with `mtx import` and must compute the same.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <map>

#include "mtx/bundle/bundle.h"
#include "mtx/bundle/export.h"
#include "mtx/bundle/import.h"
#include "mtx/decode/translator.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/errors.h"
#include "test_utils.h"

namespace fs = std::filesystem;
using namespace mtx;

namespace {

// .venv's python with torch, transformers and sentencepiece ("" when missing: the tests skip, or fail where
// MTX_REQUIRE_ORACLES=1 says the suite installed them).
std::string oracle_python() {
  std::string py = (fs::path(MTX_SOURCE_DIR) / ".venv" / "bin" / "python").string();
  if (const char* env = std::getenv("MTX_TEST_PYTHON"); env && *env) py = env;
  if (!fs::exists(py)) return "";
  const std::string cmd = "'" + py + "' -c 'import torch, transformers, sentencepiece, safetensors' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0 ? py : "";
}

#define MTX_REQUIRE_ORACLE(py)                                                                              \
  do {                                                                                                      \
    MTX_REQUIRE_MULTI30K();                                                                                 \
    if (py.empty()) {                                                                                       \
      const char* need = std::getenv("MTX_REQUIRE_ORACLES");                                                \
      if (need && *need == '1') FAIL() << "MTX_REQUIRE_ORACLES=1 but .venv lacks torch/transformers";        \
      GTEST_SKIP() << "no .venv with torch, transformers, sentencepiece (scripts/venv.sh, see scripts/test.sh)"; \
    }                                                                                                       \
  } while (0)

// Runs the oracle into dir (hf/, expect.safetensors, expect.json).
void make_oracle(const std::string& py, const fs::path& dir, bool untied) {
  const std::string cmd = "'" + py + "' '" + (fs::path(MTX_SOURCE_DIR) / "tests/oracles/hf_marian.py").string() +
                          "' --data '" + test::multi30k_dir().string() + "' --out '" + dir.string() + "'" +
                          (untied ? " --untied" : "") + " > '" + (dir / "oracle.log").string() + "' 2>&1";
  fs::create_directories(dir);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_file(dir / "oracle.log");
}

std::vector<int32_t> ids_of(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kInt).contiguous();
  return std::vector<int32_t>(c.data_ptr<int32_t>(), c.data_ptr<int32_t>() + c.numel());
}

// Everything transformers computed, against the imported bundle.
void expect_same_as_transformers(const fs::path& dir, const std::string& py) {
  const test::CommandResult r = test::run_mtx("import --from hf '" + (dir / "hf").string() + "' --out '" +
                                              (dir / "model.pt").string() + "' --python '" + py + "'");
  ASSERT_EQ(r.code, 0) << r.output;
  bundle::Bundle b = bundle::load_bundle(dir / "model.pt");
  const tokenizer::Tokenizer& tok = *b.tokenizer;
  const nlohmann::json expect = nlohmann::json::parse(read_file(dir / "expect.json"));
  std::map<std::string, torch::Tensor> t;
  for (auto& [name, tensor] : bundle::read_safetensors(dir / "expect.safetensors").tensors) t.emplace(name, tensor);
  const auto sources = expect.at("source").get<std::vector<std::string>>();
  const auto references = expect.at("reference").get<std::vector<std::string>>();
  const int64_t vocab = expect.at("vocab_size").get<int64_t>();
  const tokenizer::SpecialIds ids = tok.special_ids();
  EXPECT_EQ(ids.pad, expect.at("pad").get<int32_t>());
  EXPECT_EQ(ids.eos, 0);
  EXPECT_EQ(ids.bos, vocab);  // mtx's start piece, appended
  ASSERT_EQ(tok.tgt().vocab_size(), vocab + 1);

  b.model->eval();
  torch::NoGradGuard no_grad;
  double max_diff = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string k = std::to_string(i);
    // Both tokenizers: MarianTokenizer's ids, </s> appended to each side.
    std::vector<int32_t> src = tok.src().encode(sources[i]), tgt = tok.tgt().encode(references[i]);
    src.push_back(ids.eos);
    tgt.push_back(ids.eos);
    EXPECT_EQ(src, ids_of(t.at("src." + k))) << sources[i];
    EXPECT_EQ(tgt, ids_of(t.at("tgt." + k))) << references[i];
    // Teacher-forced logits: MarianMT's columns, and the start piece's far below.
    const torch::Tensor s = t.at("src." + k).to(torch::kLong).unsqueeze(0);  // [1, S]
    const torch::Tensor y = t.at("tgt." + k).to(torch::kLong);               // [T]
    const torch::Tensor tgt_in =
        torch::cat({torch::full({1}, int64_t(ids.bos), torch::kLong), y.narrow(0, 0, y.size(0) - 1)}).unsqueeze(0);
    const torch::Tensor logits = b.model->forward(s, tgt_in)[0];  // [T, V + 1]
    ASSERT_EQ(logits.size(1), vocab + 1);
    const torch::Tensor theirs = t.at("logits." + k);  // [T, V]
    max_diff = std::max(max_diff, (logits.narrow(1, 0, vocab) - theirs).abs().max().item<double>());
    EXPECT_TRUE((logits.select(1, vocab) < logits.select(1, ids.pad) - 29).all().item<bool>());
  }
  EXPECT_LT(max_diff, 1e-4) << "teacher-forced logits, max abs diff over " << sources.size() << " sentences";
  ::testing::Test::RecordProperty("max_logit_diff", std::to_string(max_diff));
  std::cout << "teacher-forced logits: max abs diff " << max_diff << " over " << sources.size() << " sentences\n";

  // Greedy and beam 4 under the settings that match (docs/import.md): alpha 0, exact stop, </s> at the limit.
  for (const auto& [kind, beam] : {std::pair<std::string, int>{"greedy", 1}, {"beam", 4}}) {
    decode::TranslateOptions o;
    o.search.beam = beam;
    o.search.alpha = 0;
    o.search.exact_stop = true;
    o.max_len_a = 0;
    o.max_len_b = expect.at("max_new_tokens").get<int>();
    decode::Translator translator(b.model, tok, o);
    const std::vector<decode::Translation> out = translator.translate(sources);
    const auto texts = expect.at(kind).get<std::vector<std::string>>();
    int same = 0;
    for (size_t i = 0; i < sources.size(); ++i) {
      std::vector<int32_t> theirs = ids_of(t.at(kind + "." + std::to_string(i)));
      if (!theirs.empty() && theirs.back() == ids.eos) theirs.pop_back();
      EXPECT_EQ(out[i].hypotheses.at(0).tokens, theirs) << kind << " " << i << ": " << sources[i];
      EXPECT_EQ(out[i].texts.at(0), texts[i]) << kind << " " << i;
      same += out[i].hypotheses.at(0).tokens == theirs;
    }
    std::cout << kind << ": " << same << " of " << sources.size() << " outputs identical to transformers'\n";
  }
}

}  // namespace

TEST(ImportHf, SharedEmbeddingsMatchTransformersAndBadInputsAreNamed) {
  const std::string py = oracle_python();
  MTX_REQUIRE_ORACLE(py);
  test::TempDir tmp;
  ASSERT_NO_FATAL_FAILURE(make_oracle(py, tmp.path(), /*untied=*/false));
  ASSERT_NO_FATAL_FAILURE(expect_same_as_transformers(tmp.path(), py));

  // Damaged copies: each one error of one line naming the file and the key or parameter.
  const fs::path hf = tmp / "hf";
  auto damaged = [&](const std::string& name, const std::function<void(const fs::path&)>& damage) {
    const fs::path copy = tmp / name;
    fs::copy(hf, copy, fs::copy_options::recursive);
    damage(copy);
    return test::boundary_error<DataError>([&] { bundle::import_hf(copy); });
  };
  auto edit_config = [](const fs::path& dir, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json c = nlohmann::json::parse(read_file(dir / "config.json"));
    edit(c);
    test::write_text(dir / "config.json", c.dump());
  };
  auto edit_weights = [](const fs::path& dir, const std::function<void(std::vector<std::pair<std::string, torch::Tensor>>&)>& edit) {
    bundle::Safetensors s = bundle::read_safetensors(dir / "model.safetensors");
    edit(s.tensors);
    bundle::write_safetensors(dir / "model.safetensors", s.tensors, s.metadata);
  };
  std::string e = damaged("no-config", [](const fs::path& d) { fs::remove(d / "config.json"); });
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  e = damaged("no-spm", [](const fs::path& d) { fs::remove(d / "target.spm"); });
  EXPECT_NE(e.find("target.spm"), std::string::npos) << e;
  e = damaged("no-weights", [](const fs::path& d) { fs::remove(d / "model.safetensors"); });
  EXPECT_NE(e.find("no weights"), std::string::npos) << e;
  e = damaged("shape", [&](const fs::path& d) {
    edit_weights(d, [](auto& ts) {
      for (auto& [name, t] : ts) {
        if (name == "model.decoder.layers.1.fc1.weight") t = t.narrow(0, 0, t.size(0) - 1).clone();
      }
    });
  });
  EXPECT_NE(e.find("model.safetensors: parameter 'model.decoder.layers.1.fc1.weight' has shape [127, 64]"),
            std::string::npos)
      << e;
  e = damaged("missing", [&](const fs::path& d) {
    edit_weights(d, [](auto& ts) {
      ts.erase(std::remove_if(ts.begin(), ts.end(), [](auto& p) { return p.first == "model.encoder.layers.0.fc2.bias"; }),
               ts.end());
    });
  });
  EXPECT_NE(e.find("'model.encoder.layers.0.fc2.bias' is missing"), std::string::npos) << e;
  e = damaged("extra", [&](const fs::path& d) {
    edit_weights(d, [](auto& ts) { ts.emplace_back("model.encoder.layernorm_embedding.weight", torch::ones({64})); });
  });
  EXPECT_NE(e.find("'model.encoder.layernorm_embedding.weight' has no place"), std::string::npos) << e;
  e = damaged("unscaled", [&](const fs::path& d) { edit_config(d, [](auto& c) { c["scale_embedding"] = false; }); });
  EXPECT_NE(e.find("config.json: scale_embedding"), std::string::npos) << e;
  e = damaged("activation", [&](const fs::path& d) { edit_config(d, [](auto& c) { c["activation_function"] = "tanh"; }); });
  EXPECT_NE(e.find("activation_function 'tanh'"), std::string::npos) << e;
  e = damaged("prenorm", [&](const fs::path& d) { edit_config(d, [](auto& c) { c["normalize_before"] = true; }); });
  EXPECT_NE(e.find("normalize_before"), std::string::npos) << e;
  e = damaged("bart", [&](const fs::path& d) { edit_config(d, [](auto& c) { c["model_type"] = "bart"; }); });
  EXPECT_NE(e.find("model_type 'bart'"), std::string::npos) << e;
  e = damaged("vocab", [&](const fs::path& d) { test::write_text(d / "vocab.json", "{\"<unk>\": 1, \"x\": 99999}"); });
  EXPECT_NE(e.find("vocab.json: 'x' has id 99999"), std::string::npos) << e;
  // The command maps them to one line and exit code 2.
  const test::CommandResult r = test::run_mtx("import --from hf '" + (tmp / "unscaled").string() + "' --out '" +
                                              (tmp / "never.pt").string() + "'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_FALSE(fs::exists(tmp / "never.pt"));
}

TEST(ImportHf, UntiedEmbeddingsFromPytorchModelBinMatchTransformers) {
  const std::string py = oracle_python();
  MTX_REQUIRE_ORACLE(py);
  test::TempDir tmp;
  ASSERT_NO_FATAL_FAILURE(make_oracle(py, tmp.path(), /*untied=*/true));
  ASSERT_TRUE(fs::exists(tmp / "hf" / "pytorch_model.bin"));
  ASSERT_NO_FATAL_FAILURE(expect_same_as_transformers(tmp.path(), py));
  bundle::Bundle b = bundle::load_bundle(tmp / "model.pt");
  EXPECT_FALSE(b.config.model.share_embeddings);
  EXPECT_FALSE(b.config.model.tie_output);
}
