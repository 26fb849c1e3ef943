// mtx serve's API layer: a request (method, path, the headers it reads, body) in, an answer or a translation job
// out -- no sockets, so unit tests and a libFuzzer target call it directly. Every endpoint is one entry of the
// table in src/serve/api.cpp, with its methods, access (open, key, metrics token) and body types; routing,
// 404/405/415, CORS, keys and limits are checked there once for all of them. The OpenAPI document at
// /openapi.json describes the same table (src/serve/openapi.json, with the limits filled in).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "mtx/bundle/bundle.h"
#include "mtx/serve/batcher.h"
#include "mtx/serve/metrics.h"

namespace mtx::serve {

struct ServedModel {
  std::string name;          // what requests call it ("model": name); the first model is the default
  bundle::Bundle bundle;     // loaded (and quantized, when asked) on the CPU or a GPU
  std::string quantization;  // "none" | "int8", for /v1/models
};

// The keys clients may present (--api-keys FILE: one a line; blank lines and lines from '#' on are skipped).
class ApiKeys {
 public:
  // Throws DataError naming the file when it cannot be read or holds no key.
  explicit ApiKeys(std::filesystem::path file);
  // Reads the file again (SIGHUP); on a failure keeps the keys it had and returns the reason ("" when read).
  std::string reload();
  bool valid(const std::string& key) const;
  size_t size() const;

 private:
  static std::set<std::string> read(const std::filesystem::path& file);
  std::filesystem::path file_;
  mutable std::mutex mutex_;
  std::set<std::string> keys_;
};

struct ApiOptions {
  int64_t max_request_bytes = 1 << 20;    // a larger body: 413 (the connection layer enforces it while reading)
  int64_t max_request_sentences = 256;    // sentences in one request; more: 413
  int64_t max_request_tokens = 8192;      // source tokens in one request (EOS included); more: 413
  int max_beam = 32;                      // larger "beam" values: 400
  int64_t request_timeout_ms = 60000;     // a translation's deadline from its arrival (0: none); "timeout_ms" in a
                                          // body may ask for less; past it: 504
  std::vector<std::string> cors_origins;  // origins whose pages may call the API ("*": any); none by default
  bool show_paths = false;                // /v1/models lists each model's file path
  bool page = true;                       // the page at /
  std::string page_file;                  // set: this HTML file is the page (read once; its inline <script> and
                                          // <style> are allowed by their hashes, nothing else)
  int64_t max_file_bytes = 10 << 20;      // /translate_file's body (the file and its fields); larger: 413
  int64_t max_file_sentences = 5000;      // sentences in one file; more: 413
  int64_t file_ttl_seconds = 600;         // a translated file's download URL works this long, then 404
  int64_t max_stored_file_bytes = int64_t(256) << 20;  // translated files held for download; the oldest go first
  std::shared_ptr<ApiKeys> keys;                       // set: translation endpoints need one of these keys (401/403)
  std::string metrics_token;                           // set: /metrics needs "Authorization: Bearer <token>"
};

struct HttpRequest {
  std::string method;  // "GET", "HEAD", "POST", "OPTIONS", ...
  std::string target;  // the path and query
  std::string host, content_type, authorization, origin;
  std::string body;
};

struct HttpAnswer {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type and Content-Length
};

// What a request becomes: an answer now, or a translation to queue whose answer `finish` makes from its result.
struct Routed {
  HttpAnswer answer;
  std::shared_ptr<Job> job;  // set: queue it; the caller sets job->done
  // job's hypotheses -> the answer (on a batch thread). Holds no reference to the job.
  std::function<HttpAnswer(const Hypotheses&)> finish;
};

// What the API reads of the server it answers for.
struct ApiState {
  std::function<bool()> draining;  // SIGTERM received: /health is 503, new translations too
  std::function<int64_t()> queued_sentences;
  std::function<int64_t()> in_flight;
};

class Api {
 public:
  // Throws ConfigError on options that contradict each other or the models.
  Api(const std::vector<ServedModel>& models, ApiOptions options, Metrics& metrics, ApiState state);
  ~Api();
  // Never throws but std::bad_alloc: every failure is an answer with its status and {"error": "<one line>"}.
  Routed route(const HttpRequest& request) const;
  // The answer to a job that ended with `error`: 499 (kClientGone: nobody reads it), 504 (kDeadlinePassed), 500.
  HttpAnswer failed(const std::string& error) const;
  static HttpAnswer error(int status, const std::string& reason);
  const ApiOptions& options() const;
  // The largest body the request for `target` (a path and query) may have: the connection layer reads no more.
  int64_t body_limit(const std::string& target) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace mtx::serve
