// Cross-request batching for the server: sentences from concurrent requests that ask for the same model and search
// settings are pooled into token-budget batches. A batch waits at most max_wait_ms for company after its oldest
// request arrived; each result goes back to its own request. Translation is batch-invariant (decode/translator.h),
// so a sentence's result does not depend on what else is in its batch.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "mtx/decode/search.h"
#include "mtx/decode/translator.h"

namespace mtx::serve {

// What requests must share to ride in one batch.
struct BatchKey {
  std::string model;
  config::DecodeConfig decode;  // every decoding option, as the request set it over the model's defaults
  bool scores = true;           // the answers carry hypotheses' scores (decode::SearchOptions::scores)
  // A scoring job (/v1/score): each sentence's given target is its controls' prefix, scored teacher-forced; its
  // one hypothesis is that target with its log-probabilities (decode::score_pairs). Never batched with searches.
  bool score = false;
  bool attention = false;  // hypotheses carry their search's attention (decode::SearchOptions::return_attention)
  bool operator==(const BatchKey& o) const {
    return model == o.model && decode == o.decode && scores == o.scores && score == o.score && attention == o.attention;
  }
};

using Hypotheses = std::vector<std::vector<decode::Hypothesis>>;  // per sentence, best first

// The errors a job gets when its client went away, or its deadline passed, before its sentences were done.
inline const std::string kClientGone = "the client went away";
inline const std::string kDeadlinePassed = "the request's deadline passed";

// One request's sentences. `done` is called exactly once, from a batch thread (or a search thread of its batch),
// possibly while that batch still runs: with the hypotheses of every sentence in order, or with an error message
// (then the hypotheses are empty). A job whose `gone` says its client has gone away, or whose deadline has passed,
// is not translated, or stops being translated at the next search step: done gets kClientGone or kDeadlinePassed.
struct Job {
  using Clock = std::chrono::steady_clock;
  BatchKey key;
  std::vector<std::vector<int32_t>> sources;     // source ids without EOS, none empty
  std::vector<decode::TargetControls> controls;  // per source (or empty: none), its target prefix and constraints
  std::function<bool()> gone;                    // may be empty: never gone
  std::function<void(Hypotheses, const std::string& error)> done;
  Clock::time_point arrived = Clock::now();
  Clock::time_point deadline = Clock::time_point::max();
  int64_t tokens() const;  // source tokens (EOS included)
  // Why the job is given up on ("" while it is not): kDeadlinePassed, or kClientGone (`gone` is asked at most
  // every few milliseconds).
  std::string abandoned() const;

 private:
  mutable std::atomic<int64_t> gone_checked_{0};  // Clock ticks of the last `gone` call
};

struct BatcherOptions {
  // Source tokens per batch (EOS included). A request of more is split into parts within it (in order, each a job
  // of its own to the batches, answered together), so no batch holds more, but for a single sentence over it.
  int64_t max_batch_tokens = 8192;
  int max_wait_ms = 5;       // how long a batch waits for company after its oldest request arrived
  int64_t max_queue = 4096;  // sentences waiting at most; past it submit() refuses
  // Requests in flight, when the caller knows (the server does): with `eager`, once every one of them is queued,
  // no more company can come from the clients already waiting, and the batch starts without waiting out
  // max_wait_ms. Continuous batching reads it too (join_max_in_flight).
  std::function<int64_t()> outstanding;
  bool eager = true;
  // Batches translated at once, each on a thread of its own (`thread_init` runs first on each, e.g. to give it
  // one CPU thread). While another batch thread is idle, a batch takes its share of the queued requests, so
  // that the batches overlap instead of one batch's tail holding every client.
  int threads = 1;
  std::function<void()> thread_init;
  // Continuous batching: while every batch thread is busy, a running batch takes in requests with its key between
  // search steps (Run's `admit`), up to max_batch_tokens of sentences still searching. Once the oldest queued
  // request has waited max_wait_ms and is another key's or does not fit, it takes nothing more.
  bool continuous = true;
  // ...and only while fewer than join_below of its sentences are still searching: under load a batch runs as it
  // started until it has drained to a few sentences, then fills up again (0: never joins).
  int64_t join_below = 5;
  // ...and only while at most join_max_in_flight requests per batch thread are in flight (`outstanding`; 0: any
  // number). Past that, the batch a thread starts once its search ends holds more than a drained search would
  // take in, and it starts afresh: no joined rows, no window kept long by the sentences still searching.
  int64_t join_max_in_flight = 10;
  // Sentences one batch takes in at most, those it started with included; then it ends with what it has and the
  // next batch starts afresh (a search keeps each sentence's result until it ends: memory stays flat under load).
  int64_t max_joined_sentences = 4096;
};

// What the batch thread ran, for metrics and tests: a batch, or requests that joined a running one.
struct BatchRecord {
  int64_t jobs = 0, sentences = 0, tokens = 0;
  bool joined = false;
  int64_t batch_jobs = 0;  // the requests of the batch so far: those it started with and all that joined it since
};

class Batcher {
 public:
  // `run` translates one batch (a key's sources, in order) and returns their hypotheses. It may tell `finished`
  // of a sentence as soon as its search has ended (decode::SentenceDone, from any thread): a job is answered once
  // all its sentences are, without waiting for the rest of the batch. Sentences it did not tell of are taken
  // from what it returns. `on_batch` (optional) is told about each batch before it runs.
  // A run that can take sentences into its search as it goes (decode::Translator::translate_continuously) asks
  // `admit` between steps, with the number of sentences still searching: it returns the sources of the requests
  // that join (numbered after the batch's, in order; none: empty).
  using AdmitSources = decode::Translator::AdmitSources;
  // `abandoned` says which sentences to stop searching (beam_search's Abandoned, numbered as `finished` numbers
  // them): those of jobs whose client left or whose deadline passed. `controls_of` gives a sentence's target
  // prefix and constraints (numbered the same way; empty: none).
  using ControlsOf = decode::Translator::ControlsOf;
  using Run = std::function<Hypotheses(const BatchKey&, const std::vector<std::vector<int32_t>>&,
                                       const decode::SentenceDone& finished, const AdmitSources& admit,
                                       const decode::Abandoned& abandoned, const ControlsOf& controls_of)>;
  Batcher(BatcherOptions options, Run run, std::function<void(const BatchRecord&)> on_batch = {});
  ~Batcher();  // stop()
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues a job (split into parts of at most max_batch_tokens); false (and nothing queued) when its sentences
  // would take the queue past max_queue, or after stop().
  bool submit(std::shared_ptr<Job> job);
  int64_t queued_sentences() const;
  // Translates everything queued, then ends the batch thread. Idempotent.
  void stop();

 private:
  void loop();
  // Runs one batch of live jobs (and those that join it) and answers each of them exactly once.
  void run_batch(const BatchKey& key, std::vector<std::shared_ptr<Job>> jobs);
  // Takes up to `share` of the queued jobs with `key`, in arrival order, while their tokens fit in `room`. Called
  // with mutex_ held.
  std::vector<std::shared_ptr<Job>> take(const BatchKey& key, int64_t share, int64_t room);

  BatcherOptions options_;
  Run run_;
  std::function<void(const BatchRecord&)> on_batch_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  int64_t queued_ = 0;  // sentences in queue_
  bool stopping_ = false;
  int idle_ = 0;  // batch threads waiting for work
  std::vector<std::thread> threads_;
};

}  // namespace mtx::serve
