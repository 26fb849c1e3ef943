#include "mtx/serve/batcher.h"

#include <exception>
#include <utility>

#include "mtx/bundle/bundle.h"

namespace mtx::serve {

int64_t Job::tokens() const {
  int64_t n = 0;
  for (const auto& s : sources) n += int64_t(s.size()) + 1;
  return n;
}

std::string Job::abandoned() const {
  const Clock::time_point now = Clock::now();
  if (now >= deadline) return kDeadlinePassed;
  if (!gone) return "";
  // A recv() a call: asked at most every 2 ms per job, whatever the number of its sentences or searches.
  const int64_t ticks = now.time_since_epoch().count();
  int64_t last = gone_checked_.load(std::memory_order_relaxed);
  const int64_t every = std::chrono::duration_cast<Clock::duration>(std::chrono::milliseconds(2)).count();
  if (last != 0 && ticks - last < every) return "";
  if (!gone_checked_.compare_exchange_strong(last, ticks)) return "";
  return gone() ? kClientGone : "";
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

namespace {

// A job of more than `budget` tokens as parts within it, in order (a sentence over it alone), each answered into
// the whole, which is answered once: when its last part is, or at the first part's error.
std::vector<std::shared_ptr<Job>> split(const std::shared_ptr<Job>& job, int64_t budget) {
  if (job->sources.size() <= 1 || job->tokens() <= budget) return {job};
  struct Whole {
    std::mutex mutex;
    Hypotheses answers;
    size_t missing = 0;
    bool answered = false;
  };
  auto whole = std::make_shared<Whole>();
  whole->answers.resize(job->sources.size());
  std::vector<std::shared_ptr<Job>> parts;
  for (size_t begin = 0; begin < job->sources.size();) {
    size_t end = begin;
    int64_t tokens = 0;
    while (end < job->sources.size() && (end == begin || tokens + int64_t(job->sources[end].size()) + 1 <= budget)) {
      tokens += int64_t(job->sources[end].size()) + 1;
      ++end;
    }
    auto part = std::make_shared<Job>();
    part->key = job->key;
    part->sources.assign(job->sources.begin() + std::ptrdiff_t(begin), job->sources.begin() + std::ptrdiff_t(end));
    if (!job->controls.empty()) {
      part->controls.assign(job->controls.begin() + std::ptrdiff_t(begin), job->controls.begin() + std::ptrdiff_t(end));
    }
    part->gone = job->gone;
    part->arrived = job->arrived;
    part->deadline = job->deadline;
    // The parts hold the whole's `done` (not the job): answering drops it, so nothing outlives the answer.
    auto done = std::make_shared<std::function<void(Hypotheses, const std::string&)>>(job->done);
    part->done = [whole, done, begin](Hypotheses h, const std::string& error) {
      std::function<void(Hypotheses, const std::string&)> answer;
      Hypotheses all;
      {
        std::lock_guard<std::mutex> lock(whole->mutex);
        if (whole->answered) return;
        if (error.empty()) {
          for (size_t i = 0; i < h.size(); ++i) whole->answers[begin + i] = std::move(h[i]);
          if (--whole->missing > 0) return;
          all = std::move(whole->answers);
        }
        whole->answered = true;
        answer = std::move(*done);
      }
      answer(std::move(all), error);
    };
    parts.push_back(std::move(part));
    begin = end;
  }
  whole->missing = parts.size();
  return parts;
}

}  // namespace

bool Batcher::submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto n = int64_t(job->sources.size());
    if (stopping_ || queued_ + n > options_.max_queue) return false;
    queued_ += n;
    for (auto& part : split(job, options_.max_batch_tokens)) queue_.push_back(std::move(part));
  }
  wake_.notify_all();
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

namespace {

// One batch's jobs while it runs, those that joined it included: which job each sentence belongs to, and what is
// still missing. A job is answered (exactly once) when its last sentence comes in, or with the error when the run
// fails.
class Replies {
 public:
  // Registers jobs (their sentences numbered after those so far) and returns their sources. A job without
  // sentences is answered at once.
  std::vector<std::vector<int32_t>> add(const std::vector<std::shared_ptr<Job>>& jobs) {
    std::vector<std::vector<int32_t>> sources;
    for (const auto& job : jobs) {
      if (job->sources.empty()) job->done({}, "");
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& job : jobs) {
      if (job->sources.empty()) continue;
      const size_t j = jobs_.size();
      jobs_.push_back(job);
      answers_.emplace_back(job->sources.size());
      missing_.push_back(job->sources.size());
      for (size_t i = 0; i < job->sources.size(); ++i) {
        where_.emplace_back(j, i);
        told_.push_back(0);
        sources.push_back(job->sources[i]);
        searching_tokens_ += int64_t(job->sources[i].size()) + 1;
      }
    }
    return sources;
  }

  // Batch sentence `s`'s target controls (empty: none).
  decode::TargetControls controls(size_t s) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (s >= where_.size()) return {};
    const auto [j, i] = where_[s];
    const std::shared_ptr<Job>& job = jobs_[j];
    if (!job || job->controls.empty()) return {};
    return job->controls[i];
  }

  // Source tokens (EOS included) of the sentences not yet told.
  int64_t searching_tokens() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return searching_tokens_;
  }

  // Sentence `s` of the batch has its hypotheses (a repeat is ignored).
  void give(size_t s, std::vector<decode::Hypothesis> hypotheses) {
    std::shared_ptr<Job> ready;
    Hypotheses answer;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (s >= where_.size() || told_[s]) return;
      told_[s] = 1;
      const auto [j, i] = where_[s];
      if (missing_[j] == 0) return;  // answered with an error already
      searching_tokens_ -= int64_t(jobs_[j]->sources[i].size()) + 1;
      answers_[j][i] = std::move(hypotheses);
      if (--missing_[j] > 0) return;
      // Answered: the batch lets go of the job (and what its done holds: a connection), even while it runs on.
      ready = std::move(jobs_[j]);
      answer = std::move(answers_[j]);
    }
    ready->done(std::move(answer), "");
  }

  // Whether batch sentence `s` is to be given up on: its job's client left or its deadline passed. The job is
  // then answered with that error at once (its other sentences are given up on at their next step too).
  bool abandoned(size_t s) {
    std::shared_ptr<Job> job;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (s >= where_.size()) return false;
      const size_t j = where_[s].first;
      // Its job answered with an error: every sentence of it still searching is given up on, not just the one
      // that found out (a job answered whole has no sentence searching).
      if (missing_[j] == 0) return true;
      if (told_[s]) return false;
      job = jobs_[j];
    }
    const std::string why = job->abandoned();
    if (why.empty()) return false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const size_t j = where_[s].first;
      if (missing_[j] == 0) return true;
      missing_[j] = 0;
      for (size_t i = 0; i < where_.size(); ++i) {
        if (where_[i].first == j && !told_[i]) {
          told_[i] = 1;
          searching_tokens_ -= int64_t(jobs_[j]->sources[where_[i].second].size()) + 1;
        }
      }
      jobs_[j].reset();  // `job` answers it below
    }
    job->done({}, why);
    return true;
  }

  // Everything not yet told: from the run's result, or the error for every job still waiting.
  void finish(Hypotheses results, const std::string& error) {
    if (error.empty()) {
      for (size_t s = 0; s < results.size(); ++s) give(s, std::move(results[s]));
    }
    std::vector<std::shared_ptr<Job>> failed;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t j = 0; j < jobs_.size(); ++j) {
        if (missing_[j] > 0) {
          missing_[j] = 0;
          failed.push_back(std::move(jobs_[j]));
        }
      }
    }
    for (const auto& job : failed) job->done({}, error.empty() ? "the translator gave no result" : error);
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<Job>> jobs_;        // null once answered
  std::vector<Hypotheses> answers_;               // per job, per sentence
  std::vector<size_t> missing_;                   // per job: sentences not yet told
  std::vector<std::pair<size_t, size_t>> where_;  // per batch sentence: (job, its sentence)
  std::vector<uint8_t> told_;                     // per batch sentence
  int64_t searching_tokens_ = 0;
};

BatchRecord record_of(const std::vector<std::shared_ptr<Job>>& jobs, bool joined, int64_t batch_jobs) {
  BatchRecord r;
  r.jobs = int64_t(jobs.size());
  r.joined = joined;
  r.batch_jobs = batch_jobs;
  for (const auto& job : jobs) {
    r.sentences += int64_t(job->sources.size());
    r.tokens += job->tokens();
  }
  return r;
}

}  // namespace

std::vector<std::shared_ptr<Job>> Batcher::take(const BatchKey& key, int64_t share, int64_t room) {
  std::vector<std::shared_ptr<Job>> taken;
  int64_t tokens = 0;
  for (auto it = queue_.begin(); it != queue_.end() && int64_t(taken.size()) < share;) {
    const int64_t t = (*it)->tokens();
    if ((*it)->key == key && tokens + t <= room) {
      tokens += t;
      queued_ -= int64_t((*it)->sources.size());
      taken.push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  return taken;
}

// Requests whose clients went away, or whose deadline passed, while they waited are answered without translating.
static std::vector<std::shared_ptr<Job>> drop_gone(std::vector<std::shared_ptr<Job>> jobs) {
  std::vector<std::shared_ptr<Job>> live;
  for (auto& job : jobs) {
    if (const std::string why = job->abandoned(); !why.empty()) {
      job->done({}, why);
    } else {
      live.push_back(std::move(job));
    }
  }
  return live;
}

void Batcher::run_batch(const BatchKey& key, std::vector<std::shared_ptr<Job>> jobs) {
  jobs = drop_gone(std::move(jobs));
  if (jobs.empty()) return;
  Replies replies;
  const std::vector<std::vector<int32_t>> sources = replies.add(jobs);
  int64_t batch_jobs = int64_t(jobs.size());
  if (on_batch_) on_batch_(record_of(jobs, false, batch_jobs));
  jobs.clear();  // `replies` holds them until each is answered
  if (sources.empty()) return;
  // Joining a running batch: only while no batch thread is idle (an idle one starts a batch of its own) and the
  // search has drained below join_below sentences, up to the token budget of the sentences still searching.
  int64_t admitted = int64_t(sources.size());
  const AdmitSources admit = [&](int64_t searching) -> std::vector<std::vector<int32_t>> {
    // A batch that has taken in its share ends with what it has, and the next starts afresh: what a search keeps
    // per sentence it has seen (its results, the replies' bookkeeping) stays bounded under any load.
    if (!options_.continuous || searching >= options_.join_below || admitted >= options_.max_joined_sentences) {
      return {};
    }
    if (options_.outstanding && options_.join_max_in_flight > 0 &&
        options_.outstanding() > options_.join_max_in_flight * std::max(1, options_.threads)) {
      return {};
    }
    std::vector<std::shared_ptr<Job>> joining;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (idle_ > 0 || queue_.empty()) return {};
      const int64_t room = options_.max_batch_tokens - replies.searching_tokens();
      // The oldest request goes first once its wait is over: while it is another key's, or does not fit, this
      // batch takes nothing more and ends with the sentences it has.
      const auto& oldest = queue_.front();
      if ((!(oldest->key == key) || oldest->tokens() > room) &&
          std::chrono::steady_clock::now() >= oldest->arrived + std::chrono::milliseconds(options_.max_wait_ms)) {
        return {};
      }
      // Requests join once as many sentences wait as are still searching (any, when none are): the encoder then
      // runs on several at once, and each join (fresh rows, the memory appended, every row's cache gathered) is
      // paid for many sentences, not one or two.
      int64_t waiting = 0;
      for (const auto& j : queue_) waiting += j->key == key ? int64_t(j->sources.size()) : 0;
      if (room <= 0 || waiting < std::max<int64_t>(1, searching)) return {};
      joining = take(key, int64_t(queue_.size()), room);
    }
    joining = drop_gone(std::move(joining));
    if (joining.empty()) return {};
    std::vector<std::vector<int32_t>> sources_joining = replies.add(joining);
    admitted += int64_t(sources_joining.size());
    batch_jobs += int64_t(joining.size());
    if (on_batch_) on_batch_(record_of(joining, true, batch_jobs));
    return sources_joining;
  };
  Hypotheses results;
  std::string error;
  try {
    results = run_(
        key, sources, [&replies](int64_t s, const std::vector<decode::Hypothesis>& h) { replies.give(size_t(s), h); },
        admit, [&replies](int64_t s) { return replies.abandoned(size_t(s)); },
        [&replies](int64_t s) { return replies.controls(size_t(s)); });
  } catch (const std::exception& e) {
    error = bundle::short_what(e);
  }
  replies.finish(std::move(results), error);
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
             (options_.eager && options_.outstanding && int64_t(queue_.size()) >= options_.outstanding());
    });
    --idle_;
    if (queue_.empty()) continue;  // another batch thread took it
    // Take the (current) oldest job's key, in arrival order while they fit (the first always does); with other
    // batch threads idle, only this thread's share of them.
    const BatchKey key_taken = queue_.front()->key;
    int64_t same = 0;
    for (const auto& j : queue_) same += j->key == key_taken;
    const int64_t share = (same + idle_) / (idle_ + 1);
    const int64_t first = queue_.front()->tokens();  // always fits: a larger request goes alone
    std::vector<std::shared_ptr<Job>> batch = take(key_taken, share, std::max(first, options_.max_batch_tokens));
    if (!queue_.empty()) wake_.notify_one();  // the rest: another batch thread's
    lock.unlock();
    run_batch(key_taken, std::move(batch));
    lock.lock();
  }
}

}  // namespace mtx::serve
