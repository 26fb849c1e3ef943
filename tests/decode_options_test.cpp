// The one table of decoding options (config::decode_options()): every entry reaches a config's decode section,
// the flags of mtx translate, eval and serve, a server request (or is refused there when it is the server's
// alone), and the docs' tables.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "mtx/bundle/bundle.h"
#include "mtx/config/config.h"
#include "mtx/data/prepare.h"
#include "mtx/serve/api.h"
#include "mtx/serve/metrics.h"
#include "mtx/util/errors.h"
#include "test_utils.h"

namespace mtx {
namespace {

using nlohmann::json;

// A value of the option other than its default, valid together with `companions` (other options it needs).
struct Probe {
  config::DecodeConfig values;  // the defaults with the option (and its companions) set
  json field;                   // the option's value as JSON
  std::string flag_value;       // ... and as a flag's argument ("" for a switch: the flag's other name decides)
  std::vector<std::string> companion_flags;
  json companion_fields = json::object();
};

std::string first_flag(const config::DecodeOption& o) {
  const std::string f = o.flags;
  return f.substr(0, f.find_first_of("{,"));
}

Probe probe(const config::DecodeOption& o) {
  Probe p;
  config::DecodeConfig& d = p.values;
  if (o.boolean) {
    d.*o.boolean = !(d.*o.boolean);
    p.field = d.*o.boolean;
  } else if (o.phrases) {
    d.*o.phrases = {"dog", "red ball"};
    p.field = d.*o.phrases;
  } else if (o.number) {
    const double v = std::isinf(o.max) ? d.*o.number + 0.5 : (d.*o.number == o.max ? (o.min + o.max) / 2 : o.max);
    d.*o.number = v;
    p.field = v;
  } else if (o.integer64) {
    d.*o.integer64 += 7;
    p.field = d.*o.integer64;
  } else {
    d.*o.integer += 1;
    p.field = d.*o.integer;
  }
  // A phrases option's flag takes a file of one phrase a line (kPhrasesFile, written by the test).
  if (!o.boolean) p.flag_value = o.phrases ? "@phrases@" : p.field.dump();
  // Sampling draws with beam 1; more hypotheses need a beam that holds them.
  const std::string key = o.key;
  if (key.rfind("sampling_", 0) == 0) {
    if (key != "sampling_topk") {
      d.sampling_topk = 0;
      p.companion_flags.push_back("--sampling-topk 0");
      p.companion_fields["sampling_topk"] = 0;
    }
    d.beam = 1;
    p.companion_flags.push_back("--beam 1");
    p.companion_fields["beam"] = 1;
  }
  if (key == "nbest") {
    d.beam = std::max(d.beam, d.nbest);
    p.companion_flags.push_back("--beam " + std::to_string(d.beam));
    p.companion_fields["beam"] = d.beam;
  }
  config::validate(d);
  return p;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(DecodeOptions, EveryOptionReadsAndWritesInAConfig) {
  for (const auto& o : config::decode_options()) {
    const Probe p = probe(o);
    json doc = {{"decode", p.companion_fields}};
    doc["decode"][o.key] = p.field;
    const config::Config c = config::from_json(doc);
    EXPECT_TRUE(c.decode == p.values) << o.key;
    EXPECT_EQ(config::to_json(c)["decode"][o.key], p.field) << o.key;
  }
  // Out of range: one line naming the key and the flag.
  try {
    config::from_json(json{{"decode", {{"sampling_topp", 1.5}}}});
    FAIL() << "sampling_topp 1.5 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("decode.sampling_topp (--sampling-topp): 1.5 is out of range (0, 1]"),
              std::string::npos)
        << e.what();
  }
}

// The flags: in the help of each command that decodes, and applied (mtx translate logs the options it uses).
TEST(DecodeOptions, EveryOptionIsAFlagOfTranslateEvalAndServe) {
  for (const char* command : {"translate", "eval", "serve"}) {
    const test::CommandResult help = test::run_mtx(std::string(command) + " --help");
    ASSERT_EQ(help.code, 0) << help.output;
    for (const auto& o : config::decode_options()) {
      std::string names = o.flags;
      for (size_t at = 0; (at = names.find('{')) != std::string::npos;) names.erase(at, names.find('}', at) - at + 1);
      std::stringstream list(names);
      for (std::string flag; std::getline(list, flag, ',');) {
        EXPECT_NE(help.output.find(flag), std::string::npos) << command << " --help lacks " << flag;
      }
    }
  }
  test::TempDir tmp;
  config::Config c = test::toy_setup(tmp);
  tokenizer::Tokenizer tok = data::prepare_data(c).tokenizer;
  model::Transformer model = bundle::build_model(c, tok);
  const auto ckpt = tmp / "m.pt";
  bundle::save_bundle(ckpt, c, tok, model);
  test::write_text(tmp / "in.de", "ein Hund\n");
  test::write_text(tmp / "phrases.txt", "# one a line\ndog\n\nred ball\n");
  for (const auto& o : config::decode_options()) {
    const Probe p = probe(o);
    std::string flags =
        o.boolean ? "" : first_flag(o) + " " + (o.phrases ? (tmp / "phrases.txt").string() : p.flag_value);
    if (o.boolean) {  // the name that sets the probe's value
      std::string names = o.flags;
      const std::string want = p.field.get<bool>() ? "{true}" : "{false}";
      const size_t end = names.find(want);
      ASSERT_NE(end, std::string::npos) << o.flags;
      const size_t begin = names.rfind(',', end);
      flags =
          names.substr(begin == std::string::npos ? 0 : begin + 1, end - (begin == std::string::npos ? 0 : begin + 1));
    }
    for (const auto& f : p.companion_flags) flags += " " + f;
    const test::CommandResult r =
        test::run_mtx("translate --ckpt " + ckpt.string() + " " + flags + " < " + (tmp / "in.de").string());
    ASSERT_EQ(r.code, 0) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find(std::string("\"") + o.key + "\": " + o.text(p.values)), std::string::npos)
        << flags << " did not reach the options:\n"
        << r.output;
  }
  // Without its flag, an option is the checkpoint's (a switch's two names leave it alone when neither is given).
  for (const auto& o : config::decode_options()) {
    if (!o.boolean) continue;
    config::Config with = c;
    with.decode = probe(o).values;
    const auto own = tmp / (std::string(o.key) + ".pt");
    bundle::save_bundle(own, with, tok, model);
    const test::CommandResult r = test::run_mtx("translate --ckpt " + own.string() + " < " + (tmp / "in.de").string());
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find(std::string("\"") + o.key + "\": " + o.text(with.decode)), std::string::npos)
        << "the checkpoint's " << o.key << " did not apply:\n"
        << r.output;
  }
  // Out of range on the command line: one line naming the option, exit code 2.
  const test::CommandResult bad =
      test::run_mtx("translate --ckpt " + ckpt.string() + " --sampling-topp 0 < " + (tmp / "in.de").string());
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("decode.sampling_topp (--sampling-topp): 0"), std::string::npos) << bad.output;
}

// A request sets the options marked `request` (they reach its batch key); the others are the server's and a
// request naming one is refused.
TEST(DecodeOptions, EveryRequestOptionIsAServerField) {
  test::TempDir tmp;
  config::Config c = test::toy_setup(tmp);
  tokenizer::Tokenizer tok = data::prepare_data(c).tokenizer;
  std::vector<serve::ServedModel> models;
  bundle::Bundle b;
  b.config = c;
  b.tokenizer = tok;
  b.model = bundle::build_model(c, tok);
  models.push_back({"toy", std::move(b), "none"});
  serve::Metrics metrics;
  const serve::Api api(models, serve::ApiOptions{}, metrics, serve::ApiState{});
  for (const auto& o : config::decode_options()) {
    const Probe p = probe(o);
    json body = p.companion_fields;
    body["text"] = "ein Hund";
    body[o.key] = p.field;
    serve::HttpRequest request{"POST", "/v1/translate", "localhost", "application/json", "", "", body.dump()};
    const serve::Routed routed = api.route(request);
    if (!o.request) {
      EXPECT_EQ(routed.answer.status, 400) << o.key;
      EXPECT_NE(routed.answer.body.find(std::string("unknown field \\\"") + o.key), std::string::npos)
          << routed.answer.body;
      continue;
    }
    ASSERT_TRUE(routed.job) << o.key << ": " << routed.answer.body;
    config::DecodeConfig expected = c.decode;
    expected.nbest = 1;  // a request's default
    for (const auto& [k, v] : body.items()) {
      for (const auto& q : config::decode_options()) {
        if (k != q.key) continue;
        if (q.boolean) expected.*q.boolean = v.get<bool>();
        if (q.number) expected.*q.number = v.get<double>();
        if (q.integer) expected.*q.integer = v.get<int>();
        if (q.integer64) expected.*q.integer64 = v.get<int64_t>();
        if (q.phrases) expected.*q.phrases = v.get<std::vector<std::string>>();
      }
    }
    EXPECT_TRUE(routed.job->key.decode == expected) << o.key;
  }
}

// The docs: docs/translating.md's table has a row per option (flag, config key, default), and
// docs/serving.md names each request field.
TEST(DecodeOptions, EveryOptionIsInTheDocs) {
  const std::string translating = read_text(std::filesystem::path(MTX_SOURCE_DIR) / "docs" / "translating.md");
  const std::string serving = read_text(std::filesystem::path(MTX_SOURCE_DIR) / "docs" / "serving.md");
  const config::DecodeConfig defaults;
  for (const auto& o : config::decode_options()) {
    const std::string row = "| `" + first_flag(o) + "` | `decode." + o.key + "` | " + o.text(defaults) + " |";
    EXPECT_NE(translating.find(row), std::string::npos) << "docs/translating.md lacks the row " << row;
    if (o.request) {
      EXPECT_NE(serving.find(std::string("`\"") + o.key + "\"`"), std::string::npos)
          << "docs/serving.md does not name the request field \"" << o.key << "\"";
    }
  }
}

}  // namespace
}  // namespace mtx
