// mtx serve: translation over HTTP (docs/serving.md). Requests from many clients are pooled into token-budget
// batches (serve/batcher.h); a sentence's translation never depends on who else asked at the same time. Bounded
// queue (429), bounded bodies (413), one-line 400s for bad input, Prometheus metrics, a page at /, and a clean
// drain on SIGTERM.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mtx/bundle/bundle.h"
#include "mtx/decode/translator.h"
#include "mtx/serve/batcher.h"

namespace mtx::serve {

struct ServedModel {
  std::string name;          // what requests call it ("model": name); the first model is the default
  bundle::Bundle bundle;     // loaded (and quantized, when asked) on the CPU or a GPU
  std::string quantization;  // "none" | "int8", for /v1/models
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                      // 0: any free port (run()'s callback is told which)
  BatcherOptions batching;              // --max-batch-tokens, --max-wait-ms, --max-queue
  bool eager_batches = true;            // a batch starts once every request in flight is queued, without waiting out
                                        // max_wait_ms (--no-eager-batches: always wait)
  int64_t max_request_bytes = 1 << 20;  // larger bodies get 413
  int io_threads = 2;                   // threads that read and write connections (not translation)
  int workers = 0;                      // decode::TranslateOptions::workers
  int batches = 1;    // batches translated at once, each a single search on one CPU thread (1: one batch, its
                      // searches split among the threads as --workers says)
  int max_beam = 32;  // larger "beam" values get 400
};

class Server {
 public:
  Server(std::vector<ServedModel> models, ServerOptions options);
  ~Server();
  // Listens and serves until SIGTERM/SIGINT or stop(): then stops accepting, finishes the requests in flight and
  // returns. `on_listening` is called with the bound port once connections are accepted. Throws Error when the
  // address cannot be bound.
  void run(const std::function<void(int port)>& on_listening = {});
  // The same drain as SIGTERM, from any thread.
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace mtx::serve
