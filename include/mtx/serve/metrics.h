// mtx serve's Prometheus metrics: every count is written from one place (the server's connections and its
// batcher call these), and the text at /metrics is made here. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "mtx/serve/batcher.h"

namespace mtx::serve {

class Metrics {
 public:
  // A request answered with `status` (499: its client left first, as nginx counts it), `seconds` from reading it
  // to answering (< 0: not a translation, no latency recorded).
  void answered(int status, double seconds = -1);
  // Sentences translated for an answer, their source tokens and the best hypotheses' tokens (EOS included).
  void translated(int64_t sentences, int64_t source_tokens, int64_t generated_tokens);
  // A batch, or requests that joined a running one (Batcher's on_batch).
  void batch(const BatchRecord& record);
  // Connections: opened (accepted), refused past --max-connections, closed.
  void connection_opened();
  void connection_refused();
  void connection_closed();
  int64_t open_connections() const;
  // Answers so far with this status (tests and the soak's check).
  int64_t count(int status) const;
  // The exposition text; the gauges the server knows are passed in.
  std::string text(int64_t queued_sentences, int64_t in_flight) const;

 private:
  class Histogram {
   public:
    explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
    void add(double v);
    void write(std::string& out, const std::string& name, const std::string& help) const;

   private:
    std::vector<double> bounds_;
    std::vector<int64_t> counts_;
    double sum_ = 0;
    int64_t n_ = 0;
  };

  mutable std::mutex mutex_;
  std::map<int, int64_t> requests_;  // by status
  int64_t sentences_ = 0, source_tokens_ = 0, generated_tokens_ = 0, batches_ = 0, max_batch_requests_ = 0;
  int64_t joined_requests_ = 0, joined_sentences_ = 0;  // continuous batching: taken into running batches
  int64_t open_connections_ = 0, connections_ = 0, refused_connections_ = 0;
  Histogram batch_sentences_{{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}};
  Histogram batch_tokens_{{16, 64, 256, 1024, 4096, 16384, 65536}};
  Histogram batch_requests_{{1, 2, 4, 8, 16, 32, 64, 128}};
  Histogram latency_{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}};
};

}  // namespace mtx::serve
