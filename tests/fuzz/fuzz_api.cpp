// mtx serve's API layer (serve/api.h) on any request, without sockets: method, path, Content-Type,
// Authorization, Origin and body from the input. Every answer has a known status, a JSON answer parses as JSON
// ({"error": ...} for every error), a translation job's sentences are within the limits, and its answer is made
// from stand-in hypotheses (its own source ids) without throwing. The model: MTX_FUZZ_MODEL (a checkpoint;
// scripts/fuzz.sh trains a tiny one), else the target does nothing.
#include <nlohmann/json.hpp>

#include <array>
#include <cstdlib>
#include <set>

#include "fuzz_util.h"
#include "mtx/bundle/bundle.h"
#include "mtx/serve/api.h"

namespace {

struct World {
  std::vector<mtx::serve::ServedModel> models;
  mtx::serve::Metrics metrics;
  std::unique_ptr<mtx::serve::Api> api;
  std::unique_ptr<mtx::serve::Api> locked;  // with keys, a metrics token and a CORS origin
};

World* world() {
  static World* w = []() -> World* {
    const char* path = std::getenv("MTX_FUZZ_MODEL");
    if (!path || !*path) return nullptr;
    auto* w = new World;
    w->models.push_back({"m", mtx::bundle::load_bundle(path), "none"});
    mtx::serve::ApiOptions o;
    o.max_request_sentences = 8;
    o.max_request_tokens = 200;
    w->api = std::make_unique<mtx::serve::Api>(w->models, o, w->metrics, mtx::serve::ApiState{});
    const auto keys = mtx::fuzz::write_scratch("keys", "k1\n# comment\nk2\n");
    o.keys = std::make_shared<mtx::serve::ApiKeys>(keys);
    o.metrics_token = "t";
    o.cors_origins = {"https://ok.example"};
    o.page = false;
    w->locked = std::make_unique<mtx::serve::Api>(w->models, o, w->metrics, mtx::serve::ApiState{});
    return w;
  }();
  return w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World* w = world();
  if (!w || size < 4) return 0;
  static const std::array<const char*, 7> methods = {"GET", "POST", "HEAD", "OPTIONS", "PUT", "DELETE", "PATCH"};
  static const std::array<const char*, 11> paths = {"/v1/translate", "/translate", "/languages",    "/health",
                                                    "/v1/models",    "/metrics",   "/openapi.json", "/",
                                                    "/index.html",   "/nope",      "/translate?x=1"};
  static const std::array<const char*, 5> types = {"application/json", "application/x-www-form-urlencoded",
                                                   "text/plain", "", "application/json; charset=utf-8"};
  mtx::serve::HttpRequest r;
  r.method = methods[data[0] % methods.size()];
  r.target = paths[data[1] % paths.size()];
  r.content_type = types[data[2] % types.size()];
  const uint8_t flags = data[3];
  if (flags & 1) r.authorization = flags & 2 ? "Bearer k1" : "Bearer nope";
  if (flags & 4) r.origin = flags & 8 ? "https://ok.example" : "https://evil.example";
  r.host = "127.0.0.1:8080";
  r.body.assign(reinterpret_cast<const char*>(data) + 4, size - 4);
  const mtx::serve::Api& api = flags & 16 ? *w->locked : *w->api;
  const mtx::serve::Routed routed = api.route(r);
  static const std::set<int> known = {200, 204, 400, 401, 403, 404, 405, 413, 415, 500, 503};
  mtx::serve::HttpAnswer answer = routed.answer;
  if (routed.job) {
    const auto& job = *routed.job;
    if (job.sources.empty() || int64_t(job.sources.size()) > api.options().max_request_sentences) {
      mtx::fuzz::broken("a job outside the sentence limit");
    }
    int64_t tokens = 0;
    for (const auto& s : job.sources) tokens += int64_t(s.size()) + 1;
    if (tokens > api.options().max_request_tokens) mtx::fuzz::broken("a job outside the token limit");
    mtx::serve::Hypotheses hyps;
    for (const auto& s : job.sources) {
      std::vector<mtx::decode::Hypothesis> h;
      for (int k = 0; k < job.key.decode.nbest; ++k) {
        h.push_back({std::vector<int32_t>(s.begin(), s.begin() + std::min<size_t>(s.size(), 6)), -1.0 * k, -1.0});
      }
      hyps.push_back(h);
    }
    try {
      answer = routed.finish(hyps);
    } catch (const std::exception&) {
      return 0;  // the server answers 500 with the message
    }
  }
  if (!known.count(answer.status)) mtx::fuzz::broken("an unknown status");
  if (answer.content_type == "application/json") {
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(answer.body);
    } catch (const std::exception&) {
      mtx::fuzz::broken("a JSON answer that does not parse");
    }
    if (answer.status >= 400 && !(doc.is_object() && doc.contains("error") && doc["error"].is_string())) {
      mtx::fuzz::broken("an error without {\"error\": ...}");
    }
  }
  return 0;
}
