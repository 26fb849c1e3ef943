#include "mtx/config/config.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mtx/util/errors.h"
#include "test_utils.h"

using mtx::ConfigError;
using nlohmann::json;
namespace cfg = mtx::config;
namespace fs = std::filesystem;

namespace {

template <class F>
std::string config_error(F fn) {
  return mtx::test::boundary_error<ConfigError>(fn);
}

}  // namespace

TEST(Config, DefaultsAreValid) {
  EXPECT_NO_THROW(cfg::validate(cfg::Config{}));
  const cfg::Config c = cfg::from_json(json::object());
  EXPECT_EQ(c.model.d_model, 512);
  EXPECT_EQ(c.data.src_lang, "de");
  EXPECT_EQ(c.data.tgt_lang, "en");
}

TEST(Config, ShippedConfigsLoadWithTheirModelSizes) {
  const fs::path dir = fs::path(MTX_SOURCE_DIR) / "configs";
  const cfg::Config base = cfg::load(dir / "base.json");
  EXPECT_EQ(base.model.d_model, 512);
  EXPECT_EQ(base.model.encoder_layers, 6);
  EXPECT_EQ(base.model.decoder_layers, 6);
  EXPECT_EQ(base.model.heads, 8);
  EXPECT_EQ(base.model.ffn_dim, 2048);
  EXPECT_DOUBLE_EQ(base.model.dropout, 0.1);
  EXPECT_EQ(base.train.schedule, cfg::Schedule::noam);
  EXPECT_DOUBLE_EQ(base.train.lr_factor, 1.0);
  EXPECT_EQ(base.train.warmup_steps, 2000);
  EXPECT_DOUBLE_EQ(base.train.adam_beta1, 0.9);
  EXPECT_DOUBLE_EQ(base.train.adam_beta2, 0.98);
  EXPECT_DOUBLE_EQ(base.train.adam_eps, 1e-9);
  EXPECT_DOUBLE_EQ(base.train.clip_norm, 1.0);

  const cfg::Config small = cfg::load(dir / "small.json");
  EXPECT_EQ(small.model.d_model, 256);
  EXPECT_EQ(small.model.encoder_layers, 3);
  EXPECT_EQ(small.model.decoder_layers, 3);
  EXPECT_EQ(small.model.heads, 8);
  EXPECT_EQ(small.model.ffn_dim, 512);

  const cfg::Config tiny = cfg::load(dir / "tiny.json");
  EXPECT_LT(tiny.model.d_model, small.model.d_model);

  // The budget recipes end their cosine decay at their deadline.
  const cfg::Config quick = cfg::load(dir / "quick.json");
  EXPECT_EQ(quick.train.schedule, cfg::Schedule::cosine);
  EXPECT_DOUBLE_EQ(quick.train.max_minutes, 5);
  EXPECT_EQ(quick.train.max_epochs, 0);
  EXPECT_FALSE(quick.model.tie_output);

  // Every shipped config loads (and so passes validation).
  int shipped = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    ++shipped;
    EXPECT_NO_THROW(cfg::load(e.path())) << e.path();
  }
  EXPECT_GE(shipped, 6);
}

TEST(Config, UnknownKeySuggestsTheClosestOne) {
  const std::string msg = config_error([] { cfg::from_json(json{{"model", {{"d_modle", 256}}}}); });
  EXPECT_NE(msg.find("unknown key 'model.d_modle'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'model.d_model'"), std::string::npos) << msg;
}

TEST(Config, UnknownSectionSuggestsTheClosestOne) {
  const std::string msg = config_error([] { cfg::from_json(json{{"trian", {{"seed", 1}}}}); });
  EXPECT_NE(msg.find("unknown section 'trian'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'train'"), std::string::npos) << msg;
}

TEST(Config, WrongTypesNameTheKey) {
  EXPECT_NE(config_error([] {
              cfg::from_json(json{{"model", {{"d_model", "big"}}}});
            }).find("model.d_model: expected an integer, got string"),
            std::string::npos);
  EXPECT_NE(config_error([] {
              cfg::from_json(json{{"model", {{"heads", 2.5}}}});
            }).find("model.heads: expected an integer"),
            std::string::npos);
  EXPECT_NE(config_error([] {
              cfg::from_json(json{{"tokenizer", {{"joint", 1}}}});
            }).find("tokenizer.joint: expected true or false"),
            std::string::npos);
  EXPECT_NE(config_error([] {
              cfg::from_json(json{{"data", {{"dir", 3}}}});
            }).find("data.dir: expected a string"),
            std::string::npos);
  EXPECT_NE(config_error([] {
              cfg::from_json(json{{"model", 3}});
            }).find("model: expected an object"),
            std::string::npos);
  const std::string e = config_error([] { cfg::from_json(json{{"tokenizer", {{"type", "bpee"}}}}); });
  EXPECT_NE(e.find("tokenizer.type: 'bpee' is not one of unigram|bpe|basic_english (did you mean 'bpe'?)"),
            std::string::npos)
      << e;
}

TEST(Config, OutOfRangeValuesNameTheKey) {
  EXPECT_NE(config_error([] {
              cfg::from_json(json{{"model", {{"dropout", 1.5}}}});
            }).find("model.dropout"),
            std::string::npos);
  EXPECT_NE(config_error([] {
              cfg::from_json(json{{"train", {{"max_tokens", 0}}}});
            }).find("train.max_tokens: 0 is out of range"),
            std::string::npos);
  EXPECT_NE(config_error([] {
              cfg::from_json(json{{"model", {{"d_model", 100}, {"heads", 8}}}});
            }).find("model.heads: 8 does not divide model.d_model 100"),
            std::string::npos);
  EXPECT_NE(config_error([] {
              cfg::from_json(json{{"decode", {{"beam", 2}, {"nbest", 3}}}});
            }).find("decode.nbest"),
            std::string::npos);
  EXPECT_NE(config_error([] {
              cfg::from_json(json{{"data", {{"src_lang", "en"}}}});
            }).find("both 'en'"),
            std::string::npos);
  // A budget-aware decay needs a budget to end at.
  EXPECT_NE(config_error([] {
              cfg::from_json(json{{"train", {{"schedule", "cosine"}, {"max_minutes", 0}}}});
            })
                .find("train.schedule: cosine decays to train.min_lr at the end of the budget; set train.max_steps or "
                      "train.max_minutes"),
            std::string::npos);
  EXPECT_NO_THROW(cfg::from_json(json{{"train", {{"schedule", "linear"}, {"max_steps", 100}}}}));
  EXPECT_NE(config_error([] {
              cfg::from_json(json{{"train", {{"cooldown", 0.2}}}});
            })
                .find("train.cooldown: the cool-down takes the last share of the budget; set train.max_steps or "
                      "train.max_minutes"),
            std::string::npos);
  EXPECT_NE(config_error([] {
              cfg::from_json(json{{"train", {{"cooldown", 1.0}, {"max_minutes", 5}}}});
            }).find("train.cooldown: a share of the budget in [0, 1)"),
            std::string::npos);
  EXPECT_NE(config_error([] {
              cfg::from_json(json{{"train", {{"schedule", "cosine"}, {"max_minutes", 5}, {"min_lr", 1}}}});
            }).find("train.min_lr: must be in [0, train.lr]"),
            std::string::npos);
  // Found by fuzz_config: a float far outside an integer setting's range was converted before the range check
  // (undefined behaviour, UBSan's float-cast-overflow); 2^63 itself slipped past a check against double(max).
  for (const double big : {1.28667e30, 9223372036854775808.0, -1e19}) {
    EXPECT_NE(config_error([&] {
                cfg::from_json(json{{"train", {{"max_steps", big}}}});
              }).find("train.max_steps: " + json(big).dump() + " does not fit in the integer range"),
              std::string::npos)
        << big;
  }
  EXPECT_NE(config_error([] {
              cfg::from_json(json{{"model", {{"d_model", 4294967296.0}}}});
            }).find("does not fit"),
            std::string::npos);
  EXPECT_NE(config_error([] {
              cfg::from_json(json{{"train", {{"max_steps", 18446744073709551615ull}}}});
            }).find("does not fit"),
            std::string::npos);
}

TEST(Config, MissingFilesAreNamed) {
  EXPECT_NE(config_error([] { cfg::load("/nonexistent/conf.json"); }).find("'/nonexistent/conf.json' not found"),
            std::string::npos);
  EXPECT_NE(config_error([] {
              cfg::from_json(json{{"tokenizer", {{"model_dir", "/nonexistent/tok"}}}});
            }).find("tokenizer.model_dir: directory '/nonexistent/tok' not found"),
            std::string::npos);
}

TEST(Config, InvalidJsonReportsLineAndColumn) {
  mtx::test::TempDir tmp;
  mtx::test::write_text(tmp / "bad.json", "{\n  \"model\": {\n    \"d_model\": 256,\n  }\n}\n");
  const std::string msg = config_error([&] { cfg::load(tmp / "bad.json"); });
  EXPECT_NE(msg.find("bad.json:4:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("invalid JSON"), std::string::npos) << msg;
}

TEST(Config, CommentsAreAllowed) {
  mtx::test::TempDir tmp;
  mtx::test::write_text(tmp / "c.json", "{\n  // width\n  \"model\": {\"d_model\": 256, \"heads\": 4}\n}\n");
  EXPECT_EQ(cfg::load(tmp / "c.json").model.d_model, 256);
}

TEST(Config, OverridesApplyWithTypes) {
  mtx::test::TempDir tmp;
  mtx::test::write_text(tmp / "c.json", R"({"model": {"d_model": 256, "heads": 4}})");
  const cfg::Config c =
      cfg::load(tmp / "c.json", {"model.d_model=128", "train.seed=7", "data.dir=/tmp/x y", "tokenizer.joint=false",
                                 "tokenizer.type=bpe", "model.dropout=0.3", "train.max_minutes=1.5"});
  EXPECT_EQ(c.model.d_model, 128);
  EXPECT_EQ(c.model.heads, 4);
  EXPECT_EQ(c.train.seed, 7);
  EXPECT_EQ(c.data.dir, "/tmp/x y");
  EXPECT_FALSE(c.tokenizer.joint);
  EXPECT_EQ(c.tokenizer.type, cfg::SpmType::bpe);
  EXPECT_DOUBLE_EQ(c.model.dropout, 0.3);
  EXPECT_DOUBLE_EQ(c.train.max_minutes, 1.5);
}

TEST(Config, BadOverridesAreRejected) {
  mtx::test::TempDir tmp;
  mtx::test::write_text(tmp / "c.json", "{}");
  EXPECT_NE(config_error([&] { cfg::load(tmp / "c.json", {"model.d_model"}); }).find("expected section.key=value"),
            std::string::npos);
  EXPECT_NE(config_error([&] { cfg::load(tmp / "c.json", {"d_model=3"}); }).find("section.key"), std::string::npos);
  EXPECT_NE(config_error([&] { cfg::load(tmp / "c.json", {"model.d_modl=3"}); }).find("did you mean 'model.d_model'"),
            std::string::npos);
  EXPECT_NE(config_error([&] {
              cfg::load(tmp / "c.json", {"model.d_model=abc"});
            }).find("model.d_model: expected an integer, got string"),
            std::string::npos);
  // Found by fuzz_config (tests/fixtures/fuzz/fuzz_config/): a bare word with invalid UTF-8 made the error
  // message itself throw nlohmann's type_error; a string setting would have failed writing config.json.
  EXPECT_NE(config_error([&] { cfg::load(tmp / "c.json", {"train.lr=0.=8\xd0"}); }).find("invalid UTF-8 at byte 13"),
            std::string::npos);
  EXPECT_NE(config_error([&] { cfg::load(tmp / "c.json", {"data.dir=caf\xc3"}); }).find("invalid UTF-8"),
            std::string::npos);
  // fuzz_config: a number too large for a double is nlohmann's out_of_range (not a parse_error): it escaped.
  mtx::test::write_text(tmp / "big.json", "{\"train\": {\"max_steps\": 2222222222222222e22222}}");
  EXPECT_NE(config_error([&] { cfg::load(tmp / "big.json", {}); }).find("big.json: invalid JSON: number overflow"),
            std::string::npos);
  EXPECT_NE(config_error([&] { cfg::load(tmp / "c.json", {"train.lr=0.8888e99999"}); }).find("out of range"),
            std::string::npos);
  // fuzz_config: a file that is JSON but not an object, with a --set (nlohmann's type_error before).
  for (const char* text : {"0", "[]", "null", "\"text\""}) {
    mtx::test::write_text(tmp / "n.json", text);
    EXPECT_NE(config_error([&] { cfg::load(tmp / "n.json", {"model.d_model=64"}); }).find("expected a JSON object"),
              std::string::npos)
        << text;
  }
}

TEST(Config, ResolvedConfigRoundTrips) {
  cfg::Config c;
  c.model.d_model = 384;
  c.model.heads = 6;
  c.tokenizer.type = cfg::SpmType::bpe;
  c.train.schedule = cfg::Schedule::inverse_sqrt;
  const json j = cfg::to_json(c);
  EXPECT_EQ(j["tokenizer"]["type"], "bpe");
  EXPECT_EQ(j["train"]["device"], "auto");
  EXPECT_EQ(cfg::to_json(cfg::from_json(j)), j);

  mtx::test::TempDir tmp;
  cfg::write_resolved(c, tmp / "run" / "config.json");
  EXPECT_EQ(cfg::to_json(cfg::load(tmp / "run" / "config.json")), j);
}
