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
    : options_(std::move(options)), run_(std::move(run)), on_batch_(std::move(on_batch)) {
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    threads_.emplace_back([this] {
      if (options_.thread_init) options_.thread_init();
      loop();
    });
  }
}

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
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void Batcher::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    ++idle_;
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
      return stopping_ || queue_.empty() || pooled_tokens() >= options_.max_batch_tokens ||
             (options_.outstanding && int64_t(queue_.size()) >= options_.outstanding());
    });
    --idle_;
    if (queue_.empty()) continue;  // another batch thread took it
    // Take the (current) oldest job's key, in arrival order while they fit (the first always does); with other
    // batch threads idle, only this thread's share of them.
    const BatchKey take = queue_.front()->key;
    int64_t same = 0;
    for (const auto& j : queue_) same += j->key == take;
    const int64_t share = (same + idle_) / (idle_ + 1);
    std::vector<std::shared_ptr<Job>> batch;
    int64_t tokens = 0;
    for (auto it = queue_.begin(); it != queue_.end() && int64_t(batch.size()) < share;) {
      const int64_t t = (*it)->tokens();
      if ((*it)->key == take && (batch.empty() || tokens + t <= options_.max_batch_tokens)) {
        tokens += t;
        queued_ -= int64_t((*it)->sources.size());
        batch.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    if (!queue_.empty()) wake_.notify_one();  // the rest: another batch thread's
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
        results = run_(take, sources);
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
