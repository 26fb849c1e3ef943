#include "mtx/serve/metrics.h"

#include <algorithm>
#include <array>
#include <sstream>
#include <tuple>

#include "mtx/util/system.h"

namespace mtx::serve {

namespace {

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

void Metrics::Histogram::add(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++n_;
}

void Metrics::Histogram::write(std::string& out, const std::string& name, const std::string& help) const {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(n_) + "\n" + name + "_sum " + number(sum_) + "\n" + name +
         "_count " + std::to_string(n_) + "\n";
}

void Metrics::answered(int status, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[status];
  if (seconds >= 0) latency_.add(seconds);
}

void Metrics::translated(int64_t sentences, int64_t source_tokens, int64_t generated_tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  sentences_ += sentences;
  source_tokens_ += source_tokens;
  generated_tokens_ += generated_tokens;
}

void Metrics::batch(const BatchRecord& r) {
  std::lock_guard<std::mutex> lock(mutex_);
  max_batch_requests_ = std::max(max_batch_requests_, r.batch_jobs);
  if (r.joined) {
    joined_requests_ += r.jobs;
    joined_sentences_ += r.sentences;
    return;
  }
  ++batches_;
  batch_sentences_.add(double(r.sentences));
  batch_tokens_.add(double(r.tokens));
  batch_requests_.add(double(r.jobs));
}

void Metrics::connection_opened() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++open_connections_;
  ++connections_;
}

void Metrics::connection_refused() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++refused_connections_;
}

void Metrics::connection_closed() {
  std::lock_guard<std::mutex> lock(mutex_);
  --open_connections_;
}

int64_t Metrics::open_connections() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_connections_;
}

int64_t Metrics::count(int status) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = requests_.find(status);
  return it == requests_.end() ? 0 : it->second;
}

std::string Metrics::text(int64_t queued_sentences, int64_t in_flight) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out =
      "# HELP mtx_requests_total Requests answered, by HTTP status (499: the client left first).\n"
      "# TYPE mtx_requests_total counter\n";
  for (const auto& [status, n] : requests_) {
    out += "mtx_requests_total{status=\"" + std::to_string(status) + "\"} " + std::to_string(n) + "\n";
  }
  const std::array<std::tuple<const char*, const char*, int64_t>, 8> counters = {
      {{"mtx_sentences_total", "Sentences translated.", sentences_},
       {"mtx_source_tokens_total", "Source tokens translated (EOS included).", source_tokens_},
       {"mtx_generated_tokens_total", "Target tokens generated (best hypotheses, EOS included).", generated_tokens_},
       {"mtx_batches_total", "Batches translated.", batches_},
       {"mtx_joined_requests_total", "Requests taken into a batch while it ran (continuous batching).",
        joined_requests_},
       {"mtx_joined_sentences_total", "Sentences taken into a batch while it ran.", joined_sentences_},
       {"mtx_connections_total", "Connections accepted.", connections_},
       {"mtx_connections_refused_total", "Connections refused past --max-connections (503).", refused_connections_}}};
  for (const auto& [name, help, v] : counters) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " +
           std::to_string(v) + "\n";
  }
  const std::array<std::tuple<const char*, const char*, int64_t>, 4> gauges = {
      {{"mtx_queue_sentences", "Sentences waiting for a batch.", queued_sentences},
       {"mtx_requests_in_flight", "Translation requests accepted and not yet answered.", in_flight},
       {"mtx_batch_requests_max", "The most requests that shared one batch (those that joined it included).",
        max_batch_requests_},
       {"mtx_connections_open", "Connections open now.", open_connections_}}};
  for (const auto& [name, help, v] : gauges) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " +
           std::to_string(v) + "\n";
  }
  batch_sentences_.write(out, "mtx_batch_sentences", "Sentences per batch.");
  batch_tokens_.write(out, "mtx_batch_tokens", "Source tokens per batch (EOS included).");
  batch_requests_.write(out, "mtx_batch_requests", "Requests per batch.");
  latency_.write(out, "mtx_request_duration_seconds", "Translation request latency, read to answer.");
  if (const HeapFigures heap = heap_figures(); heap.known) {
    const std::array<std::tuple<const char*, const char*, int64_t>, 3> figures = {
        {{"mtx_heap_allocated_bytes", "Bytes the program holds from the allocator (tcmalloc).", heap.allocated},
         {"mtx_heap_free_bytes", "Bytes tcmalloc's page heap keeps free and mapped for reuse.", heap.free},
         {"mtx_heap_mapped_bytes", "Bytes tcmalloc has mapped, free or not.", heap.mapped}}};
    for (const auto& [name, help, v] : figures) {
      out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " +
             std::to_string(v) + "\n";
    }
  }
  return out;
}

}  // namespace mtx::serve
