// mtx serve's connection layer (serve/server.h) and the binary: descriptors, connection limits, timeouts,
// pipelining, clients that leave, a full queue, stopping and SIGTERM's drain, peak memory.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "mtx/bundle/bundle.h"
#include "mtx/data/prepare.h"
#include "mtx/serve/server.h"
#include "mtx/util/atomic_file.h"
#include "serve_test_utils.h"
#include "test_utils.h"

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;
using namespace mtx;
using namespace std::chrono_literals;
using mtx::test::call;
using mtx::test::kSentences;
using mtx::test::long_sentences;
using mtx::test::metric;
using mtx::test::post;
using mtx::test::Raw;
using mtx::test::Reply;

namespace {

int open_fds() {
  return int(
      std::distance(std::filesystem::directory_iterator("/proc/self/fd"), std::filesystem::directory_iterator{}));
}

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

// A value of /proc/PID/status in MB (VmRSS, VmHWM).
double status_mb(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) / 1024.0;
  }
  return -1;
}

}  // namespace

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

// A client that sends "Expect: 100-continue" (curl does for bodies over 1 MB) waits for 100 Continue before it
// sends its body: it gets it at once, then the answer; a body over the limit gets 413 instead, never 100.
TEST_F(ServeTest, ExpectContinueIsAnsweredBeforeTheBody) {
  serve::ServerOptions o;
  o.api.max_request_bytes = 4096;
  start(o);
  const std::string body = json{{"text", kSentences[0]}}.dump();
  const std::string head =
      "POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Connection: close\r\nExpect: 100-continue\r\nContent-Length: ";
  Raw raw(port);
  raw.send(head + std::to_string(body.size()) + "\r\n\r\n");
  const std::string first = raw.read_until("\r\n\r\n", 5s);  // nothing more comes until the body is sent
  ASSERT_EQ(first, "HTTP/1.1 100 Continue\r\n\r\n");
  raw.send(body);
  const std::string out = raw.read_all(60s);
  EXPECT_EQ(out.rfind("HTTP/1.1 200", 0), 0u) << out;
  EXPECT_NE(out.find("\"translations\""), std::string::npos) << out;

  Raw big(port);
  big.send(head + "100000\r\n\r\n");
  const std::string refused = big.read_all(60s);
  EXPECT_EQ(refused.rfind("HTTP/1.1 413", 0), 0u) << refused;
  EXPECT_EQ(refused.find("100 Continue"), std::string::npos) << refused;
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
