// mtx serve: translation over HTTP with cross-request batching (serve/server.h; docs/serving.md).
#include "commands.h"
#include "mtx/serve/server.h"
#include "mtx/util/device.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"
#include "mtx/util/system.h"

#include <cmath>
#include <filesystem>
#include <memory>

namespace mtx::cli {

struct ServeArgs {
  std::vector<std::string> ckpts;  // PATH or NAME=PATH
  QuantizeArgs quantize;
  std::string device = "auto";
  int threads = 0;
  serve::ServerOptions server;
  DecodeFlags decode;    // each model's decode section with these applied: the requests' defaults
  std::string api_keys;  // --api-keys FILE
  double request_timeout = 60, header_timeout = 10, body_timeout = 30, idle_timeout = 60, write_timeout = 30;
};

namespace {

int run_serve(ServeArgs& a) {
  const torch::Device device = select_device(parse_device(inference_device(a.device, a.quantize)), "--device");
  std::vector<serve::ServedModel> models;
  for (const auto& spec : a.ckpts) {
    const size_t eq = spec.find('=');
    const std::string path = eq == std::string::npos ? spec : spec.substr(eq + 1);
    std::string name = eq == std::string::npos ? std::filesystem::path(path).stem().string() : spec.substr(0, eq);
    for (const auto& m : models) {
      if (m.name == name) throw ConfigError("--ckpt: two models are called '" + name + "': name them (NAME=PATH)");
    }
    TranslationModels loaded = load_translation_models({path}, device, a.quantize);
    auto& served_config = loaded.bundles.front().config;
    served_config.decode = a.decode.apply(served_config.decode);
    const bool int8 = loaded.bundles.front().model->is_int8();
    models.push_back({name, std::move(loaded.bundles.front()), int8 ? "int8" : "none"});
  }
  if (!a.api_keys.empty()) a.server.api.keys = std::make_shared<serve::ApiKeys>(a.api_keys);
  auto ms = [](double seconds) { return int(std::llround(seconds * 1000)); };
  a.server.api.request_timeout_ms = ms(a.request_timeout);
  a.server.header_timeout_ms = ms(a.header_timeout);
  a.server.body_timeout_ms = ms(a.body_timeout);
  a.server.idle_timeout_ms = ms(a.idle_timeout);
  a.server.write_timeout_ms = ms(a.write_timeout);
  set_threads(a.threads);
  if (a.server.batches == 0) a.server.batches = runtime_info().threads;  // one batch per translation thread
  if (runtime_info().threads == 1) a.server.workers = 1;                 // one thread: each batch is one search
  serve::Server server(std::move(models), a.server);
  server.run([&](int port) {
    log::info(
        "serving on http://{}:{} (POST /v1/translate /translate, GET /health /v1/models /languages /metrics "
        "/openapi.json{})",
        a.server.host, port, a.server.api.page ? " /" : "");
  });
  log::info("serve: stopped");
  return 0;
}

}  // namespace

Command add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "Translate over HTTP: cross-request batching, limits, metrics, a page");
  cmd->add_option("--ckpt", a->ckpts, "A model to serve, PATH or NAME=PATH (repeat; the first is the default)")
      ->required();
  a->decode.add(*cmd, "; a request's fields override it");
  cmd->add_option("--host", a->server.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", a->server.port, "Port (0: any free one, printed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--max-batch-tokens", a->server.batching.max_batch_tokens,
                  "Source tokens per batch, pooled across requests")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-wait-ms", a->server.batching.max_wait_ms,
                  "How long a batch waits for other requests after its oldest arrived")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("!--no-eager-batches", a->server.batching.eager,
                "Always wait --max-wait-ms for company, even when every request in flight is already queued");
  cmd->add_flag("!--no-continuous-batching", a->server.batching.continuous,
                "Never take requests into a running batch: each batch runs as it started");
  cmd->add_option("--join-below", a->server.batching.join_below,
                  "A running batch takes in queued requests only while fewer than this many of its sentences are "
                  "still searching (0: never)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--join-max-in-flight", a->server.batching.join_max_in_flight,
                  "A running batch takes in queued requests only while at most this many requests per batch thread "
                  "are in flight (0: any number); under heavier load each batch runs as it started")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-queue", a->server.batching.max_queue, "Sentences waiting at most; past it, 429")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-request-bytes", a->server.api.max_request_bytes, "Larger request bodies get 413")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-file-bytes", a->server.api.max_file_bytes,
                  "/translate_file: larger uploads (the file and its fields) get 413")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-file-sentences", a->server.api.max_file_sentences,
                  "/translate_file: files of more sentences get 413")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--file-ttl", a->server.api.file_ttl_seconds,
                  "/translate_file: seconds a translated file's download URL works")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-stored-file-bytes", a->server.api.max_stored_file_bytes,
                  "/translate_file: translated files held for download at most; the oldest go first")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-request-sentences", a->server.api.max_request_sentences,
                  "Sentences in one request at most; more get 413")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-request-tokens", a->server.api.max_request_tokens,
                  "Source tokens in one request at most (EOS included); more get 413. A request over "
                  "--max-batch-tokens is split into batches within it")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(2), int64_t(1) << 40));
  cmd->add_option("--max-beam", a->server.api.max_beam, "Larger \"beam\" values get 400")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--request-timeout", a->request_timeout,
                  "Seconds a translation may take from its arrival, queue included (0: no limit); past it 504 and "
                  "its work stops. A request's \"timeout_ms\" may ask for less")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-connections", a->server.max_connections,
                  "Open connections at most; one past it gets 503 and is closed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-header-bytes", a->server.max_header_bytes, "Request line and headers at most; more: 431")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1024), int64_t(1) << 24));
  cmd->add_option("--header-timeout", a->header_timeout,
                  "Seconds from a request's first byte to the end of its headers; past it 408")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--body-timeout", a->body_timeout,
                  "Seconds for a request's body once its headers are in; past it 408")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--idle-timeout", a->idle_timeout, "Seconds a keep-alive connection may wait for its next request")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--write-timeout", a->write_timeout,
                  "Seconds a client has to take an answer; past it the connection is dropped")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-keepalive-requests", a->server.max_keepalive_requests,
                  "Requests on one connection; its last answer closes it")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--drain-seconds", a->server.drain_seconds,
                  "SIGTERM: seconds the requests in flight get to finish (a second SIGTERM exits at once)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--api-keys", a->api_keys,
                  "A file of API keys, one a line (reloaded on SIGHUP): translations then need one "
                  "(Authorization: Bearer KEY, or \"api_key\"); else 401/403");
  cmd->add_option("--metrics-token", a->server.api.metrics_token,
                  "/metrics then needs \"Authorization: Bearer TOKEN\"");
  cmd->add_option("--cors-origin", a->server.api.cors_origins,
                  "An origin whose pages may call the API, e.g. https://example.org (repeat; * for any). None by "
                  "default: POSTs from other origins get 403");
  cmd->add_flag("--show-paths", a->server.api.show_paths, "/v1/models lists each model's file path");
  cmd->add_flag("!--no-page", a->server.api.page, "No page at / (404)");
  cmd->add_option("--page", a->server.api.page_file,
                  "An HTML file served as the page at / instead of mtx's own (its inline <script> and <style> run "
                  "under a Content-Security-Policy that allows them by hash, and requests to this server only)")
      ->excludes("--no-page");
  cmd->add_option("--threads", a->threads, "CPU threads for translation (0 = one per core)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--workers", a->server.workers, "Searches at once on the CPU (0 = one per thread)")
      ->check(CLI::NonNegativeNumber);
  a->server.batches = 0;
  cmd->add_option("--batches", a->server.batches,
                  "Batches translated at once, each one search on one CPU thread (default: one per thread; 1: one "
                  "batch, its searches on every thread)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--io-threads", a->server.io_threads, "Threads that read and write connections")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--device", a->device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  add_quantize_flags(*cmd, a->quantize);
  return {cmd, [a] { return run_serve(*a); }};
}

}  // namespace mtx::cli
