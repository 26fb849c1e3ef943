#include "mtx/serve/batcher.h"

#include <exception>

#include "mtx/bundle/bundle.h"

namespace mtx::serve {

int64_t Job::tokens() const {
  int64_t n = 0;
  for (const auto& s : sources) n += int64_t(s.size()) + 1;
  return n;
}

Batcher::Batcher(BatcherOptions options, Run run, std::function<void(const BatchRecord&)> on_batch)
    : options_(options), run_(std::move(run)), on_batch_(std::move(on_batch)), thread_([this] { loop(); }) {}

Batcher::~Batcher() { stop(); }

bool Batcher::submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto n = int64_t(job->sources.size());
    if (stopping_ || queued_ + n > options_.max_queue) return false;
    queued_ += n;
    queue_.push_back(std::move(job));
  }
  wake_.notify_one();
  return true;
}

int64_t Batcher::queued_sentences() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queued_;
}

void Batcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Batcher::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    // The oldest job decides the key; company with that key may join until the budget fills or its wait is over.
    const BatchKey key = queue_.front()->key;
    const auto deadline = queue_.front()->arrived + std::chrono::milliseconds(options_.max_wait_ms);
    auto pooled_tokens = [&] {
      int64_t n = 0;
      for (const auto& j : queue_) {
        if (j->key == key) n += j->tokens();
      }
      return n;
    };
    wake_.wait_until(lock, deadline, [&] {
      return stopping_ || pooled_tokens() >= options_.max_batch_tokens ||
             (options_.outstanding && int64_t(queue_.size()) >= options_.outstanding());
    });
    // Take that key's jobs in arrival order while they fit (the first always does).
    std::vector<std::shared_ptr<Job>> batch;
    int64_t tokens = 0;
    for (auto it = queue_.begin(); it != queue_.end();) {
      const int64_t t = (*it)->tokens();
      if ((*it)->key == key && (batch.empty() || tokens + t <= options_.max_batch_tokens)) {
        tokens += t;
        queued_ -= int64_t((*it)->sources.size());
        batch.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    lock.unlock();
    // Requests whose clients went away while they waited are answered without translating.
    std::vector<std::shared_ptr<Job>> live;
    for (auto& job : batch) {
      if (job->gone && job->gone()) {
        job->done({}, kClientGone);
      } else {
        live.push_back(std::move(job));
      }
    }
    if (!live.empty()) {
      std::vector<std::vector<int32_t>> sources;
      BatchRecord record;
      for (const auto& job : live) {
        for (const auto& s : job->sources) {
          sources.push_back(s);
          record.tokens += int64_t(s.size()) + 1;
        }
      }
      record.jobs = int64_t(live.size());
      record.sentences = int64_t(sources.size());
      if (on_batch_) on_batch_(record);
      Hypotheses results;
      std::string error;
      try {
        results = run_(key, sources);
      } catch (const std::exception& e) {
        error = bundle::short_what(e);
      }
      size_t at = 0;
      for (const auto& job : live) {
        if (!error.empty()) {
          job->done({}, error);
          continue;
        }
        Hypotheses mine(std::make_move_iterator(results.begin() + std::ptrdiff_t(at)),
                        std::make_move_iterator(results.begin() + std::ptrdiff_t(at + job->sources.size())));
        at += job->sources.size();
        job->done(std::move(mine), "");
      }
    }
    lock.lock();
  }
}

}  // namespace mtx::serve
