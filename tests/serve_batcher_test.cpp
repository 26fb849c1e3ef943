// mtx serve's cross-request batcher (serve/batcher.h) on its own, with stand-in searches: requests pooled into
// batches, continuous batching's joins, answers as their sentences finish, the queue limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mtx/serve/batcher.h"

using namespace mtx;
using namespace std::chrono_literals;

namespace {

serve::Hypotheses echo(const serve::BatchKey&, const std::vector<std::vector<int32_t>>& sources,
                       const decode::SentenceDone& = {}, const serve::Batcher::AdmitSources& = {},
                       const decode::Abandoned& = {}, const serve::Batcher::ControlsOf& = {}) {
  serve::Hypotheses out;
  for (const auto& s : sources) out.push_back({decode::Hypothesis{s, 0, 0}});
  return out;
}

std::shared_ptr<serve::Job> job_of(std::vector<std::vector<int32_t>> sources, std::promise<serve::Hypotheses>& result,
                                   std::string model = "m") {
  auto job = std::make_shared<serve::Job>();
  job->key.model = std::move(model);
  job->sources = std::move(sources);
  job->done = [&result](serve::Hypotheses h, const std::string& error) {
    if (error.empty()) {
      result.set_value(std::move(h));
    } else {
      result.set_exception(std::make_exception_ptr(std::runtime_error(error)));
    }
  };
  return job;
}

// Sets a promise when it goes out of scope unless told it was set: a failed assertion must not leave a batch thread
// waiting on it (the Batcher's destructor would wait for that thread). Declare it after the Batcher.
struct SetOnExit {
  std::promise<void>& promise;
  bool set = false;
  void operator()() {
    set = true;
    promise.set_value();
  }
  ~SetOnExit() {
    if (!set) promise.set_value();
  }
};

}  // namespace

TEST(ServeBatcher, PoolsConcurrentRequestsAndKeepsEachResultWithItsRequest) {
  std::vector<serve::BatchRecord> batches;
  std::mutex m;
  serve::BatcherOptions o;
  o.max_wait_ms = 200;
  serve::Batcher batcher(o, echo, [&](const serve::BatchRecord& r) {
    std::lock_guard<std::mutex> lock(m);
    batches.push_back(r);
  });
  std::promise<serve::Hypotheses> a, b, c;
  ASSERT_TRUE(batcher.submit(job_of({{5, 6}, {7}}, a)));
  ASSERT_TRUE(batcher.submit(job_of({{8, 9, 10}}, b)));
  ASSERT_TRUE(batcher.submit(job_of({{11}}, c, "other")));  // another model: its own batch
  const serve::Hypotheses ra = a.get_future().get(), rb = b.get_future().get(), rc = c.get_future().get();
  ASSERT_EQ(ra.size(), 2u);
  EXPECT_EQ(ra[0][0].tokens, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(ra[1][0].tokens, (std::vector<int32_t>{7}));
  EXPECT_EQ(rb[0][0].tokens, (std::vector<int32_t>{8, 9, 10}));
  EXPECT_EQ(rc[0][0].tokens, (std::vector<int32_t>{11}));
  std::lock_guard<std::mutex> lock(m);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].jobs, 2);
  EXPECT_EQ(batches[0].sentences, 3);
  EXPECT_EQ(batches[0].tokens, 3 + 2 + 4);
  EXPECT_EQ(batches[1].jobs, 1);
}

// Two batch threads: the queued requests are shared out between them, and each result still goes to its request.
TEST(ServeBatcher, TwoBatchThreadsShareTheQueueAndKeepEachResultWithItsRequest) {
  std::mutex m;
  std::vector<serve::BatchRecord> batches;
  std::set<std::thread::id> threads;
  serve::BatcherOptions o;
  o.max_wait_ms = 100;
  o.threads = 2;
  serve::Batcher batcher(
      o,
      [&](const serve::BatchKey& k, const auto& s, const auto&, const auto&, const auto&, const auto&) {
        {
          std::lock_guard<std::mutex> lock(m);
          threads.insert(std::this_thread::get_id());
        }
        std::this_thread::sleep_for(30ms);  // long enough for the other thread to take its share
        return echo(k, s);
      },
      [&](const serve::BatchRecord& r) {
        std::lock_guard<std::mutex> lock(m);
        batches.push_back(r);
      });
  std::vector<std::promise<serve::Hypotheses>> results(40);
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(batcher.submit(job_of({{i, i + 1}}, results[size_t(i)])));
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(results[size_t(i)].get_future().get()[0][0].tokens, (std::vector<int32_t>{i, i + 1}));
  }
  std::lock_guard<std::mutex> lock(m);
  EXPECT_EQ(threads.size(), 2u);
  int64_t jobs = 0;
  for (const auto& r : batches) jobs += r.jobs;
  EXPECT_EQ(jobs, 40);
  EXPECT_GE(batches.size(), 2u);
}

// A request is answered as soon as its own sentences are done, while the rest of its batch still runs; what the
// run returns fills in the sentences it did not tell of, and a failing run fails only the requests still waiting.
TEST(ServeBatcher, ARequestIsAnsweredWhenItsSentencesAreDoneNotWhenItsBatchIs) {
  serve::BatcherOptions o;
  o.max_wait_ms = 200;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  bool fail = false;
  serve::Batcher batcher(o, [&](const serve::BatchKey& k, const auto& s, const decode::SentenceDone& finished,
                                const auto&, const auto&, const auto&) {
    const serve::Hypotheses all = echo(k, s);
    finished(2, all[2]);  // the first job's two sentences, in any order
    finished(1, all[1]);
    finished(1, all[1]);  // a repeat is ignored
    released.wait();      // the batch goes on
    if (fail) throw std::runtime_error("the model broke");
    return all;
  });
  SetOnExit let_go{release};
  std::promise<serve::Hypotheses> a, b;
  ASSERT_TRUE(batcher.submit(job_of({{5}}, a)));
  ASSERT_TRUE(batcher.submit(job_of({{6}, {7}}, b)));
  auto fb = b.get_future();
  ASSERT_EQ(fb.wait_for(5s), std::future_status::ready);  // answered while its batch still runs
  const serve::Hypotheses rb = fb.get();
  ASSERT_EQ(rb.size(), 2u);
  EXPECT_EQ(rb[0][0].tokens, (std::vector<int32_t>{6}));
  EXPECT_EQ(rb[1][0].tokens, (std::vector<int32_t>{7}));
  auto fa = a.get_future();
  EXPECT_EQ(fa.wait_for(50ms), std::future_status::timeout);
  fail = true;
  let_go();
  EXPECT_THROW(fa.get(), std::runtime_error);  // the unfinished request gets the run's error
}

// Continuous batching: while every batch thread is busy, a running batch takes in queued requests with its key
// (not another model's, not past the token budget, not a client that left), and each answer goes to its request.
// Once the oldest queued request has waited out max_wait_ms and is another key's, the batch takes nothing more.
TEST(ServeBatcher, ARunningBatchTakesInRequestsWithItsKeyWhileEveryThreadIsBusy) {
  enum class Mode { continuous, off, oldest_waited };
  for (const Mode mode : {Mode::continuous, Mode::off, Mode::oldest_waited}) {
    serve::BatcherOptions o;
    // A batch of 6 tokens starts at once. Continuous: the other model's request waits long enough not to stop the
    // joining; otherwise every batch starts without waiting.
    o.max_wait_ms = mode == Mode::continuous ? 60000 : 0;
    o.max_batch_tokens = 6;  // source tokens still searching, EOS included
    o.continuous = mode != Mode::off;
    std::promise<void> queued;
    std::shared_future<void> ready = queued.get_future().share();
    std::mutex m;
    std::vector<std::vector<std::vector<int32_t>>> joined;  // per call of `admit`, what joined
    std::vector<serve::BatchRecord> records;
    serve::Batcher batcher(
        o,
        [&](const serve::BatchKey& k, const auto& s, const decode::SentenceDone& finished,
            const serve::Batcher::AdmitSources& admit, const auto&, const auto&) {
          serve::Hypotheses all = echo(k, s);
          if (k.model != "m" || s[0][0] != 9) return all;
          ready.wait();
          // The first batch's sentence ends, so 6 tokens have room: {1, 2} (3) joins; {3, 4, 5, 6} (5) does not fit
          // then, but does once {1, 2} is done too.
          finished(0, all[0]);
          for (int step = 0; step < 3; ++step) {
            const auto admitted = admit(1);
            {
              std::lock_guard<std::mutex> lock(m);
              joined.push_back(admitted);
            }
            for (const auto& src : admitted) {
              all.push_back({decode::Hypothesis{src, 0, 0}});
              finished(int64_t(all.size()) - 1, all.back());
            }
          }
          return all;
        },
        [&](const serve::BatchRecord& r) {
          std::lock_guard<std::mutex> lock(m);
          records.push_back(r);
        });
    SetOnExit go{queued};
    std::promise<serve::Hypotheses> a, b, c, d, e;
    ASSERT_TRUE(batcher.submit(job_of({{9, 9, 9, 9, 9}}, a)));
    while (batcher.queued_sentences() > 0) std::this_thread::sleep_for(1ms);  // the batch has started
    if (mode == Mode::oldest_waited) {
      ASSERT_TRUE(batcher.submit(job_of({{7, 7, 7, 7, 7}}, c, "other")));
    }
    ASSERT_TRUE(batcher.submit(job_of({{1, 2}}, b)));
    if (mode != Mode::oldest_waited) {
      ASSERT_TRUE(batcher.submit(job_of({{7, 7, 7, 7, 7}}, c, "other")));
    }
    auto left = job_of({{8}}, d);
    left->gone = [] { return true; };
    ASSERT_TRUE(batcher.submit(left));
    ASSERT_TRUE(batcher.submit(job_of({{3, 4, 5, 6}}, e)));
    go();
    EXPECT_EQ(a.get_future().get()[0][0].tokens, (std::vector<int32_t>{9, 9, 9, 9, 9}));
    EXPECT_EQ(b.get_future().get()[0][0].tokens, (std::vector<int32_t>{1, 2}));
    EXPECT_EQ(c.get_future().get()[0][0].tokens, (std::vector<int32_t>{7, 7, 7, 7, 7}));
    EXPECT_THROW(d.get_future().get(), std::runtime_error);  // the client went away
    EXPECT_EQ(e.get_future().get()[0][0].tokens, (std::vector<int32_t>{3, 4, 5, 6}));
    batcher.stop();
    std::lock_guard<std::mutex> lock(m);
    int64_t joined_jobs = 0, most = 0;
    for (const auto& r : records) {
      joined_jobs += r.joined ? r.jobs : 0;
      most = std::max(most, r.batch_jobs);
    }
    // The first batch started with one request; with those that joined it, it held three.
    EXPECT_EQ(most, mode == Mode::continuous ? 3 : 1);
    if (mode != Mode::continuous) {
      EXPECT_EQ(joined_jobs, 0);
      for (const auto& j : joined) EXPECT_TRUE(j.empty());
      continue;
    }
    EXPECT_EQ(joined_jobs, 2);
    ASSERT_EQ(joined.size(), 3u);
    EXPECT_EQ(joined[0], (std::vector<std::vector<int32_t>>{{1, 2}}));
    EXPECT_EQ(joined[1], (std::vector<std::vector<int32_t>>{{3, 4, 5, 6}}));
    EXPECT_TRUE(joined[2].empty());
  }
}

// Under load a running batch takes nothing in while join_below or more of its sentences are still searching
// (it runs as it started), and fills up again once it has drained below that.
TEST(ServeBatcher, ARunningBatchJoinsOnlyOnceDrainedBelowJoinBelow) {
  serve::BatcherOptions o;
  o.max_wait_ms = 0;  // the batch starts at once
  o.join_below = 3;
  std::promise<void> queued;
  std::shared_future<void> ready = queued.get_future().share();
  std::vector<std::vector<std::vector<int32_t>>> joined;  // per call of `admit`, with 4, 3 and then 2 searching
  serve::Batcher batcher(o, [&](const serve::BatchKey& k, const auto& s, const decode::SentenceDone& finished,
                                const serve::Batcher::AdmitSources& admit, const auto&, const auto&) {
    serve::Hypotheses all = echo(k, s);
    if (s[0][0] != 9) return all;
    ready.wait();
    for (const int64_t searching : {4, 3, 2}) {
      const auto admitted = admit(searching);
      joined.push_back(admitted);
      for (const auto& src : admitted) {
        all.push_back({decode::Hypothesis{src, 0, 0}});
        finished(int64_t(all.size()) - 1, all.back());
      }
    }
    return all;
  });
  SetOnExit go{queued};
  std::promise<serve::Hypotheses> a, b;
  ASSERT_TRUE(batcher.submit(job_of({{9, 9}}, a)));
  while (batcher.queued_sentences() > 0) std::this_thread::sleep_for(1ms);  // the batch has started
  ASSERT_TRUE(batcher.submit(job_of({{1, 2}, {3}, {4}, {5}, {6}}, b)));     // as many waiting as searching, and more
  go();
  EXPECT_EQ(a.get_future().get()[0][0].tokens, (std::vector<int32_t>{9, 9}));
  EXPECT_EQ(b.get_future().get()[4][0].tokens, (std::vector<int32_t>{6}));
  batcher.stop();
  ASSERT_EQ(joined.size(), 3u);
  EXPECT_TRUE(joined[0].empty()) << "4 searching";
  EXPECT_TRUE(joined[1].empty()) << "3 searching";
  EXPECT_EQ(joined[2], (std::vector<std::vector<int32_t>>{{1, 2}, {3}, {4}, {5}, {6}})) << "2 searching";
}

// Under heavier load (more than join_max_in_flight requests in flight per batch thread) a running batch takes
// nothing in, however few of its sentences are still searching: the next batch starts afresh instead. It joins
// again once the load is light.
TEST(ServeBatcher, ARunningBatchJoinsOnlyWhileFewRequestsAreInFlight) {
  serve::BatcherOptions o;
  o.max_wait_ms = 0;
  o.join_below = 100;
  o.join_max_in_flight = 3;
  o.threads = 2;  // at most 6 in flight
  std::atomic<int64_t> in_flight{0};
  o.outstanding = [&] { return in_flight.load(); };
  o.eager = false;
  std::promise<void> queued;
  std::shared_future<void> ready = queued.get_future().share();
  std::promise<void> other_started;
  std::shared_future<void> other_running = other_started.get_future().share();
  std::atomic<bool> joins_asked{false};  // the second batch runs until then: no batch thread is idle meanwhile
  std::vector<std::vector<std::vector<int32_t>>> joined;  // per call of `admit`: 7 in flight, then 6
  serve::Batcher batcher(o, [&](const serve::BatchKey& k, const auto& s, const decode::SentenceDone& finished,
                                const serve::Batcher::AdmitSources& admit, const auto&, const auto&) {
    serve::Hypotheses all = echo(k, s);
    if (s[0][0] == 8) {  // keeps the second batch thread busy, so that the first may join
      other_started.set_value();
      while (!joins_asked) std::this_thread::sleep_for(1ms);
      return all;
    }
    if (s[0][0] != 9) return all;
    ready.wait();
    for (const int64_t load : {7, 6}) {
      in_flight = load;
      const auto admitted = admit(1);
      joined.push_back(admitted);
      for (const auto& src : admitted) {
        all.push_back({decode::Hypothesis{src, 0, 0}});
        finished(int64_t(all.size()) - 1, all.back());
      }
    }
    joins_asked = true;
    return all;
  });
  SetOnExit go{queued};
  struct LetGo {
    std::atomic<bool>& flag;
    ~LetGo() { flag = true; }
  } let_go{joins_asked};
  std::promise<serve::Hypotheses> a, b, c;
  ASSERT_TRUE(batcher.submit(job_of({{9, 9}}, a)));
  while (batcher.queued_sentences() > 0) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(batcher.submit(job_of({{8}}, c)));
  other_running.wait();
  ASSERT_TRUE(batcher.submit(job_of({{1, 2}}, b)));
  go();
  EXPECT_EQ(a.get_future().get()[0][0].tokens, (std::vector<int32_t>{9, 9}));
  EXPECT_EQ(b.get_future().get()[0][0].tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(c.get_future().get()[0][0].tokens, (std::vector<int32_t>{8}));
  batcher.stop();
  ASSERT_EQ(joined.size(), 2u);
  EXPECT_TRUE(joined[0].empty()) << "7 requests in flight, 2 batch threads";
  EXPECT_EQ(joined[1], (std::vector<std::vector<int32_t>>{{1, 2}})) << "6 requests in flight";
}

// A running batch (continuous batching keeps one running for as long as requests come) lets go of each request
// once it is answered: what its done holds (in the server, the connection) is freed then, not when the batch ends.
TEST(ServeBatcher, AnAnsweredRequestIsLetGoWhileItsBatchRunsOn) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> answered;
  serve::Batcher batcher({}, [&](const serve::BatchKey& k, const auto& s, const decode::SentenceDone& finished,
                                 const auto&, const auto&, const auto&) {
    const serve::Hypotheses all = echo(k, s);
    finished(0, all[0]);
    released.wait();  // the batch goes on
    return all;
  });
  SetOnExit set_on_exit{release};
  auto held = std::make_shared<int>(7);  // stands for the connection a request's done holds
  const std::weak_ptr<int> watch = held;
  auto job = std::make_shared<serve::Job>();
  job->key.model = "m";
  job->sources = {{1, 2}};
  job->done = [held = std::move(held), &answered](serve::Hypotheses, const std::string&) { answered.set_value(); };
  ASSERT_TRUE(batcher.submit(std::move(job)));
  answered.get_future().wait();
  for (int i = 0; i < 100 && !watch.expired(); ++i) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(watch.expired()) << "the running batch still holds an answered request";
  set_on_exit();
}

TEST(ServeBatcher, RefusesPastTheQueueLimitAndSkipsRequestsWhoseClientLeft) {
  std::atomic<int> translated{0};
  serve::BatcherOptions o;
  o.max_queue = 3;
  o.max_wait_ms = 300;
  serve::Batcher batcher(
      o, [&](const serve::BatchKey& k, const auto& s, const auto&, const auto&, const auto&, const auto&) {
        translated += int(s.size());
        return echo(k, s);
      });
  std::promise<serve::Hypotheses> a, b, c;
  auto left = job_of({{1}, {2}}, a);
  left->gone = [] { return true; };
  ASSERT_TRUE(batcher.submit(left));
  EXPECT_FALSE(batcher.submit(job_of({{3}, {4}}, b)));  // 2 + 2 > 3
  EXPECT_EQ(batcher.queued_sentences(), 2);
  ASSERT_TRUE(batcher.submit(job_of({{5}}, c)));
  EXPECT_THROW(a.get_future().get(), std::runtime_error);  // "the client went away"
  EXPECT_EQ(c.get_future().get()[0][0].tokens, (std::vector<int32_t>{5}));
  EXPECT_EQ(translated.load(), 1);
  batcher.stop();
  std::promise<serve::Hypotheses> d;
  EXPECT_FALSE(batcher.submit(job_of({{6}}, d)));
}

// A client that leaves while its request's sentences are searching: every one of them is given up on at the
// search's next look, not only the one whose look found out (the others searched on to their end, a whole
// request's worth of work for nobody, while later requests waited).
TEST(ServeBatcher, EverySentenceOfARequestWhoseClientLeftIsGivenUpOn) {
  std::atomic<bool> left{false};
  std::vector<int> given_up(4, 0);
  serve::BatcherOptions o;
  o.max_wait_ms = 0;
  serve::Batcher batcher(o, [&](const serve::BatchKey& k, const auto& s, const auto&, const auto&,
                                const decode::Abandoned& abandoned, const auto&) {
    // A search's steps: each asks about every sentence still searching; the client leaves after the first.
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < s.size(); ++i) {
        if (!given_up[i] && abandoned(int64_t(i))) given_up[i] = step + 1;
      }
      left = true;
      std::this_thread::sleep_for(5ms);  // past the few milliseconds between looks at the socket
    }
    return echo(k, s);
  });
  std::promise<serve::Hypotheses> result;
  auto job = job_of({{1}, {2}, {3}, {4}}, result);
  job->gone = [&left] { return left.load(); };
  ASSERT_TRUE(batcher.submit(job));
  EXPECT_THROW(result.get_future().get(), std::runtime_error);  // "the client went away"
  batcher.stop();
  EXPECT_EQ(given_up, (std::vector<int>{2, 2, 2, 2}));  // all at the step after it left
}
