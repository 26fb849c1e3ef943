// mtx serve's API layer (serve/api.h) as a client sees it, over a server in this process: the endpoints and their
// answers, every bad request named, refusals and their statuses, LibreTranslate's API, scores, the page.
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/beast/http/verb.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "mtx/bundle/bundle.h"
#include "mtx/data/prepare.h"
#include "mtx/decode/scoring.h"
#include "mtx/serve/server.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/errors.h"
#include "mtx/util/hash.h"
#include "mtx/util/system.h"
#include "serve_test_utils.h"
#include "test_utils.h"

namespace http = boost::beast::http;
using json = nlohmann::json;
namespace fs = std::filesystem;
using namespace mtx;
using namespace std::chrono_literals;
using mtx::test::call;
using mtx::test::kSentences;
using mtx::test::long_sentences;
using mtx::test::metric;
using mtx::test::post;
using mtx::test::Raw;
using mtx::test::Reply;

TEST_F(ServeTest, AnswersTheApiAndNamesEveryBadRequest) {
  serve::ServerOptions o;
  o.api.max_request_bytes = 2000;
  start(o);
  EXPECT_EQ(call(port, http::verb::get, "/health").body, "{\"status\":\"ok\"}\n");
  const json models = json::parse(call(port, http::verb::get, "/v1/models").body);
  EXPECT_EQ(models["default"], "toy");
  EXPECT_EQ(models["models"][0]["direction"], "de-en");
  EXPECT_EQ(models["models"][0]["quantization"], "none");
  EXPECT_NE(call(port, http::verb::get, "/").body.find("<textarea"), std::string::npos);

  // String in: one object out; a list: one each, in order; nbest and scores on request.
  Reply r = post(port, {{"text", kSentences[0]}, {"scores", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  ASSERT_EQ(j["translations"].size(), 1u);
  EXPECT_TRUE(j["translations"][0]["text"].is_string());
  EXPECT_TRUE(j["translations"][0]["score"].is_number());
  EXPECT_EQ(j["model"], "toy");
  // Greedy skips the scores' normalisation only where nobody asked for them.
  r = post(port, {{"text", kSentences[0]}, {"scores", true}, {"beam", 1}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(json::parse(r.body)["translations"][0]["score"].is_number()) << r.body;
  // Alignments: one "src-tgt" pair per target word.
  r = post(port, {{"text", kSentences[4]}, {"alignment", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  j = json::parse(r.body)["translations"][0];
  const std::string text = j["text"], pairs = j["alignment"];
  std::istringstream text_words(text);
  const auto words = std::distance(std::istream_iterator<std::string>(text_words), {});
  EXPECT_EQ(std::count(pairs.begin(), pairs.end(), '-'), words) << text << " ||| " << pairs;
  r = post(port, {{"text", kSentences}, {"beam", 3}, {"nbest", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  j = json::parse(r.body);
  ASSERT_EQ(j["translations"].size(), kSentences.size());
  for (const auto& t : j["translations"]) {
    ASSERT_EQ(t["nbest"].size(), 2u);
    EXPECT_EQ(t["nbest"][0]["text"], t["text"]);
    EXPECT_FALSE(t.contains("score"));
  }

  // A target prefix per sentence: the translation starts with it, the same alone as in a list.
  const Reply prefixed = post(port, {{"text", {kSentences[0], kSentences[2]}}, {"target_prefix", {"a dog", ""}}});
  ASSERT_EQ(prefixed.status, 200) << prefixed.body;
  j = json::parse(prefixed.body);
  const std::string with_prefix = j["translations"][0]["text"];
  EXPECT_EQ(with_prefix.rfind("a dog", 0), 0u) << with_prefix;
  EXPECT_EQ(j["translations"][1]["text"],
            json::parse(post(port, {{"text", kSentences[2]}}).body)["translations"][0]["text"]);
  const Reply alone = post(port, {{"text", kSentences[0]}, {"target_prefix", "a dog"}});
  EXPECT_EQ(json::parse(alone.body)["translations"][0]["text"], with_prefix);

  // Constraints: a list of phrases for a string, a list of lists for a list; the translations hold them, and a
  // line's translation is the same alone.
  const Reply constrained =
      post(port, {{"text", {kSentences[0], kSentences[2]}}, {"constraints", {{"green"}, json::array()}}, {"beam", 3}});
  ASSERT_EQ(constrained.status, 200) << constrained.body;
  j = json::parse(constrained.body);
  const std::string with_term = j["translations"][0]["text"];
  EXPECT_NE(with_term.find("green"), std::string::npos) << with_term;
  EXPECT_EQ(json::parse(post(port, {{"text", kSentences[0]}, {"constraints", {"green"}}, {"beam", 3}})
                            .body)["translations"][0]["text"],
            with_term);
  EXPECT_EQ(j["translations"][1]["text"],
            json::parse(post(port, {{"text", kSentences[2]}, {"beam", 3}}).body)["translations"][0]["text"]);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{\"text\": \"ein Hund\", \"constraints\": \"dog\"}", "\"constraints\" must be a list of target phrases"},
      {"{\"text\": [\"ein Hund\"], \"constraints\": [\"dog\"]}", "\"constraints\" must be a list of 1 lists"},
      {"{\"text\": \"ein Hund\", \"constraints\": [\"dog\", 3]}", "\"constraints\"[1] is not a string"},
      {"{\"text\": \"ein Hund\", \"constraints\": [\"dog\"], \"beam\": 1, \"sampling_topk\": 0}", "not sampling"},
      {"{\"text\": \"ein Hund\", \"target_prefix\": [\"a\"]}", "\"target_prefix\" must be like \"text\""},
      {"{\"text\": [\"ein Hund\"], \"target_prefix\": [\"a\", \"b\"]}", "a list of 1 strings"},
      {"{\"text\": \"ein Hund\", \"target_prefix\": \"a\\nb\"}", "\"target_prefix\" holds a line break"},
      {"{\"text\": ", "invalid JSON"},
      {"[1, 2]", "JSON object"},
      {"{\"txt\": \"x\"}", "unknown field \"txt\""},
      {"{\"beam\": 2}", "\"text\" is missing"},
      {"{\"text\": 5}", "a string or a non-empty list"},
      {"{\"text\": []}", "a string or a non-empty list"},
      {"{\"text\": [\"a\", 3]}", "a string or a list of strings"},
      {"{\"text\": \"\", \"format\": \"sentence\"}", "\"text\" is empty"},
      {"{\"text\": [\"ein Hund\", \"   \"], \"format\": \"sentence\"}", "\"text\"[1] is empty"},
      {"{\"text\": \"\xff\xfe\"}", "invalid JSON"},  // JSON must be UTF-8 already
      {"{\"text\": \"a\\nb\", \"format\": \"sentence\"}", "line break"},
      {"{\"text\": \"a\", \"format\": \"pdf\"}", "\"format\" must be sentence, text or html"},
      {"{\"text\": \"a\", \"format\": \"text\", \"alignment\": true}", "apply to single sentences"},
      {"{\"text\": \"ein Hund\", \"model\": \"nope\"}", "unknown model \"nope\" (serving: toy)"},
      {"{\"text\": \"ein Hund\", \"beam\": 0}", "\"beam\" must be in [1, 32]"},
      {"{\"text\": \"ein Hund\", \"beam\": 2, \"nbest\": 3}", "\"nbest\" must be in [1, 2]"},
      {"{\"text\": \"ein Hund\", \"alpha\": -1}", "\"alpha\" must be a number in [0, 100]"},
      {"{\"text\": \"ein Hund\", \"scores\": 1}", "\"scores\" must be true or false"},
      {"{\"text\": \"ein Hund\", \"alignment\": \"yes\"}", "\"alignment\" must be true or false"},
      // Keys are off here, yet a key field of the wrong type is still a bad request (schemathesis found it).
      {"{\"text\": \"ein Hund\", \"api_key\": false}", "\"api_key\" must be a string"},
  };
  for (const auto& [body, reason] : bad) {
    const Reply e = call(port, http::verb::post, "/v1/translate", body);
    EXPECT_EQ(e.status, 400) << body;
    const std::string error = json::parse(e.body).value("error", "");
    EXPECT_NE(error.find(reason), std::string::npos) << body << " -> " << e.body;
    EXPECT_EQ(std::count(e.body.begin(), e.body.end(), '\n'), 1) << "one line: " << e.body;
  }
  // A sentence longer than the model takes: refused as one sentence, translated in pieces as text.
  std::string many;
  for (int i = 0; i < 300; ++i) many += "Hund ";
  r = post(port, {{"text", many}, {"format", "sentence"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("pieces; the model takes at most"), std::string::npos) << r.body;
  r = post(port, {{"text", many}});
  EXPECT_EQ(r.status, 200) << r.body;
  // Text: a paragraph's sentences each translated, blank texts kept as they are.
  r = post(port, {{"text", {kSentences[0] + ". Zwei Männer.\n\nKinder!", "", " \n"}}});
  ASSERT_EQ(r.status, 200) << r.body;
  j = json::parse(r.body)["translations"];
  EXPECT_EQ(
      j[0]["text"],
      json::parse(post(port, {{"text", kSentences[0] + "."}}).body)["translations"][0]["text"].get<std::string>() +
          " " + json::parse(post(port, {{"text", "Zwei Männer."}}).body)["translations"][0]["text"].get<std::string>() +
          "\n\n" + json::parse(post(port, {{"text", "Kinder!"}}).body)["translations"][0]["text"].get<std::string>());
  EXPECT_EQ(j[1]["text"], "");
  EXPECT_EQ(j[2]["text"], " \n");
  r = post(port, {{"text", std::string(3000, 'a')}});
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_EQ(call(port, http::verb::get, "/nowhere").status, 404);
  EXPECT_EQ(call(port, http::verb::get, "/v1/translate").status, 405);
  // Still serving after all that.
  EXPECT_EQ(post(port, {{"text", kSentences[1]}}).status, 200);
  const std::string m = call(port, http::verb::get, "/metrics").body;
  EXPECT_EQ(metric(m, "mtx_requests_total{status=\"400\"}"), double(bad.size() + 1)) << m;
  EXPECT_EQ(metric(m, "mtx_requests_total{status=\"413\"}"), 1) << m;
  EXPECT_GE(metric(m, "mtx_sentences_total"), 1 + double(kSentences.size()) + 1) << m;
  if (heap_figures().known) {  // the allocator's figures, under tcmalloc
    EXPECT_GT(metric(m, "mtx_heap_allocated_bytes"), 0) << m;
    EXPECT_GE(metric(m, "mtx_heap_mapped_bytes"), metric(m, "mtx_heap_allocated_bytes")) << m;
    EXPECT_GE(metric(m, "mtx_heap_free_bytes"), 0) << m;
  }
}

// 128 clients at once, each sentence sent alone beforehand: every translation byte-identical, and requests did
// share batches (from /metrics). With an SSRU student's decoder too: a request that joins a running search starts
// from its own zero state.
TEST_F(ServeTest, ATranslationIsTheSameAloneOrAmong127OtherClients) {
  for (const bool student : {false, true}) {
    SCOPED_TRACE(student ? "SSRU decoder" : "self-attention decoder");
    ssru = student;
    check_clients_at_once();
    TearDown();
    server.reset();
  }
}

void ServeTest::check_clients_at_once() {
  serve::ServerOptions o;
  o.batching.max_wait_ms = 20;
  o.batches = 2;  // each batch one search, which takes in requests while it runs (continuous batching)
  o.io_threads = 4;
  start(o);
  std::vector<std::string> alone;
  for (const auto& s : kSentences) {
    const Reply r = post(port, {{"text", s}});
    ASSERT_EQ(r.status, 200) << r.body;
    alone.push_back(json::parse(r.body)["translations"][0]["text"]);
  }
  std::vector<std::thread> clients;
  std::atomic<int> wrong{0}, failed{0};
  for (int c = 0; c < 128; ++c) {
    clients.emplace_back([&, c] {
      try {
        for (int k = 0; k < 2; ++k) {
          const size_t i = size_t(c + k) % kSentences.size();
          const Reply r = post(port, {{"text", kSentences[i]}});
          if (r.status != 200) {
            ++failed;
          } else if (json::parse(r.body)["translations"][0]["text"] != alone[i]) {
            ++wrong;
          }
        }
      } catch (const std::exception&) {
        ++failed;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  const std::string m = call(port, http::verb::get, "/metrics").body;
  EXPECT_GE(metric(m, "mtx_batch_requests_max"), 2) << m;
  EXPECT_EQ(metric(m, "mtx_requests_total{status=\"200\"}"), double(kSentences.size() + 256)) << m;
  EXPECT_EQ(metric(m, "mtx_queue_sentences"), 0);
}

// The page in headless Chromium (Debian's chromium): the box filled and translated (/?text=...), the translation in
// the DOM once the page's script has it, the same text as the API's. The page comes with a strict
// Content-Security-Policy that allows its own script and style by their SHA-256 only: the script ran, so the hash
// is the script's. (tests/page/drive_page.py drives every control of the page on a trained model.)
TEST_F(ServeTest, ThePageTranslatesInHeadlessChromium) {
  if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
    const char* need = std::getenv("MTX_REQUIRE_CHROMIUM");
    if (need && *need == '1') FAIL() << "MTX_REQUIRE_CHROMIUM=1 but there is no chromium";
    GTEST_SKIP() << "no chromium (apt-get install chromium)";
  }
  start({});
  const Reply page = call(port, http::verb::get, "/");
  ASSERT_EQ(page.status, 200);
  const std::string policy =
      page.headers.count("content-security-policy") ? page.headers.at("content-security-policy") : "";
  EXPECT_TRUE(std::regex_search(policy, std::regex("script-src 'sha256-[A-Za-z0-9+/]{43}='; style-src 'sha256-")))
      << policy;
  EXPECT_NE(policy.find("default-src 'none'"), std::string::npos) << policy;
  EXPECT_NE(policy.find("connect-src 'self'"), std::string::npos) << policy;
  EXPECT_EQ(page.body.find("http://"), std::string::npos) << "a third-party asset";
  EXPECT_EQ(page.body.find("https://"), std::string::npos) << "a third-party asset";
  const std::string expected =
      json::parse(post(port, {{"text", "eine Frau liest ein Buch"}}).body)["translations"][0]["text"];
  const std::string dom = (tmp / "dom.html").string();
  const std::string cmd = "chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir='" +
                          (tmp / "chromium").string() +
                          "' --virtual-time-budget=20000 --dump-dom 'http://127.0.0.1:" + std::to_string(port) +
                          "/?text=eine%20Frau%20liest%20ein%20Buch' > '" + dom + "' 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string html = read_file(dom);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(html, m, std::regex(R"(<div id="out"[^>]* data-done="yes"[^>]*>([^<]*)</div>)")))
      << html;
  std::string shown = m[1].str();  // as the DOM serialises text: & < > escaped
  for (const auto& [entity, c] : std::vector<std::pair<std::string, std::string>>{
           {"&lt;", "<"}, {"&gt;", ">"}, {"&nbsp;", "\u00a0"}, {"&amp;", "&"}}) {
    for (size_t at; (at = shown.find(entity)) != std::string::npos;) shown.replace(at, entity.size(), c);
  }
  EXPECT_EQ(shown, expected) << html;
}

// --page FILE: an operator's own page, served with a policy that allows its own inline script and style by their
// hashes; a file that cannot be read stops the server from starting, naming it.
TEST_F(ServeTest, AnOperatorsPageIsServedUnderItsOwnHashes) {
  serve::ServerOptions broken;
  broken.api.page_file = (tmp / "missing.html").string();
  try {
    start(broken);
    ADD_FAILURE() << "a page that is not there";
  } catch (const mtx::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.html: cannot read the page (--page)"), std::string::npos) << e.what();
  }
  test::write_text(tmp / "broken.html", "<script>never closed");
  broken.api.page_file = (tmp / "broken.html").string();
  try {
    start(broken);
    ADD_FAILURE() << "a page whose script is not closed";
  } catch (const mtx::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("<script> without </script>"), std::string::npos) << e.what();
  }
  const std::string script = "document.title = 'ours';", style = "body { color: teal; }";
  test::write_text(tmp / "page.html", "<!doctype html><style>" + style + "</style><p>Ours</p><script>" + script +
                                          "</script><script>/* two */</script>");
  serve::ServerOptions o;
  o.api.page_file = (tmp / "page.html").string();
  start(o);
  const Reply page = call(port, http::verb::get, "/");
  ASSERT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("<p>Ours</p>"), std::string::npos) << page.body;
  const auto hash = [](const std::string& text) {
    const auto d = mtx::Sha256().update(text).digest();
    return "'sha256-" + mtx::base64({reinterpret_cast<const char*>(d.data()), d.size()}) + "'";
  };
  EXPECT_EQ(page.headers.at("content-security-policy"),
            "default-src 'none'; script-src " + hash(script) + " " + hash("/* two */") + "; style-src " + hash(style) +
                "; connect-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors "
                "'none'");
  EXPECT_EQ(page.headers.at("x-content-type-options"), "nosniff");
}

// Every way a request can be refused has its own status and a one-line {"error"}; HEAD has no body.
TEST_F(ServeTest, EveryRefusalHasItsStatus) {
  const fs::path keys = tmp / "keys.txt";
  test::write_text(keys, "# clients\nsecret-1\nsecret-2\n");
  serve::ServerOptions o;
  o.api.max_request_sentences = 60;
  o.api.max_request_tokens = 2000;
  o.api.max_request_bytes = 20000;
  o.api.keys = std::make_shared<serve::ApiKeys>(keys);
  o.api.metrics_token = "m-token";
  o.api.cors_origins = {"https://app.example"};
  o.header_timeout_ms = 400;
  start(o);
  const std::map<std::string, std::string> key = {{"Authorization", "Bearer secret-1"}};
  auto translate = [&](const json& body, std::map<std::string, std::string> headers = {}) {
    headers.insert({"Authorization", "Bearer secret-1"});
    return call(port, http::verb::post, "/v1/translate", body.dump(), headers);
  };
  auto expect_error = [](const Reply& r, int status, const std::string& reason) {
    EXPECT_EQ(r.status, status) << r.body;
    const json j = json::parse(r.body);
    EXPECT_NE(j.value("error", "").find(reason), std::string::npos) << r.body;
    EXPECT_EQ(std::count(r.body.begin(), r.body.end(), '\n'), 1) << r.body;
  };
  EXPECT_EQ(translate({{"text", kSentences[0]}}).status, 200);
  // 413: too many sentences, too many tokens (never to succeed: not 429), too many bytes.
  expect_error(translate({{"text", std::vector<std::string>(61, "a")}}), 413, "at most 60 (--max-request-sentences)");
  expect_error(translate({{"text", long_sentences(60)}}), 413, "at most 2000 (--max-request-tokens)");
  expect_error(translate({{"text", std::string(25000, 'a')}}), 413, "over 20000 bytes");
  // 404 for any method on an unknown path; 405 with Allow on a known one.
  expect_error(call(port, http::verb::post, "/nope", "{}", key), 404, "no such path");
  expect_error(call(port, http::verb::get, "/nope"), 404, "no such path");
  const Reply not_allowed = call(port, http::verb::get, "/v1/translate");
  expect_error(not_allowed, 405, "POST /v1/translate");
  EXPECT_EQ(not_allowed.headers.at("allow"), "POST, OPTIONS");
  // 415: what a page could send without a CORS preflight.
  expect_error(call(port, http::verb::post, "/v1/translate", R"({"text": "ein Hund"})",
                    {{"Content-Type", "text/plain"}, {"Authorization", "Bearer secret-1"}}),
               415, "takes application/json");
  // 401 without a key, 403 with a wrong one; LibreTranslate's api_key field works too.
  expect_error(call(port, http::verb::post, "/v1/translate", R"({"text": "ein Hund"})"), 401, "API key");
  expect_error(translate({{"text", "ein Hund"}}, {{"Authorization", "Bearer nope"}}), 403, "not valid");
  EXPECT_EQ(call(port, http::verb::post, "/v1/translate", R"({"text": "ein Hund", "api_key": "secret-2"})").status,
            200);
  // /metrics with its own token.
  expect_error(call(port, http::verb::get, "/metrics"), 401, "token");
  expect_error(call(port, http::verb::get, "/metrics", "", {{"Authorization", "Bearer secret-1"}}), 403, "token");
  EXPECT_EQ(call(port, http::verb::get, "/metrics", "", {{"Authorization", "Bearer m-token"}}).status, 200);
  // Origins: a page elsewhere is refused; the named origin gets CORS headers and its preflight.
  expect_error(translate({{"text", "ein Hund"}}, {{"Origin", "https://evil.example"}}), 403, "not allowed");
  Reply allowed = translate({{"text", "ein Hund"}}, {{"Origin", "https://app.example"}});
  EXPECT_EQ(allowed.status, 200);
  EXPECT_EQ(allowed.headers["access-control-allow-origin"], "https://app.example");
  Reply preflight =
      call(port, http::verb::options, "/v1/translate", "", {{"Origin", "https://app.example"}, {"Content-Type", ""}});
  EXPECT_EQ(preflight.status, 204);
  EXPECT_EQ(preflight.headers["access-control-allow-methods"], "POST");
  // /v1/models names no file without --show-paths.
  EXPECT_EQ(call(port, http::verb::get, "/v1/models").body.find("toy.pt"), std::string::npos);
  // 431: a 20 kB header.
  expect_error(call(port, http::verb::get, "/health", "", {{"X-Big", std::string(20000, 'x')}}), 431, "headers");
  // 408: a header that never ends (a slow client).
  {
    Raw slow(port);
    slow.send("GET /health HTTP/1.1\r\nHost: x\r\n");
    const std::string got = slow.read_all(3s);
    EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0u) << got;
  }
  // HEAD, then GET, on one connection: the HEAD answer has a length and no body, so the GET reads cleanly.
  {
    Raw both(port);
    both.send("HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    const std::string got = both.read_all(3s);
    const size_t second = got.find("HTTP/1.1 200", 1);
    ASSERT_NE(second, std::string::npos) << got;
    const std::string head = got.substr(0, second);
    EXPECT_NE(head.find("Content-Length: 16"), std::string::npos) << got;
    EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << "no body after HEAD's headers: " << got;
    EXPECT_EQ(got.substr(got.size() - 16), "{\"status\":\"ok\"}\n") << got;
  }
  // 504: a deadline shorter than the translation; its work stops.
  // (Alone, these 30 sentences at beam 32 take several times the 100 ms.)
  const Reply late = translate({{"text", long_sentences(30)}, {"beam", 32}, {"timeout_ms", 100}});
  expect_error(late, 504, "deadline");
  // SIGHUP reloads the keys: the new one works, a dropped one no longer does.
  test::write_text(keys, "secret-3\n");
  ::raise(SIGHUP);
  Reply reloaded;
  for (int i = 0; i < 100 && reloaded.status != 200; ++i) {
    std::this_thread::sleep_for(10ms);
    reloaded = translate({{"text", "ein Hund"}}, {{"Authorization", "Bearer secret-3"}});
  }
  EXPECT_EQ(reloaded.status, 200) << reloaded.body;
  EXPECT_EQ(translate({{"text", "ein Hund"}}).status, 403);  // secret-1
  const std::string m = call(port, http::verb::get, "/metrics", "", {{"Authorization", "Bearer m-token"}}).body;
  for (const int status : {413, 404, 405, 415, 401, 403, 431, 408, 504}) {
    EXPECT_GE(metric(m, "mtx_requests_total{status=\"" + std::to_string(status) + "\"}"), 1) << status << "\n" << m;
  }
}

// LibreTranslate's API: JSON and form posts, lists, alternatives, auto, HTML that keeps its markup, the errors.
TEST_F(ServeTest, SpeaksLibreTranslatesApi) {
  start({});
  auto mtx_text = [&](const std::string& s) {
    return json::parse(post(port, {{"text", s}}).body)["translations"][0]["text"].get<std::string>();
  };
  Reply r = call(port, http::verb::get, "/languages");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body), json::parse(R"([{"code": "de", "name": "German", "targets": ["en"]}])"));
  r = call(port, http::verb::post, "/translate", json{{"q", kSentences[0]}, {"source", "de"}, {"target", "en"}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["translatedText"], mtx_text(kSentences[0]));
  r = call(port, http::verb::post, "/translate", "q=ein+Hund+l%C3%A4uft&source=auto&target=en&alternatives=2",
           {{"Content-Type", "application/x-www-form-urlencoded"}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["translatedText"], mtx_text("ein Hund läuft"));
  EXPECT_EQ(j["detectedLanguage"]["language"], "de");
  EXPECT_TRUE(j["alternatives"].is_array());
  // deep-translator's LibreTranslator: every field in the query string, an empty body without a Content-Type; a
  // form's fields win over the query's.
  r = call(port, http::verb::post, "/translate?q=ein+Hund+l%C3%A4uft&source=de&target=en&format=text", "",
           {{"Content-Type", ""}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["translatedText"], mtx_text("ein Hund läuft"));
  r = call(port, http::verb::post, "/translate?q=Kinder&target=fr", "source=de&target=en",
           {{"Content-Type", "application/x-www-form-urlencoded"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["translatedText"], mtx_text("Kinder"));
  r = call(
      port, http::verb::post, "/translate",
      json{{"q", {kSentences[1], kSentences[2] + "\n" + kSentences[3]}}, {"source", "de"}, {"target", "en"}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  j = json::parse(r.body)["translatedText"];
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[1], mtx_text(kSentences[2]) + "\n" + mtx_text(kSentences[3]));
  // A paragraph: every sentence translated, the whitespace between them kept.
  r = call(
      port, http::verb::post, "/translate",
      json{{"q", "Ein Hund läuft. Eine Frau liest ein Buch.  Kinder!\n\nZwei Männer spielen Fußball im Park heute."},
           {"source", "de"},
           {"target", "en"}}
          .dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["translatedText"],
            mtx_text("Ein Hund läuft.") + " " + mtx_text("Eine Frau liest ein Buch.") + "  " + mtx_text("Kinder!") +
                "\n\n" + mtx_text("Zwei Männer spielen Fußball im Park heute."));
  // LibreTranslate's page posts FormData: multipart/form-data, answered as the same fields in JSON are.
  const std::string boundary = "----WebKitFormBoundaryx7Zq";
  std::string form;
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"q", "ein Hund läuft"}, {"source", "de"}, {"target", "en"}, {"format", "text"}, {"api_key", ""}}) {
    form += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" + value + "\r\n";
  }
  form += "--" + boundary + "--\r\n";
  r = call(port, http::verb::post, "/translate", form, {{"Content-Type", "multipart/form-data; boundary=" + boundary}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["translatedText"], mtx_text("ein Hund läuft"));
  r = call(port, http::verb::post, "/translate", "--" + boundary + "\r\nContent-Disposition: form-data\r\n\r\nx",
           {{"Content-Type", "multipart/form-data; boundary=" + boundary}});
  EXPECT_EQ(r.status, 400) << r.body;
  // /detect, /frontend/settings, /spec, /suggest.
  const auto expect_error = [](const Reply& e, int status, const std::string& reason) {
    EXPECT_EQ(e.status, status) << e.body;
    EXPECT_NE(e.body.find(reason), std::string::npos) << e.body;
  };
  r = call(port, http::verb::post, "/detect", "q=Ein+Hund+l%C3%A4uft+durch+das+hohe+Gras.",
           {{"Content-Type", "application/x-www-form-urlencoded"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)[0]["language"], "de") << r.body;
  EXPECT_GT(json::parse(r.body)[0]["confidence"].get<double>(), 50) << r.body;
  expect_error(call(port, http::verb::post, "/detect", "", {{"Content-Type", ""}}), 400, "missing q");
  EXPECT_EQ(call(port, http::verb::get, "/detect").status, 405);
  r = call(port, http::verb::get, "/frontend/settings");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["language"]["target"]["code"], "en") << r.body;
  EXPECT_EQ(json::parse(call(port, http::verb::get, "/spec").body)["openapi"],
            json::parse(call(port, http::verb::get, "/openapi.json").body)["openapi"]);
  expect_error(call(port, http::verb::post, "/suggest", "q=a&s=b&source=de&target=en",
                    {{"Content-Type", "application/x-www-form-urlencoded"}}),
               403, "Suggestions are disabled");
  // HTML: a block's sentences translated whole, its inline elements placed on the translation (each once, well
  // nested), the text outside them and scripts kept.
  const std::string page = "<p class=\"x\">ein Hund &amp; <b>zwei Männer</b></p>\n<script>var a = '<p>';</script>";
  r = call(port, http::verb::post, "/translate",
           json{{"q", page}, {"source", "de"}, {"target", "en"}, {"format", "html"}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string html = json::parse(r.body)["translatedText"];
  auto escaped = [](std::string t) {
    std::string out;
    for (const char c : t) out += c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : std::string(1, c);
    return out;
  };
  const std::string inner = html.substr(html.find('>') + 1, html.find("</p>") - html.find('>') - 1);
  EXPECT_EQ(std::regex_replace(inner, std::regex("</?b>"), ""), escaped(mtx_text("ein Hund & zwei Männer"))) << html;
  EXPECT_EQ(html.rfind("<p class=\"x\">", 0), 0u) << html;
  EXPECT_NE(html.find("</p>\n<script>var a = '<p>';</script>"), std::string::npos) << html;
  EXPECT_NE(inner.find("<b>"), std::string::npos) << html;
  EXPECT_LT(inner.find("<b>"), inner.find("</b>")) << html;
  const std::vector<std::tuple<json, int, std::string>> bad = {
      {{{"source", "de"}, {"target", "en"}}, 400, "missing q"},
      {{{"q", "x"}, {"source", "fr"}, {"target", "en"}}, 400, "fr is not supported"},
      {{{"q", "x"}, {"source", "de"}, {"target", "fr"}}, 400, "fr is not supported"},
      {{{"q", "x"}, {"source", "de"}, {"target", "en"}, {"format", "pdf"}}, 400, "format"},
  };
  for (const auto& [body, status, reason] : bad) {
    r = call(port, http::verb::post, "/translate", body.dump());
    EXPECT_EQ(r.status, status) << body;
    EXPECT_NE(json::parse(r.body).value("error", "").find(reason), std::string::npos) << r.body;
  }
}

// Clients nobody here wrote: PyPI's libretranslatepy (translate, languages, an error) and schemathesis against
// /openapi.json (no 5xx, no answer outside the schema), from .venv (tests/clients/).
// LibreTranslate's POST /translate_file and the download of its translatedFileUrl: the file translated as the
// same text through /translate, only its owner's URL fetches it, and only until --file-ttl passes.
TEST_F(ServeTest, TranslatesFilesAsLibreTranslatesApiDoes) {
  serve::ServerOptions options;
  options.api.max_file_bytes = 64 << 10;
  options.api.file_ttl_seconds = 2;
  start(options);
  const std::string boundary = "----mtxFileBoundary7Zq";
  const auto upload = [&](const std::string& filename, const std::string& content, const std::string& source = "de") {
    std::string form = "--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" + filename +
                       "\"\r\nContent-Type: application/octet-stream\r\n\r\n" + content + "\r\n";
    for (const auto& [name, value] :
         std::vector<std::pair<std::string, std::string>>{{"source", source}, {"target", "en"}, {"api_key", ""}}) {
      form += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" + value + "\r\n";
    }
    form += "--" + boundary + "--\r\n";
    return call(port, http::verb::post, "/translate_file", form,
                {{"Content-Type", "multipart/form-data; boundary=" + boundary}});
  };
  const auto html_text = [&](const std::string& q) {
    const Reply r = call(port, http::verb::post, "/translate",
                         json{{"q", q}, {"source", "de"}, {"target", "en"}, {"format", "html"}}.dump());
    return json::parse(r.body)["translatedText"].get<std::string>();
  };
  const std::string srt = "1\n00:00:01,000 --> 00:00:02,000\n" + kSentences[0] +
                          "\n\n2\n00:00:03,000 --> 00:00:04,000\n" + kSentences[3] + "\n";
  Reply r = upload("Mein Film.srt", srt, "auto");
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string url = json::parse(r.body)["translatedFileUrl"].get<std::string>();
  const std::string prefix = "http://127.0.0.1/download_file/";  // the Host the client sent (the test's, no port)
  ASSERT_EQ(url.substr(0, prefix.size()), prefix) << url;
  const std::string file = url.substr(prefix.size());
  EXPECT_EQ(file.size(), 32 + std::string(".Mein_Film.srt").size()) << file;  // 128 random bits, a safe name
  r = call(port, http::verb::get, "/download_file/" + file);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "1\n00:00:01,000 --> 00:00:02,000\n" + html_text(kSentences[0]) +
                        "\n\n2\n00:00:03,000 --> 00:00:04,000\n" + html_text(kSentences[3]) + "\n");
  EXPECT_EQ(r.headers["content-disposition"], "attachment; filename=\"Mein_Film.srt\"");
  // Another token, or this token with another name: nothing.
  std::string guessed = file;
  guessed[0] = guessed[0] == 'a' ? 'b' : 'a';
  EXPECT_EQ(call(port, http::verb::get, "/download_file/" + guessed).status, 404);
  EXPECT_EQ(call(port, http::verb::get, "/download_file/" + file.substr(0, 32) + ".other.srt").status, 404);
  EXPECT_EQ(call(port, http::verb::get, "/download_file/").status, 404);
  // Files it cannot take: each a 400 that says why; over --max-file-bytes, 413.
  const auto refused = [&](const Reply& reply, int status, const std::string& says) {
    EXPECT_EQ(reply.status, status) << reply.body;
    EXPECT_NE(reply.body.find(says), std::string::npos) << reply.body;
  };
  refused(upload("scan.pdf", "%PDF-1.4"), 400, "PDF is not translated");
  refused(upload("report.docx", "PK\x03\x04 not a zip"), 400, "report.docx: not a readable zip archive");
  refused(upload("notes.xyz", "x"), 400, "names no format");
  refused(call(port, http::verb::post, "/translate_file", json{{"source", "de"}, {"target", "en"}}.dump()), 400,
          "missing file");
  refused(upload("big.txt", std::string(70 << 10, 'a')), 413, "--max-file-bytes");
  r = call(port, http::verb::get, "/frontend/settings");
  EXPECT_EQ(json::parse(r.body)["filesTranslation"], true);
  EXPECT_NE(json::parse(r.body)["supportedFilesFormat"].dump().find(".docx"), std::string::npos) << r.body;
  // Past --file-ttl the URL is gone.
  std::this_thread::sleep_for(2100ms);
  EXPECT_EQ(call(port, http::verb::get, "/download_file/" + file).status, 404);
}

TEST_F(ServeTest, ThirdPartyClientsAgreeWithTheServer) {
  const std::string py = test::venv_python("libretranslatepy, schemathesis");
  if (py.empty()) {
    const char* need = std::getenv("MTX_REQUIRE_ORACLES");
    if (need && *need == '1') FAIL() << "MTX_REQUIRE_ORACLES=1 but .venv lacks libretranslatepy/schemathesis";
    GTEST_SKIP() << "no .venv with libretranslatepy and schemathesis (scripts/test.sh installs them)";
  }
  // Limits that keep every request schemathesis makes quick on the toy model, within the shortest deadline.
  serve::ServerOptions o;
  o.api.max_beam = 4;
  o.api.max_request_sentences = 8;
  o.api.max_request_tokens = 64;
  start(o);
  const std::string expected = json::parse(post(port, {{"text", kSentences[0]}}).body)["translations"][0]["text"];
  const std::string cmd = "'" + py + "' '" + std::string(MTX_SOURCE_DIR) +
                          "/tests/clients/third_party.py' --url http://127.0.0.1:" + std::to_string(port) +
                          " --text '" + kSentences[0] + "' --expect '" + expected + "' --work '" + tmp.path().string() +
                          "' > '" + (tmp / "clients.log").string() + "' 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << read_file(tmp / "clients.log");
}

// POST /v1/score: the teacher-forced numbers of decode::score_pairs (mtx score) for the same model, a pair the
// same alone or in a list, each piece's log-probability on request; malformed requests are 400s.
TEST_F(ServeTest, ScoresGivenTranslationsAsMtxScoreDoes) {
  start(serve::ServerOptions{});
  const auto score = [&](const json& body) { return call(port, http::verb::post, "/v1/score", body.dump()); };
  const Reply one = score({{"text", kSentences[0]}, {"target", "a dog runs"}, {"tokens", true}});
  ASSERT_EQ(one.status, 200) << one.body;
  const json j = json::parse(one.body);
  const double log_prob = j["scores"][0]["log_prob"];
  double sum = 0;
  for (const auto& t : j["scores"][0]["tokens"]) sum += t["log_prob"].get<double>();
  EXPECT_NEAR(sum, log_prob, 1e-6);
  EXPECT_EQ(j["scores"][0]["tokens"].back()["piece"], "</s>");
  // The same model built again: score_pairs gives the same numbers.
  test::TempDir again;
  config::Config config = test::toy_setup(again);
  tokenizer::Tokenizer tok = data::prepare_data(config).tokenizer;
  torch::manual_seed(3);
  std::vector<model::Transformer> models = {bundle::build_model(config, tok)};
  const auto expected =
      decode::score_pairs(models, tok.special_ids(), {tok.src().encode(kSentences[0]), tok.src().encode(kSentences[3])},
                          {tok.tgt().encode("a dog runs"), tok.tgt().encode("a woman reads")});
  EXPECT_NEAR(log_prob, expected[0].log_prob, 1e-5);
  const Reply two = score({{"text", {kSentences[3], kSentences[0]}}, {"target", {"a woman reads", "a dog runs"}}});
  ASSERT_EQ(two.status, 200) << two.body;
  const json k = json::parse(two.body);
  EXPECT_EQ(k["scores"][1]["log_prob"].get<double>(), log_prob) << "the same pair alone or in a list";
  EXPECT_NEAR(k["scores"][0]["log_prob"].get<double>(), expected[1].log_prob, 1e-5);
  EXPECT_FALSE(k["scores"][0].contains("tokens"));
  for (const auto& [body, reason] : std::vector<std::pair<json, std::string>>{
           {{{"text", kSentences[0]}}, "\"target\" is missing"},
           {{{"text", {kSentences[0]}}, {"target", "a dog"}}, "\"target\" must be like \"text\""},
           {{{"text", kSentences[0]}, {"target", "a\nb"}}, "\"target\" holds a line break"},
           {{{"text", kSentences[0]}, {"target", "a"}, {"beam", 2}}, "unknown field \"beam\""},
           {{{"text", kSentences[0]}, {"target", "a"}, {"tokens", 1}}, "\"tokens\" must be true or false"}}) {
    const Reply r = score(body);
    EXPECT_EQ(r.status, 400) << body.dump();
    EXPECT_NE(json::parse(r.body).value("error", "").find(reason), std::string::npos)
        << body.dump() << " -> " << r.body;
  }
  EXPECT_EQ(score({{"text", kSentences[0]}, {"target", std::string(2000, 'x')}}).status, 413);
}
