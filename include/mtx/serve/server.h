// mtx serve: translation over HTTP (docs/serving.md). This is the connection layer: Boost.Beast over Asio reads
// requests within their limits and timeouts, hands each to the API layer (serve/api.h: parse, validate, answer),
// queues its translation in the batcher (serve/batcher.h: requests pooled into token-budget batches; a
// sentence's translation never depends on who else asked at the same time) and writes the answer. Connections
// are bounded in number, accepting survives running out of file descriptors, a client that leaves stops costing
// work at the next decoding step, and SIGTERM drains (a second one exits at once).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mtx/bundle/bundle.h"
#include "mtx/decode/translator.h"
#include "mtx/serve/api.h"
#include "mtx/serve/batcher.h"

namespace mtx::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;             // 0: any free port (run()'s callback is told which)
  BatcherOptions batching;     // --max-batch-tokens, --max-wait-ms, --max-queue, --no-eager-batches, joins
  ApiOptions api;              // request limits, deadline, keys, CORS, the page
  int io_threads = 2;          // threads that read and write connections (not translation)
  int workers = 0;             // decode::TranslateOptions::workers
  int batches = 1;             // batches translated at once, each a single search on one CPU thread (1: one batch,
                               // its searches split among the threads as --workers says)
  int max_connections = 4096;  // open connections at most; a connection past it gets 503 and is closed
  int64_t max_header_bytes = 16384;   // request line and headers; more: 431
  int header_timeout_ms = 10000;      // from a request's first byte to the end of its headers; past it: 408
  int body_timeout_ms = 30000;        // from the end of the headers to the end of the body; past it: 408
  int idle_timeout_ms = 60000;        // a connection waiting for its next request is closed after this
  int write_timeout_ms = 30000;       // an answer the client does not take within this is dropped with the
                                      // connection
  int max_keepalive_requests = 1000;  // requests on one connection; its last answer closes it (nginx's default)
  int drain_seconds = 30;             // SIGTERM: requests in flight get this long to finish; then it exits
};

class Server {
 public:
  Server(std::vector<ServedModel> models, ServerOptions options);
  ~Server();
  // Listens and serves until SIGTERM/SIGINT or stop(): then /health answers 503, new translations 503, and the
  // requests in flight finish (for at most drain_seconds) before it returns. A second SIGTERM/SIGINT ends the
  // process at once (exit code 130 after SIGINT, 143 after SIGTERM). SIGHUP reloads --api-keys. `on_listening`
  // is called with the bound port once connections are accepted. Throws Error when the address cannot be bound.
  void run(const std::function<void(int port)>& on_listening = {});
  // The same drain as SIGTERM, from any thread.
  void stop();
  // The metrics the server writes (tests read them).
  const Metrics& metrics() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace mtx::serve
