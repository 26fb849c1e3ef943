// mtx serve: the batcher alone, then the server in this process (port 0) spoken to over real sockets, and the
// binary's SIGTERM drain.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "mtx/bundle/bundle.h"
#include "mtx/data/prepare.h"
#include "mtx/decode/scoring.h"
#include "mtx/serve/batcher.h"
#include "mtx/serve/server.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/system.h"
#include "test_utils.h"

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;
namespace fs = std::filesystem;
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

struct Reply {
  int status = 0;
  std::string body;
  std::string retry_after;
  std::map<std::string, std::string> headers;  // lower-case names
};

// One HTTP/1.1 exchange on a fresh connection (60 s at most: a server that stops answering fails the test, it
// does not hang it). `headers` are added to Host and Content-Type (application/json unless given).
Reply call(int port, http::verb verb, const std::string& target, const std::string& body = "",
           const std::map<std::string, std::string>& headers = {}) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  for (const auto& [name, value] : headers) {
    if (value.empty())
      req.erase(name);
    else
      req.set(name, value);
  }
  req.body() = body;
  req.prepare_payload();
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1 << 26);
  if (verb == http::verb::head) parser.skip(true);
  // Asynchronous, so that the 60 s bound holds (Beast's timeouts bound asynchronous operations only).
  beast::error_code failed;
  bool read = false;
  stream.expires_after(60s);
  stream.async_connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)),
                       [&](beast::error_code ec) {
                         if (ec) return void(failed = ec);
                         http::async_write(stream, req, [&](beast::error_code e, size_t) {
                           if (e) return void(failed = e);
                           http::async_read(stream, buffer, parser, [&](beast::error_code e2, size_t) {
                             failed = e2;
                             read = !e2;
                           });
                         });
                       });
  ioc.run();
  if (!read) throw std::runtime_error("no answer from the server: " + failed.message());
  const auto& res = parser.get();
  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  Reply r{int(res.result_int()), res.body(), std::string(res[http::field::retry_after]), {}};
  for (const auto& f : res) {
    std::string name(f.name_string());
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    r.headers[name] = std::string(f.value());
  }
  return r;
}

// A raw connection: bytes out, whatever comes back until the server closes or `wait` passes.
class Raw {
 public:
  explicit Raw(int port) : stream_(ioc_) {
    stream_.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  }
  void send(const std::string& bytes) { net::write(stream_.socket(), net::buffer(bytes)); }
  std::string read_all(std::chrono::milliseconds wait) {
    std::string out;
    char buf[4096];
    stream_.expires_after(wait);  // asynchronous reads: the bound holds
    std::function<void(beast::error_code, size_t)> more = [&](beast::error_code ec, size_t n) {
      out.append(buf, n);
      if (!ec) stream_.async_read_some(net::buffer(buf), more);
    };
    stream_.async_read_some(net::buffer(buf), more);
    ioc_.restart();
    ioc_.run();
    return out;
  }
  void close() {
    beast::error_code ec;
    stream_.socket().close(ec);
  }

 private:
  net::io_context ioc_;
  beast::tcp_stream stream_;
};

int open_fds() {
  return int(
      std::distance(std::filesystem::directory_iterator("/proc/self/fd"), std::filesystem::directory_iterator{}));
}

Reply post(int port, const json& body) { return call(port, http::verb::post, "/v1/translate", body.dump()); }

// The metric's value in a /metrics text (-1: absent).
double metric(const std::string& text, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(
          text, m,
          std::regex("\\n" + std::regex_replace(name, std::regex(R"([{}\"])"), R"(\$&)") + " ([0-9.e+-]+)\\n"))) {
    return -1;
  }
  return std::stod(m[1].str());
}

}  // namespace

// A toy model (random weights, the toy corpus's tokenizer), served in this process on a free port (outside the
// anonymous namespace: gtest's test classes derive from it).
class ServeTest : public ::testing::Test {
 protected:
  void start(serve::ServerOptions options) {
    config::Config config = test::toy_setup(tmp);
    tokenizer::Tokenizer tok = data::prepare_data(config).tokenizer;
    torch::manual_seed(3);
    bundle::Bundle b;
    b.config = config;
    b.tokenizer = tok;
    b.model = bundle::build_model(config, tok);
    b.model->eval();
    b.path = tmp / "toy.pt";
    options.port = 0;
    std::vector<serve::ServedModel> models;
    models.push_back({"toy", std::move(b), "none"});
    server = std::make_unique<serve::Server>(std::move(models), options);
    std::promise<int> bound;
    thread = std::thread([&] { server->run([&](int p) { bound.set_value(p); }); });
    port = bound.get_future().get();
  }
  void TearDown() override {
    if (server) server->stop();
    if (thread.joinable()) thread.join();
  }
  test::TempDir tmp;
  std::unique_ptr<serve::Server> server;
  std::thread thread;
  int port = 0;
};

namespace {

const std::vector<std::string> kSentences = {
    "ein Hund läuft",           "zwei Männer spielen Fußball im Park heute", "Kinder",
    "eine Frau liest ein Buch", "ein Mann fährt Fahrrad und ein Hund läuft", "ein Hund"};

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

TEST_F(ServeTest, AnswersTheApiAndNamesEveryBadRequest) {
  serve::ServerOptions o;
  o.api.max_request_bytes = 2000;
  start(o);
  EXPECT_EQ(call(port, http::verb::get, "/health").body, "{\"status\":\"ok\"}\n");
  const json models = json::parse(call(port, http::verb::get, "/v1/models").body);
  EXPECT_EQ(models["default"], "toy");
  EXPECT_EQ(models["models"][0]["direction"], "de-en");
  EXPECT_EQ(models["models"][0]["quantization"], "none");
  EXPECT_NE(call(port, http::verb::get, "/").body.find("<textarea"), std::string::npos);

  // String in: one object out; a list: one each, in order; nbest and scores on request.
  Reply r = post(port, {{"text", kSentences[0]}, {"scores", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  ASSERT_EQ(j["translations"].size(), 1u);
  EXPECT_TRUE(j["translations"][0]["text"].is_string());
  EXPECT_TRUE(j["translations"][0]["score"].is_number());
  EXPECT_EQ(j["model"], "toy");
  // Greedy skips the scores' normalisation only where nobody asked for them.
  r = post(port, {{"text", kSentences[0]}, {"scores", true}, {"beam", 1}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(json::parse(r.body)["translations"][0]["score"].is_number()) << r.body;
  // Alignments: one "src-tgt" pair per target word.
  r = post(port, {{"text", kSentences[4]}, {"alignment", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  j = json::parse(r.body)["translations"][0];
  const std::string text = j["text"], pairs = j["alignment"];
  std::istringstream text_words(text);
  const auto words = std::distance(std::istream_iterator<std::string>(text_words), {});
  EXPECT_EQ(std::count(pairs.begin(), pairs.end(), '-'), words) << text << " ||| " << pairs;
  r = post(port, {{"text", kSentences}, {"beam", 3}, {"nbest", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  j = json::parse(r.body);
  ASSERT_EQ(j["translations"].size(), kSentences.size());
  for (const auto& t : j["translations"]) {
    ASSERT_EQ(t["nbest"].size(), 2u);
    EXPECT_EQ(t["nbest"][0]["text"], t["text"]);
    EXPECT_FALSE(t.contains("score"));
  }

  // A target prefix per sentence: the translation starts with it, the same alone as in a list.
  const Reply prefixed = post(port, {{"text", {kSentences[0], kSentences[2]}}, {"target_prefix", {"a dog", ""}}});
  ASSERT_EQ(prefixed.status, 200) << prefixed.body;
  j = json::parse(prefixed.body);
  const std::string with_prefix = j["translations"][0]["text"];
  EXPECT_EQ(with_prefix.rfind("a dog", 0), 0u) << with_prefix;
  EXPECT_EQ(j["translations"][1]["text"],
            json::parse(post(port, {{"text", kSentences[2]}}).body)["translations"][0]["text"]);
  const Reply alone = post(port, {{"text", kSentences[0]}, {"target_prefix", "a dog"}});
  EXPECT_EQ(json::parse(alone.body)["translations"][0]["text"], with_prefix);

  // Constraints: a list of phrases for a string, a list of lists for a list; the translations hold them, and a
  // line's translation is the same alone.
  const Reply constrained =
      post(port, {{"text", {kSentences[0], kSentences[2]}}, {"constraints", {{"green"}, json::array()}}, {"beam", 3}});
  ASSERT_EQ(constrained.status, 200) << constrained.body;
  j = json::parse(constrained.body);
  const std::string with_term = j["translations"][0]["text"];
  EXPECT_NE(with_term.find("green"), std::string::npos) << with_term;
  EXPECT_EQ(json::parse(post(port, {{"text", kSentences[0]}, {"constraints", {"green"}}, {"beam", 3}})
                            .body)["translations"][0]["text"],
            with_term);
  EXPECT_EQ(j["translations"][1]["text"],
            json::parse(post(port, {{"text", kSentences[2]}, {"beam", 3}}).body)["translations"][0]["text"]);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{\"text\": \"ein Hund\", \"constraints\": \"dog\"}", "\"constraints\" must be a list of target phrases"},
      {"{\"text\": [\"ein Hund\"], \"constraints\": [\"dog\"]}", "\"constraints\" must be a list of 1 lists"},
      {"{\"text\": \"ein Hund\", \"constraints\": [\"dog\", 3]}", "\"constraints\"[1] is not a string"},
      {"{\"text\": \"ein Hund\", \"constraints\": [\"dog\"], \"beam\": 1, \"sampling_topk\": 0}", "not sampling"},
      {"{\"text\": \"ein Hund\", \"target_prefix\": [\"a\"]}", "\"target_prefix\" must be like \"text\""},
      {"{\"text\": [\"ein Hund\"], \"target_prefix\": [\"a\", \"b\"]}", "a list of 1 strings"},
      {"{\"text\": \"ein Hund\", \"target_prefix\": \"a\\nb\"}", "\"target_prefix\" holds a line break"},
      {"{\"text\": ", "invalid JSON"},
      {"[1, 2]", "JSON object"},
      {"{\"txt\": \"x\"}", "unknown field \"txt\""},
      {"{\"beam\": 2}", "\"text\" is missing"},
      {"{\"text\": 5}", "a string or a non-empty list"},
      {"{\"text\": []}", "a string or a non-empty list"},
      {"{\"text\": [\"a\", 3]}", "a string or a list of strings"},
      {"{\"text\": \"\"}", "\"text\" is empty"},
      {"{\"text\": [\"ein Hund\", \"   \"]}", "\"text\"[1] is empty"},
      {"{\"text\": \"\xff\xfe\"}", "invalid JSON"},  // JSON must be UTF-8 already
      {"{\"text\": \"a\\nb\"}", "line break"},
      {"{\"text\": \"ein Hund\", \"model\": \"nope\"}", "unknown model \"nope\" (serving: toy)"},
      {"{\"text\": \"ein Hund\", \"beam\": 0}", "\"beam\" must be in [1, 32]"},
      {"{\"text\": \"ein Hund\", \"beam\": 2, \"nbest\": 3}", "\"nbest\" must be in [1, 2]"},
      {"{\"text\": \"ein Hund\", \"alpha\": -1}", "\"alpha\" must be a number in [0, 100]"},
      {"{\"text\": \"ein Hund\", \"scores\": 1}", "\"scores\" must be true or false"},
      {"{\"text\": \"ein Hund\", \"alignment\": \"yes\"}", "\"alignment\" must be true or false"},
      // Keys are off here, yet a key field of the wrong type is still a bad request (schemathesis found it).
      {"{\"text\": \"ein Hund\", \"api_key\": false}", "\"api_key\" must be a string"},
  };
  for (const auto& [body, reason] : bad) {
    const Reply e = call(port, http::verb::post, "/v1/translate", body);
    EXPECT_EQ(e.status, 400) << body;
    const std::string error = json::parse(e.body).value("error", "");
    EXPECT_NE(error.find(reason), std::string::npos) << body << " -> " << e.body;
    EXPECT_EQ(std::count(e.body.begin(), e.body.end(), '\n'), 1) << "one line: " << e.body;
  }
  std::string many;
  for (int i = 0; i < 300; ++i) many += "Hund ";
  r = post(port, {{"text", many}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("pieces; the model takes at most"), std::string::npos) << r.body;
  r = post(port, {{"text", std::string(3000, 'a')}});
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_EQ(call(port, http::verb::get, "/nowhere").status, 404);
  EXPECT_EQ(call(port, http::verb::get, "/v1/translate").status, 405);
  // Still serving after all that.
  EXPECT_EQ(post(port, {{"text", kSentences[1]}}).status, 200);
  const std::string m = call(port, http::verb::get, "/metrics").body;
  EXPECT_EQ(metric(m, "mtx_requests_total{status=\"400\"}"), double(bad.size() + 1)) << m;
  EXPECT_EQ(metric(m, "mtx_requests_total{status=\"413\"}"), 1) << m;
  EXPECT_GE(metric(m, "mtx_sentences_total"), 1 + double(kSentences.size()) + 1) << m;
  if (heap_figures().known) {  // the allocator's figures, under tcmalloc
    EXPECT_GT(metric(m, "mtx_heap_allocated_bytes"), 0) << m;
    EXPECT_GE(metric(m, "mtx_heap_mapped_bytes"), metric(m, "mtx_heap_allocated_bytes")) << m;
    EXPECT_GE(metric(m, "mtx_heap_free_bytes"), 0) << m;
  }
}

// 128 clients at once, each sentence sent alone beforehand: every translation byte-identical, and requests did
// share batches (from /metrics).
TEST_F(ServeTest, ATranslationIsTheSameAloneOrAmong127OtherClients) {
  serve::ServerOptions o;
  o.batching.max_wait_ms = 20;
  o.batches = 2;  // each batch one search, which takes in requests while it runs (continuous batching)
  o.io_threads = 4;
  start(o);
  std::vector<std::string> alone;
  for (const auto& s : kSentences) {
    const Reply r = post(port, {{"text", s}});
    ASSERT_EQ(r.status, 200) << r.body;
    alone.push_back(json::parse(r.body)["translations"][0]["text"]);
  }
  std::vector<std::thread> clients;
  std::atomic<int> wrong{0}, failed{0};
  for (int c = 0; c < 128; ++c) {
    clients.emplace_back([&, c] {
      try {
        for (int k = 0; k < 2; ++k) {
          const size_t i = size_t(c + k) % kSentences.size();
          const Reply r = post(port, {{"text", kSentences[i]}});
          if (r.status != 200) {
            ++failed;
          } else if (json::parse(r.body)["translations"][0]["text"] != alone[i]) {
            ++wrong;
          }
        }
      } catch (const std::exception&) {
        ++failed;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  const std::string m = call(port, http::verb::get, "/metrics").body;
  EXPECT_GE(metric(m, "mtx_batch_requests_max"), 2) << m;
  EXPECT_EQ(metric(m, "mtx_requests_total{status=\"200\"}"), double(kSentences.size() + 256)) << m;
  EXPECT_EQ(metric(m, "mtx_queue_sentences"), 0);
}

TEST_F(ServeTest, AFullQueueAnswers429AndAClientThatLeftIsNotTranslated) {
  serve::ServerOptions o;
  o.batching.max_wait_ms = 400;
  o.batching.max_queue = 2;
  o.batching.eager = false;  // the requests wait: the first one's client leaves meanwhile
  start(o);
  // A client that sends and hangs up: its request waits for company, then is dropped untranslated.
  {
    net::io_context ioc;
    beast::tcp_stream stream(ioc);
    stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    http::request<http::string_body> req{http::verb::post, "/v1/translate", 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.body() = json{{"text", kSentences[0]}}.dump();
    req.prepare_payload();
    http::write(stream, req);
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream.socket().close(ec);
  }
  // Meanwhile two sentences fill the queue: a third request is refused.
  auto waiting = std::async(std::launch::async, [&] { return post(port, {{"text", {kSentences[1]}}}); });
  std::this_thread::sleep_for(50ms);
  const Reply full = post(port, {{"text", {kSentences[2], kSentences[3]}}});
  EXPECT_EQ(full.status, 429) << full.body;
  EXPECT_EQ(full.retry_after, "1");
  EXPECT_EQ(waiting.get().status, 200);
  const std::string m = call(port, http::verb::get, "/metrics").body;
  EXPECT_EQ(metric(m, "mtx_sentences_total"), 1) << m;  // the waiting one; not the one whose client left
  EXPECT_EQ(metric(m, "mtx_requests_total{status=\"429\"}"), 1) << m;
}

TEST_F(ServeTest, StoppingFinishesTheRequestsInFlight) {
  serve::ServerOptions o;
  o.batching.max_wait_ms = 300;
  o.batching.eager = false;  // the requests are still queued when the server is told to stop
  start(o);
  std::vector<std::future<Reply>> replies;
  for (size_t i = 0; i < kSentences.size(); ++i) {
    replies.push_back(std::async(std::launch::async, [&, i] { return post(port, {{"text", kSentences[i]}}); }));
  }
  std::this_thread::sleep_for(100ms);  // all queued, waiting for company
  server->stop();
  for (auto& r : replies) EXPECT_EQ(r.get().status, 200);
  thread.join();                                                         // run() returned
  EXPECT_THROW(call(port, http::verb::get, "/health"), std::exception);  // no longer listening
}

// The page in headless Chromium (Debian's chromium): the box filled and submitted (/?text=...), the translation in
// the DOM once the page's script has it, the same text the API gives.
TEST_F(ServeTest, ThePageTranslatesInHeadlessChromium) {
  if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
    const char* need = std::getenv("MTX_REQUIRE_CHROMIUM");
    if (need && *need == '1') FAIL() << "MTX_REQUIRE_CHROMIUM=1 but there is no chromium";
    GTEST_SKIP() << "no chromium (apt-get install chromium)";
  }
  start({});
  const std::string expected = json::parse(post(port, {{"text", kSentences[3]}}).body)["translations"][0]["text"];
  const std::string dom = (tmp / "dom.html").string();
  const std::string cmd = "chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir='" +
                          (tmp / "chromium").string() +
                          "' --virtual-time-budget=20000 --dump-dom 'http://127.0.0.1:" + std::to_string(port) +
                          "/?text=eine%20Frau%20liest%20ein%20Buch' > '" + dom + "' 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string html = read_file(dom);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(html, m, std::regex(R"(<div id="out" data-done="yes">([^<]*)</div>)"))) << html;
  std::string shown = m[1].str();  // as the DOM serialises text: & < > escaped
  for (const auto& [entity, c] : std::vector<std::pair<std::string, std::string>>{
           {"&lt;", "<"}, {"&gt;", ">"}, {"&nbsp;", "\u00a0"}, {"&amp;", "&"}}) {
    for (size_t at; (at = shown.find(entity)) != std::string::npos;) shown.replace(at, entity.size(), c);
  }
  EXPECT_EQ(shown, expected) << html;
  // The source (as typed into the box) word by word, and target words linked to source words for the hover.
  EXPECT_NE(html.find("<span class=\"w\">Frau</span>"), std::string::npos) << html;
  EXPECT_NE(html.find("data-src=\""), std::string::npos) << html;
}

// The binary: SIGTERM while a request is in flight; the request is answered and mtx exits 0.
TEST(Serve, SigtermDrainsAndExitsZero) {
  test::TempDir tmp;
  config::Config config = test::toy_setup(tmp);
  tokenizer::Tokenizer tok = data::prepare_data(config).tokenizer;
  model::Transformer model = bundle::build_model(config, tok);
  bundle::save_bundle(tmp / "toy.pt", config, tok, model);
  const std::string log = (tmp / "serve.log").string();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string binary = MTX_BINARY;
    ::freopen(log.c_str(), "w", stderr);
    ::execl(binary.c_str(), binary.c_str(), "serve", "--ckpt", (tmp / "toy.pt").c_str(), "--port", "0", "--max-wait-ms",
            "500", "--no-eager-batches", "--threads", "1", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int port = 0;
  for (int i = 0; i < 300 && port == 0; ++i) {
    std::this_thread::sleep_for(50ms);
    std::smatch m;
    const std::string text = read_file(log);
    if (std::regex_search(text, m, std::regex(R"(serving on http://127\.0\.0\.1:(\d+))"))) port = std::stoi(m[1]);
  }
  ASSERT_GT(port, 0) << read_file(log);
  auto reply = std::async(std::launch::async, [&] { return post(port, {{"text", kSentences[1]}}); });
  std::this_thread::sleep_for(150ms);  // queued, waiting out --max-wait-ms
  ::kill(pid, SIGTERM);
  EXPECT_EQ(reply.get().status, 200);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << read_file(log);
  EXPECT_NE(read_file(log).find("draining"), std::string::npos);
}

namespace {

// The mtx binary serving a toy model (in `tmp`), started through bash so that a test can set limits first
// (`shell_prefix`, e.g. "ulimit -n 64; "). Killed at the end of the test if still running.
struct ServeProcess {
  pid_t pid = -1;
  int port = 0;
  std::string log;
  ServeProcess(const test::TempDir& tmp, const std::string& args, const std::string& shell_prefix = "",
               const std::function<void(config::Config&)>& configure = {}) {
    config::Config config = test::toy_setup(tmp);
    if (configure) configure(config);
    tokenizer::Tokenizer tok = data::prepare_data(config).tokenizer;
    torch::manual_seed(3);
    model::Transformer model = bundle::build_model(config, tok);
    bundle::save_bundle(tmp / "toy.pt", config, tok, model);
    log = (tmp / "serve.log").string();
    const std::string cmd = shell_prefix + "exec '" + std::string(MTX_BINARY) + "' serve --ckpt '" +
                            (tmp / "toy.pt").string() + "' --port 0 " + args + " 2> '" + log + "'";
    pid = ::fork();
    if (pid == 0) {
      ::execl("/bin/bash", "bash", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 400 && port == 0; ++i) {
      std::this_thread::sleep_for(50ms);
      std::smatch m;
      const std::string text = read_file(log);
      if (std::regex_search(text, m, std::regex(R"(serving on http://127\.0\.0\.1:(\d+))"))) port = std::stoi(m[1]);
    }
  }
  // The exit status once it ended (-1: still running after `wait`).
  int wait_exit(std::chrono::milliseconds wait) {
    const auto until = std::chrono::steady_clock::now() + wait;
    int status = 0;
    while (std::chrono::steady_clock::now() < until) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return status;
      }
      std::this_thread::sleep_for(10ms);
    }
    return -1;
  }
  ~ServeProcess() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

std::vector<std::string> long_sentences(size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(kSentences[i % kSentences.size()] + " und " + kSentences[(i + 1) % kSentences.size()]);
  return out;
}

}  // namespace

// One-shot clients (a connection per request, as curl in a loop): the server's file descriptors stay where they
// were, however many requests come.
TEST_F(ServeTest, FileDescriptorsStayFlatOverTwoThousandOneShotRequests) {
  serve::ServerOptions o;
  o.batching.max_wait_ms = 0;
  start(o);
  for (int i = 0; i < 20; ++i) ASSERT_EQ(post(port, {{"text", kSentences[0]}, {"beam", 1}}).status, 200);
  const int before = open_fds();
  for (int i = 0; i < 2000; ++i) {
    const Reply r = i % 4 == 3 ? call(port, http::verb::get, "/health")
                               : post(port, {{"text", kSentences[size_t(i) % kSentences.size()]}, {"beam", 1}});
    ASSERT_EQ(r.status, 200) << i << ": " << r.body;
  }
  int after = open_fds();
  for (int i = 0; i < 200 && after > before + 4; ++i) {  // the last connections close as their handlers end
    std::this_thread::sleep_for(10ms);
    after = open_fds();
  }
  EXPECT_LE(after, before + 4) << "descriptors before " << before << ", after 2000 one-shot requests " << after;
  EXPECT_EQ(server->metrics().count(200), 20 + 2000);
}

// Under `ulimit -n 64`, 80 connections at once exhaust the descriptors; once they close, the server accepts again.
TEST(Serve, AcceptResumesAfterRunningOutOfFileDescriptors) {
  if (test::sanitized()) {
    // UBSan's vptr check probes memory through a pipe, which it cannot open while the process has no descriptors
    // left: it then reports every virtual call as a bad type (seen on Boost's error categories and strands).
    GTEST_SKIP() << "a sanitizer build: its checks need descriptors the test takes away";
  }
  test::TempDir tmp;
  ServeProcess p(tmp, "--threads 1", "ulimit -n 64; ");
  ASSERT_GT(p.port, 0) << read_file(p.log);
  {
    std::vector<std::unique_ptr<Raw>> idle;
    for (int i = 0; i < 80; ++i) idle.push_back(std::make_unique<Raw>(p.port));
    std::this_thread::sleep_for(500ms);
  }  // all closed
  Reply r;
  const auto until = std::chrono::steady_clock::now() + 5s;  // a server that never accepts again: one 60 s wait
  while (r.status != 200 && std::chrono::steady_clock::now() < until) {
    try {
      r = post(p.port, {{"text", kSentences[0]}});
    } catch (const std::exception&) {
      std::this_thread::sleep_for(100ms);
    }
  }
  EXPECT_EQ(r.status, 200) << read_file(p.log);
  EXPECT_NE(read_file(p.log).find("accept failed"), std::string::npos) << read_file(p.log);
}

// A request of more tokens than --max-batch-tokens is split into batches within the budget, on the batch path
// that deals sentences out to searches and on the continuous one, and every translation is what it is alone.
TEST_F(ServeTest, ARequestOverTheBatchBudgetIsSplitIntoBatchesWithinIt) {
  for (const int batches : {1, 2}) {
    serve::ServerOptions o;
    o.batching.max_batch_tokens = 40;
    o.batching.max_wait_ms = 0;
    o.batches = batches;  // 2: each batch one search that takes in requests (continuous batching)
    o.api.max_request_tokens = 4000;
    o.api.max_request_sentences = 120;
    start(o);
    const std::vector<std::string> lines = long_sentences(60);
    std::vector<std::string> alone;
    for (size_t i = 0; i < 6; ++i) {
      alone.push_back(json::parse(post(port, {{"text", lines[i]}}).body)["translations"][0]["text"]);
    }
    const Reply r = post(port, {{"text", lines}});
    ASSERT_EQ(r.status, 200) << r.body;
    const json all = json::parse(r.body)["translations"];
    ASSERT_EQ(all.size(), lines.size());
    for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(all[i]["text"], alone[i % 6]) << batches << ": " << i;
    const std::string m = call(port, http::verb::get, "/metrics").body;
    EXPECT_GT(metric(m, "mtx_batches_total"), 6 + 4) << m;
    EXPECT_EQ(metric(m, "mtx_batch_tokens_bucket{le=\"64\"}"), metric(m, "mtx_batches_total")) << m;
    TearDown();
    server.reset();
  }
}

// Every way a request can be refused has its own status and a one-line {"error"}; HEAD has no body.
TEST_F(ServeTest, EveryRefusalHasItsStatus) {
  const fs::path keys = tmp / "keys.txt";
  test::write_text(keys, "# clients\nsecret-1\nsecret-2\n");
  serve::ServerOptions o;
  o.api.max_request_sentences = 60;
  o.api.max_request_tokens = 2000;
  o.api.max_request_bytes = 20000;
  o.api.keys = std::make_shared<serve::ApiKeys>(keys);
  o.api.metrics_token = "m-token";
  o.api.cors_origins = {"https://app.example"};
  o.header_timeout_ms = 400;
  start(o);
  const std::map<std::string, std::string> key = {{"Authorization", "Bearer secret-1"}};
  auto translate = [&](const json& body, std::map<std::string, std::string> headers = {}) {
    headers.insert({"Authorization", "Bearer secret-1"});
    return call(port, http::verb::post, "/v1/translate", body.dump(), headers);
  };
  auto expect_error = [](const Reply& r, int status, const std::string& reason) {
    EXPECT_EQ(r.status, status) << r.body;
    const json j = json::parse(r.body);
    EXPECT_NE(j.value("error", "").find(reason), std::string::npos) << r.body;
    EXPECT_EQ(std::count(r.body.begin(), r.body.end(), '\n'), 1) << r.body;
  };
  EXPECT_EQ(translate({{"text", kSentences[0]}}).status, 200);
  // 413: too many sentences, too many tokens (never to succeed: not 429), too many bytes.
  expect_error(translate({{"text", std::vector<std::string>(61, "a")}}), 413, "at most 60 (--max-request-sentences)");
  expect_error(translate({{"text", long_sentences(60)}}), 413, "at most 2000 (--max-request-tokens)");
  expect_error(translate({{"text", std::string(25000, 'a')}}), 413, "over 20000 bytes");
  // 404 for any method on an unknown path; 405 with Allow on a known one.
  expect_error(call(port, http::verb::post, "/nope", "{}", key), 404, "no such path");
  expect_error(call(port, http::verb::get, "/nope"), 404, "no such path");
  const Reply not_allowed = call(port, http::verb::get, "/v1/translate");
  expect_error(not_allowed, 405, "POST /v1/translate");
  EXPECT_EQ(not_allowed.headers.at("allow"), "POST, OPTIONS");
  // 415: what a page could send without a CORS preflight.
  expect_error(call(port, http::verb::post, "/v1/translate", R"({"text": "ein Hund"})",
                    {{"Content-Type", "text/plain"}, {"Authorization", "Bearer secret-1"}}),
               415, "takes application/json");
  // 401 without a key, 403 with a wrong one; LibreTranslate's api_key field works too.
  expect_error(call(port, http::verb::post, "/v1/translate", R"({"text": "ein Hund"})"), 401, "API key");
  expect_error(translate({{"text", "ein Hund"}}, {{"Authorization", "Bearer nope"}}), 403, "not valid");
  EXPECT_EQ(call(port, http::verb::post, "/v1/translate", R"({"text": "ein Hund", "api_key": "secret-2"})").status,
            200);
  // /metrics with its own token.
  expect_error(call(port, http::verb::get, "/metrics"), 401, "token");
  expect_error(call(port, http::verb::get, "/metrics", "", {{"Authorization", "Bearer secret-1"}}), 403, "token");
  EXPECT_EQ(call(port, http::verb::get, "/metrics", "", {{"Authorization", "Bearer m-token"}}).status, 200);
  // Origins: a page elsewhere is refused; the named origin gets CORS headers and its preflight.
  expect_error(translate({{"text", "ein Hund"}}, {{"Origin", "https://evil.example"}}), 403, "not allowed");
  Reply allowed = translate({{"text", "ein Hund"}}, {{"Origin", "https://app.example"}});
  EXPECT_EQ(allowed.status, 200);
  EXPECT_EQ(allowed.headers["access-control-allow-origin"], "https://app.example");
  Reply preflight =
      call(port, http::verb::options, "/v1/translate", "", {{"Origin", "https://app.example"}, {"Content-Type", ""}});
  EXPECT_EQ(preflight.status, 204);
  EXPECT_EQ(preflight.headers["access-control-allow-methods"], "POST");
  // /v1/models names no file without --show-paths.
  EXPECT_EQ(call(port, http::verb::get, "/v1/models").body.find("toy.pt"), std::string::npos);
  // 431: a 20 kB header.
  expect_error(call(port, http::verb::get, "/health", "", {{"X-Big", std::string(20000, 'x')}}), 431, "headers");
  // 408: a header that never ends (a slow client).
  {
    Raw slow(port);
    slow.send("GET /health HTTP/1.1\r\nHost: x\r\n");
    const std::string got = slow.read_all(3s);
    EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0u) << got;
  }
  // HEAD, then GET, on one connection: the HEAD answer has a length and no body, so the GET reads cleanly.
  {
    Raw both(port);
    both.send("HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    const std::string got = both.read_all(3s);
    const size_t second = got.find("HTTP/1.1 200", 1);
    ASSERT_NE(second, std::string::npos) << got;
    const std::string head = got.substr(0, second);
    EXPECT_NE(head.find("Content-Length: 16"), std::string::npos) << got;
    EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << "no body after HEAD's headers: " << got;
    EXPECT_EQ(got.substr(got.size() - 16), "{\"status\":\"ok\"}\n") << got;
  }
  // 504: a deadline shorter than the translation; its work stops.
  // (Alone, these 30 sentences at beam 32 take several times the 100 ms.)
  const Reply late = translate({{"text", long_sentences(30)}, {"beam", 32}, {"timeout_ms", 100}});
  expect_error(late, 504, "deadline");
  // SIGHUP reloads the keys: the new one works, a dropped one no longer does.
  test::write_text(keys, "secret-3\n");
  ::raise(SIGHUP);
  Reply reloaded;
  for (int i = 0; i < 100 && reloaded.status != 200; ++i) {
    std::this_thread::sleep_for(10ms);
    reloaded = translate({{"text", "ein Hund"}}, {{"Authorization", "Bearer secret-3"}});
  }
  EXPECT_EQ(reloaded.status, 200) << reloaded.body;
  EXPECT_EQ(translate({{"text", "ein Hund"}}).status, 403);  // secret-1
  const std::string m = call(port, http::verb::get, "/metrics", "", {{"Authorization", "Bearer m-token"}}).body;
  for (const int status : {413, 404, 405, 415, 401, 403, 431, 408, 504}) {
    EXPECT_GE(metric(m, "mtx_requests_total{status=\"" + std::to_string(status) + "\"}"), 1) << status << "\n" << m;
  }
}

// A client that leaves while its long request is being translated: its sentences leave the running search at the
// next step, it is counted as 499 (never 200), and the server's CPU goes quiet.
TEST_F(ServeTest, AClientThatLeavesMidSearchStopsCostingWork) {
  serve::ServerOptions o;
  o.batching.max_wait_ms = 0;
  o.api.max_request_sentences = 64;
  o.api.max_request_tokens = 100000;
  o.batching.max_batch_tokens = 100000;
  start(o);
  const json body = {{"text", long_sentences(32)}, {"beam", 16}};
  // How long the whole request takes when its client waits for it.
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(post(port, body).status, 200);
  const double full = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  {
    Raw leaving(port);
    const std::string text = body.dump();
    leaving.send("POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                 std::to_string(text.size()) + "\r\n\r\n" + text);
    std::this_thread::sleep_for(std::chrono::duration<double>(full / 5));  // in the middle of its search
    t0 = std::chrono::steady_clock::now();
  }  // gone
  double waited = 0;
  while (server->metrics().count(499) == 0 && waited < full * 2) {
    std::this_thread::sleep_for(2ms);
    waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  EXPECT_EQ(server->metrics().count(499), 1);
  EXPECT_LT(waited, full / 4) << "the search went on for " << waited
                              << " s after the client left (the whole request: " << full << " s)";
  EXPECT_EQ(server->metrics().count(200), 1);  // the first request only
}

// Keep-alive answers are written by the batch thread while a read waits for the connection's next request. Two
// requests on one connection, sent at once (pipelined) or the second while the first is translated, are answered
// in order, each with its own translation, and the connection closes when the second asks for it.
TEST_F(ServeTest, PipelinedRequestsAreAnsweredInOrderOnOneConnection) {
  serve::ServerOptions o;
  o.api.max_request_sentences = 64;
  o.api.max_request_tokens = 100000;
  o.batching.max_batch_tokens = 100000;
  start(o);
  const json a = {{"text", long_sentences(16)}, {"beam", 8}}, b = {{"text", kSentences[3]}};
  const std::string first_text = json::parse(post(port, a).body)["translations"][15]["text"].get<std::string>();
  const std::string second_text = json::parse(post(port, b).body)["translations"][0]["text"].get<std::string>();
  auto request = [](const json& body, bool close) {
    const std::string text = body.dump();
    return "POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
           std::string(close ? "Connection: close\r\n" : "") + "Content-Length: " + std::to_string(text.size()) +
           "\r\n\r\n" + text;
  };
  for (int round = 0; round < 6; ++round) {
    Raw raw(port);
    if (round % 2 == 0) {
      raw.send(request(a, false) + request(b, true));
    } else {
      raw.send(request(a, false));
      std::this_thread::sleep_for(20ms);  // the first is being translated
      raw.send(request(b, true));
    }
    const std::string out = raw.read_all(60s);  // until the server closes
    const size_t first = out.find("HTTP/1.1 200"), second = out.find("HTTP/1.1 200", first + 1);
    ASSERT_NE(first, std::string::npos) << out;
    ASSERT_NE(second, std::string::npos) << out;
    EXPECT_LT(out.find(first_text, first), second) << out;
    EXPECT_NE(out.find(second_text, second), std::string::npos) << out;
  }
  EXPECT_EQ(server->metrics().count(200), 14);
}

// A keep-alive connection left idle after its answer (written by the batch thread) is closed after the idle
// timeout.
TEST_F(ServeTest, AConnectionIdleAfterItsAnswerIsClosedAfterTheIdleTimeout) {
  serve::ServerOptions o;
  o.idle_timeout_ms = 1000;
  start(o);
  const std::string body = json{{"text", kSentences[0]}}.dump();
  for (int i = 0; i < 2; ++i) {
    Raw raw(port);
    const auto t0 = std::chrono::steady_clock::now();
    raw.send("POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n\r\n" + body);
    const std::string out = raw.read_all(20s);  // the answer, then nothing until the server closes
    const double open = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(out.rfind("HTTP/1.1 200", 0), 0u) << out;
    EXPECT_NE(out.find("\"translations\""), std::string::npos) << out;
    EXPECT_GT(open, 0.9) << "closed before the idle timeout";
    EXPECT_LT(open, 10.0) << "the idle connection was still open after " << open << " s";
  }
  EXPECT_EQ(server->metrics().count(200), 2);
}

// The binary: SIGTERM during a long request starts the drain (/health 503 meanwhile); a second SIGTERM ends the
// process at once.
TEST(Serve, ASecondSigtermExitsAtOnce) {
  test::TempDir tmp;
  ServeProcess p(tmp, "--threads 1 --max-request-sentences 64 --max-request-tokens 100000 --max-batch-tokens 100000");
  ASSERT_GT(p.port, 0) << read_file(p.log);
  auto reply = std::async(std::launch::async, [&] {
    try {
      return post(p.port, {{"text", long_sentences(64)}, {"beam", 32}});
    } catch (const std::exception&) {
      return Reply{};
    }
  });
  std::this_thread::sleep_for(300ms);
  ::kill(p.pid, SIGTERM);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(call(p.port, http::verb::get, "/health").status, 503);
  EXPECT_EQ(p.wait_exit(0ms), -1) << "still draining";
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(p.pid, SIGTERM);
  const int status = p.wait_exit(3s);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_NE(status, -1) << read_file(p.log);
  EXPECT_LT(took, 1.0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM) << status;
  reply.wait();
}

// LibreTranslate's API: JSON and form posts, lists, alternatives, auto, HTML that keeps its markup, the errors.
TEST_F(ServeTest, SpeaksLibreTranslatesApi) {
  start({});
  auto mtx_text = [&](const std::string& s) {
    return json::parse(post(port, {{"text", s}}).body)["translations"][0]["text"].get<std::string>();
  };
  Reply r = call(port, http::verb::get, "/languages");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body), json::parse(R"([{"code": "de", "name": "German", "targets": ["en"]}])"));
  r = call(port, http::verb::post, "/translate", json{{"q", kSentences[0]}, {"source", "de"}, {"target", "en"}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["translatedText"], mtx_text(kSentences[0]));
  r = call(port, http::verb::post, "/translate", "q=ein+Hund+l%C3%A4uft&source=auto&target=en&alternatives=2",
           {{"Content-Type", "application/x-www-form-urlencoded"}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["translatedText"], mtx_text("ein Hund läuft"));
  EXPECT_EQ(j["detectedLanguage"]["language"], "de");
  EXPECT_TRUE(j["alternatives"].is_array());
  r = call(
      port, http::verb::post, "/translate",
      json{{"q", {kSentences[1], kSentences[2] + "\n" + kSentences[3]}}, {"source", "de"}, {"target", "en"}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  j = json::parse(r.body)["translatedText"];
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[1], mtx_text(kSentences[2]) + "\n" + mtx_text(kSentences[3]));
  // HTML: each text node translated in place; tags, attributes, entities around them and scripts kept.
  const std::string page = "<p class=\"x\">ein Hund &amp; <b>zwei Männer</b></p>\n<script>var a = '<p>';</script>";
  r = call(port, http::verb::post, "/translate",
           json{{"q", page}, {"source", "de"}, {"target", "en"}, {"format", "html"}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string html = json::parse(r.body)["translatedText"];
  auto escaped = [](std::string t) {
    std::string out;
    for (const char c : t) out += c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : std::string(1, c);
    return out;
  };
  EXPECT_EQ(html, "<p class=\"x\">" + escaped(mtx_text("ein Hund &")) + " <b>" + escaped(mtx_text("zwei Männer")) +
                      "</b></p>\n<script>var a = '<p>';</script>")
      << html;
  const std::vector<std::tuple<json, int, std::string>> bad = {
      {{{"source", "de"}, {"target", "en"}}, 400, "missing q"},
      {{{"q", "x"}, {"source", "fr"}, {"target", "en"}}, 400, "fr is not supported"},
      {{{"q", "x"}, {"source", "de"}, {"target", "fr"}}, 400, "fr is not supported"},
      {{{"q", "x"}, {"source", "de"}, {"target", "en"}, {"format", "pdf"}}, 400, "format"},
  };
  for (const auto& [body, status, reason] : bad) {
    r = call(port, http::verb::post, "/translate", body.dump());
    EXPECT_EQ(r.status, status) << body;
    EXPECT_NE(json::parse(r.body).value("error", "").find(reason), std::string::npos) << r.body;
  }
}

// Clients nobody here wrote: PyPI's libretranslatepy (translate, languages, an error) and schemathesis against
// /openapi.json (no 5xx, no answer outside the schema), from .venv (tests/clients/).
TEST_F(ServeTest, ThirdPartyClientsAgreeWithTheServer) {
  const std::string py = test::venv_python("libretranslatepy, schemathesis");
  if (py.empty()) {
    const char* need = std::getenv("MTX_REQUIRE_ORACLES");
    if (need && *need == '1') FAIL() << "MTX_REQUIRE_ORACLES=1 but .venv lacks libretranslatepy/schemathesis";
    GTEST_SKIP() << "no .venv with libretranslatepy and schemathesis (scripts/test.sh installs them)";
  }
  // Limits that keep every request schemathesis makes quick on the toy model, within the shortest deadline.
  serve::ServerOptions o;
  o.api.max_beam = 4;
  o.api.max_request_sentences = 8;
  o.api.max_request_tokens = 64;
  start(o);
  const std::string expected = json::parse(post(port, {{"text", kSentences[0]}}).body)["translations"][0]["text"];
  const std::string cmd = "'" + py + "' '" + std::string(MTX_SOURCE_DIR) +
                          "/tests/clients/third_party.py' --url http://127.0.0.1:" + std::to_string(port) +
                          " --text '" + kSentences[0] + "' --expect '" + expected + "' --work '" + tmp.path().string() +
                          "' > '" + (tmp / "clients.log").string() + "' 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << read_file(tmp / "clients.log");
}

namespace {

// A value of /proc/PID/status in MB (VmRSS, VmHWM).
double status_mb(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) / 1024.0;
  }
  return -1;
}

}  // namespace

// A flood of maximum-size requests (each 16x the batch budget) at beam 8: the server's peak RSS stays within its
// idle RSS plus docs/serving.md's bound for one batch of the budget (times 3, plus 64 MB for the allocator's and
// the threads' slack). A model wider than the toy's, so that a batch's memory stands far above the noise: a
// request translated whole (as before the split) takes several times the bound.
TEST(Serve, PeakMemoryStaysWithinTheBoundOfTheBudget) {
  if (test::sanitized()) GTEST_SKIP() << "a sanitizer build: ASan's quarantine and redzones hold freed memory";
  test::TempDir tmp;
  const int64_t budget = 256, beam = 8;
  config::Config used;
  ServeProcess p(tmp,
                 "--threads 2 --batches 1 --max-batch-tokens 256 --max-request-tokens 4096 "
                 "--max-request-sentences 256 --max-queue 100000 --max-beam 8",
                 "", [&](config::Config& c) {
                   c.model.d_model = 256;
                   c.model.decoder_layers = 2;
                   c.model.max_len = 128;
                   used = c;
                 });
  ASSERT_GT(p.port, 0) << read_file(p.log);
  ASSERT_EQ(post(p.port, {{"text", kSentences[0]}, {"beam", 8}}).status, 200);
  const double idle = status_mb(p.pid, "VmRSS");
  const std::vector<std::string> lines = long_sentences(76);  // about 4000 source tokens
  std::vector<std::future<int>> flood;
  for (int c = 0; c < 3; ++c) {
    flood.push_back(std::async(std::launch::async, [&] {
      return post(p.port, {{"text", lines}, {"beam", beam}, {"nbest", 1}}).status;
    }));
  }
  for (auto& f : flood) EXPECT_EQ(f.get(), 200);
  const double peak = status_mb(p.pid, "VmHWM");
  // docs/serving.md: 4 * k * (2 * L_d * d * (B + n * T) + n * V + 8 * n * d) bytes for a batch of n sentences of
  // B source tokens with T target steps; here n <= B / (the shortest sentence's tokens), T = 1.2 * S + 10.
  tokenizer::Tokenizer tok = data::prepare_data(used).tokenizer;
  int64_t shortest = 1 << 30, longest = 0;
  for (const auto& l : lines) {
    const auto n = int64_t(tok.src().encode(l).size()) + 1;
    shortest = std::min(shortest, n);
    longest = std::max(longest, n);
  }
  const double n = double(budget / shortest + 1);
  const double steps = std::min<double>(used.model.max_len, 1.2 * double(longest) + 10);
  const double d = used.model.d_model, layers = used.model.decoder_layers, vocab = double(tok.tgt().vocab_size());
  const double batch_mb =
      4.0 * beam * (2 * layers * d * (double(budget) + n * steps) + n * vocab + 8 * n * d) / (1024.0 * 1024.0);
  const double whole_mb = 4.0 * beam * (2 * layers * d * (4000 + 76 * steps)) / (1024.0 * 1024.0);
  EXPECT_LE(peak, idle + 3 * batch_mb + 64)
      << "idle " << idle << " MB, peak " << peak << " MB; one batch of the budget: " << batch_mb
      << " MB; a request taken whole: " << whole_mb << " MB";
}

// Past --max-connections a connection is answered 503 and closed; the others go on. --no-page: / is 404.
TEST_F(ServeTest, ConnectionsPastTheLimitGet503) {
  serve::ServerOptions o;
  o.max_connections = 2;
  o.api.page = false;
  start(o);
  {
    Raw a(port), b(port);  // two open connections, idle
    std::this_thread::sleep_for(100ms);
    const Reply refused = call(port, http::verb::get, "/health");
    EXPECT_EQ(refused.status, 503) << refused.body;
    EXPECT_NE(refused.body.find("--max-connections 2"), std::string::npos) << refused.body;
  }
  Reply r;
  for (int i = 0; i < 100 && r.status != 404; ++i) {  // the two close as the server sees them go
    std::this_thread::sleep_for(10ms);
    r = call(port, http::verb::get, "/");
  }
  EXPECT_EQ(r.status, 404) << r.body;
}

// POST /v1/score: the teacher-forced numbers of decode::score_pairs (mtx score) for the same model, a pair the
// same alone or in a list, each piece's log-probability on request; malformed requests are 400s.
TEST_F(ServeTest, ScoresGivenTranslationsAsMtxScoreDoes) {
  start(serve::ServerOptions{});
  const auto score = [&](const json& body) { return call(port, http::verb::post, "/v1/score", body.dump()); };
  const Reply one = score({{"text", kSentences[0]}, {"target", "a dog runs"}, {"tokens", true}});
  ASSERT_EQ(one.status, 200) << one.body;
  const json j = json::parse(one.body);
  const double log_prob = j["scores"][0]["log_prob"];
  double sum = 0;
  for (const auto& t : j["scores"][0]["tokens"]) sum += t["log_prob"].get<double>();
  EXPECT_NEAR(sum, log_prob, 1e-6);
  EXPECT_EQ(j["scores"][0]["tokens"].back()["piece"], "</s>");
  // The same model built again: score_pairs gives the same numbers.
  test::TempDir again;
  config::Config config = test::toy_setup(again);
  tokenizer::Tokenizer tok = data::prepare_data(config).tokenizer;
  torch::manual_seed(3);
  std::vector<model::Transformer> models = {bundle::build_model(config, tok)};
  const auto expected =
      decode::score_pairs(models, tok.special_ids(), {tok.src().encode(kSentences[0]), tok.src().encode(kSentences[3])},
                          {tok.tgt().encode("a dog runs"), tok.tgt().encode("a woman reads")});
  EXPECT_NEAR(log_prob, expected[0].log_prob, 1e-5);
  const Reply two = score({{"text", {kSentences[3], kSentences[0]}}, {"target", {"a woman reads", "a dog runs"}}});
  ASSERT_EQ(two.status, 200) << two.body;
  const json k = json::parse(two.body);
  EXPECT_EQ(k["scores"][1]["log_prob"].get<double>(), log_prob) << "the same pair alone or in a list";
  EXPECT_NEAR(k["scores"][0]["log_prob"].get<double>(), expected[1].log_prob, 1e-5);
  EXPECT_FALSE(k["scores"][0].contains("tokens"));
  for (const auto& [body, reason] : std::vector<std::pair<json, std::string>>{
           {{{"text", kSentences[0]}}, "\"target\" is missing"},
           {{{"text", {kSentences[0]}}, {"target", "a dog"}}, "\"target\" must be like \"text\""},
           {{{"text", kSentences[0]}, {"target", "a\nb"}}, "\"target\" holds a line break"},
           {{{"text", kSentences[0]}, {"target", "a"}, {"beam", 2}}, "unknown field \"beam\""},
           {{{"text", kSentences[0]}, {"target", "a"}, {"tokens", 1}}, "\"tokens\" must be true or false"}}) {
    const Reply r = score(body);
    EXPECT_EQ(r.status, 400) << body.dump();
    EXPECT_NE(json::parse(r.body).value("error", "").find(reason), std::string::npos)
        << body.dump() << " -> " << r.body;
  }
  EXPECT_EQ(score({{"text", kSentences[0]}, {"target", std::string(2000, 'x')}}).status, 413);
}
