// The connection layer of mtx serve: Boost.Beast over Asio. One io_context with a few threads serves any number
// of keep-alive connections asynchronously (no thread per client), with Beast's parser for requests and its
// header and body limits (no hand-written HTTP). The API layer (api.cpp) decides every answer; translations run
// on the batcher's threads. A keep-alive translation's answer is written by its batch thread when the socket
// takes it whole (no connection thread woken for it) while a read waits for the next request; every other answer
// is posted back to the connection's strand.
#include "mtx/serve/server.h"

#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>

#include "mtx/decode/scoring.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"
#include "mtx/util/system.h"

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace mtx::serve {

struct Server::Impl {
  std::vector<ServedModel> models;
  ServerOptions options;
  Metrics metrics;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  net::signal_set signals{ioc, SIGINT, SIGTERM};
  net::signal_set hangup{ioc, SIGHUP};
  net::steady_timer accept_retry{ioc};
  net::steady_timer drain_timer{ioc};
  net::steady_timer release_timer{ioc};
  std::unique_ptr<Batcher> batcher;
  std::unique_ptr<Api> api;
  std::atomic<int64_t> in_flight{0};
  std::atomic<int> connections{0};
  std::atomic<bool> draining{false};
  std::atomic<bool> give_up{false};  // the drain ran out of time: every job still queued or running is abandoned
  std::chrono::steady_clock::time_point drain_deadline;
  std::chrono::steady_clock::time_point last_accept_warning;

  Impl(std::vector<ServedModel> m, ServerOptions o) : models(std::move(m)), options(std::move(o)) {
    if (models.empty()) throw ConfigError("serve: no model (--ckpt)");
    // A request of more sentences than the queue holds could never be queued: 413, not 429.
    options.api.max_request_sentences = std::min(options.api.max_request_sentences, options.batching.max_queue);
    options.batching.outstanding = [this] { return in_flight.load(); };
    if (options.batches > 1) {
      options.batching.threads = options.batches;
      options.batching.thread_init = use_one_thread_here;
    }
    api = std::make_unique<Api>(
        models, options.api, metrics,
        ApiState{[this] { return draining.load(); }, [this] { return batcher ? batcher->queued_sentences() : 0; },
                 [this] { return in_flight.load(); }});
    batcher = std::make_unique<Batcher>(
        options.batching,
        [this](const BatchKey& key, const auto& sources, const decode::SentenceDone& finished,
               const Batcher::AdmitSources& admit, const decode::Abandoned& abandoned,
               const Batcher::ControlsOf& controls_of) {
          return translate(key, sources, finished, admit, abandoned, controls_of);
        },
        [this](const BatchRecord& r) { metrics.batch(r); });
  }

  const ServedModel& find(const std::string& name) const {
    for (const auto& m : models) {
      if (m.name == name) return m;
    }
    throw Error("serve: no model " + name);
  }

  // Each request is answered as soon as its own sentences are translated (`finished`), not when its batch ends.
  // A batch that is one search (one per thread) takes in more requests as it goes (`admit`: continuous batching).
  Hypotheses translate(const BatchKey& key, const std::vector<std::vector<int32_t>>& sources,
                       const decode::SentenceDone& finished, const Batcher::AdmitSources& admit,
                       const decode::Abandoned& abandoned, const Batcher::ControlsOf& controls_of) {
    const ServedModel& m = find(key.model);
    if (key.score) {
      std::vector<std::vector<int32_t>> targets;
      for (size_t i = 0; i < sources.size(); ++i) targets.push_back(controls_of(int64_t(i)).prefix);
      std::vector<model::Transformer> models = {m.bundle.model};
      const std::vector<decode::PairScore> scored =
          decode::score_pairs(models, m.bundle.tokenizer->special_ids(), sources, targets, key.decode.batch_tokens);
      Hypotheses out;
      for (const auto& p : scored) {
        decode::Hypothesis h;
        h.tokens.assign(p.tokens.begin(), p.tokens.end() - 1);  // without EOS, as a translation's
        h.score = h.log_prob = p.log_prob;
        h.token_log_probs = p.token_log_probs;
        out.push_back({std::move(h)});
      }
      return out;
    }
    decode::TranslateOptions o = decode::options_from_config(key.decode);
    o.search.scores = key.scores;
    o.search.return_attention = key.attention;
    o.workers = options.batches > 1 ? 1 : options.workers;
    decode::Translator translator(m.bundle.model, *m.bundle.tokenizer, o);
    if (o.workers == 1) return translator.translate_continuously(sources, admit, finished, abandoned, controls_of);
    std::vector<decode::TargetControls> controls;
    for (size_t i = 0; i < sources.size(); ++i) controls.push_back(controls_of(int64_t(i)));
    return translator.translate_ids(sources, finished, abandoned, controls);
  }

  // Every few seconds the allocator's free pages go back to the system: a server's tensors come in every shape,
  // and without this its resident set creeps up with spans that no later request fits (docs/serving.md).
  void release_memory_now_and_then() {
    release_timer.expires_after(std::chrono::seconds(kReleaseSeconds));
    release_timer.async_wait([this](beast::error_code ec) {
      if (ec) return;
      release_free_memory();
      release_memory_now_and_then();
    });
  }
  static constexpr int kReleaseSeconds = 5;

  void begin_drain() {
    if (draining.exchange(true)) return;
    log::info("serve: draining: new translations get 503; finishing {} request(s) in flight (at most {} s)",
              in_flight.load(), options.drain_seconds);
    drain_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.drain_seconds);
    check_drained();
  }
  void check_drained() {
    if (in_flight.load() == 0) {
      beast::error_code ec;
      acceptor.close(ec);
      ioc.stop();
      return;
    }
    if (std::chrono::steady_clock::now() >= drain_deadline && !give_up.exchange(true)) {
      log::warn("serve: the drain's {} s are over: {} request(s) in flight are given up", options.drain_seconds,
                in_flight.load());
    }
    drain_timer.expires_after(std::chrono::milliseconds(10));
    drain_timer.async_wait([this](beast::error_code) { check_drained(); });
  }

  void watch_signals() {
    signals.async_wait([this](beast::error_code e, int signo) {
      if (e) return;
      if (draining.load()) {
        // A second signal: the operator wants out now.
        log::warn("serve: signal {} while draining: exiting now", signo);
        std::_Exit(128 + signo);
      }
      begin_drain();
      watch_signals();
    });
  }
  void watch_hangup() {
    hangup.async_wait([this](beast::error_code e, int) {
      if (e) return;
      if (options.api.keys) {
        const std::string why = options.api.keys->reload();
        if (why.empty())
          log::info("serve: SIGHUP: {} API key(s) loaded", options.api.keys->size());
        else
          log::warn("serve: SIGHUP: keeping the API keys: {}", why);
      }
      watch_hangup();
    });
  }

  void accept();
};

namespace {

using Response = http::response<http::string_body>;

// Whether the client of a queued translation is still there, asked from batch threads while the connection may
// be closing: the socket is read (MSG_PEEK) only while the connection holds it.
struct Presence {
  std::mutex mutex;
  int fd = -1;  // -1: the connection is closed or answered
  bool gone() {
    std::lock_guard<std::mutex> lock(mutex);
    if (fd < 0) return true;
    char c;
    const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }
  void end() {
    std::lock_guard<std::mutex> lock(mutex);
    fd = -1;
  }
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  // The socket was accepted on the io_context; the connection's handlers run on a strand of its own.
  Session(tcp::socket socket, Server::Impl& server, bool refuse)
      : stream_(net::make_strand(server.ioc)),
        server_(server),
        refuse_(refuse),
        deadline_(stream_.get_executor()),
        read_timer_(stream_.get_executor()) {
    beast::error_code ec;
    const auto protocol = socket.local_endpoint(ec).protocol();
    stream_.socket().assign(ec ? tcp::v4() : protocol, socket.release(ec), ec);
    server_.metrics.connection_opened();
  }
  ~Session() {
    presence_->end();
    --server_.connections;
    server_.metrics.connection_closed();
  }
  void start() { next(); }

 private:
  // The next request: its first byte within the idle timeout (the first request's within the header timeout),
  // then its headers within the header timeout, then its body within the body timeout.
  void next() {
    if (requests_ >= server_.options.max_keepalive_requests) return close();
    parser_.emplace();
    parser_->header_limit(uint32_t(std::min<int64_t>(server_.options.max_header_bytes, UINT32_MAX)));
    // The largest any path takes until the headers say which path it is (read_header narrows it).
    body_limit_ = std::max(server_.options.api.max_request_bytes, server_.options.api.max_file_bytes);
    parser_->body_limit(uint64_t(body_limit_));
    if (buffer_.size() > 0) return read_header();
    const int wait = requests_ == 0 ? server_.options.header_timeout_ms : server_.options.idle_timeout_ms;
    stream_.expires_after(std::chrono::milliseconds(wait));
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      if (ec) return self->close();  // idle, or the client closed: nothing to answer
      self->buffer_.commit(n);
      self->read_header();
    });
  }

  // A read of part of a request, bounded by its own timer rather than the stream's (whose expiry closes the
  // socket): past it the read is cancelled and the client still gets its 408.
  void limit_read(int ms) {
    stream_.expires_never();
    timed_out_ = false;
    read_timer_.expires_after(std::chrono::milliseconds(ms));
    read_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return;
      self->timed_out_ = true;
      beast::error_code ignored;
      self->stream_.socket().cancel(ignored);
    });
  }

  void read_header() {
    limit_read(server_.options.header_timeout_ms);
    http::async_read_header(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->read_timer_.cancel();
      if (ec) return self->read_failed(ec);
      if (self->refuse_) {
        self->server_.metrics.connection_refused();
        return self->answer(Api::error(503, "too many connections (mtx serve --max-connections " +
                                                std::to_string(self->server_.options.max_connections) + ")"),
                            false, false);
      }
      // The body limit of this request's path; a Content-Length over it is refused before the body is read.
      self->body_limit_ = self->server_.api->body_limit(std::string(self->parser_->get().target()));
      const auto length = self->parser_->content_length();
      if (length && *length > uint64_t(self->body_limit_)) return self->read_failed(http::error::body_limit);
      self->parser_->body_limit(uint64_t(self->body_limit_));
      self->limit_read(self->server_.options.body_timeout_ms);
      // A client that asks to be told before it sends the body (curl does for bodies over 1 MB) gets 100 Continue;
      // one whose body would be over the limit got 413 already (the parser checks Content-Length with the headers).
      const auto& header = self->parser_->get();
      if (header.version() == 11 && beast::iequals(header[http::field::expect], "100-continue")) {
        auto go_on = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
        return http::async_write(self->stream_, *go_on, [self, go_on](beast::error_code e, std::size_t) {
          if (e) {
            self->read_timer_.cancel();
            return self->read_failed(e);
          }
          self->read_body();
        });
      }
      self->read_body();
    });
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code e, std::size_t) {
      self->read_timer_.cancel();
      if (e) return self->read_failed(e);
      self->handle();
    });
  }

  // A request that could not be read: a status where one can still be sent, else the connection closes.
  void read_failed(beast::error_code ec) {
    if (timed_out_) {
      // Part of a request came, not all of it in time (a slow client): 408, then close.
      return answer(Api::error(408, "the request did not arrive in time"), false, false);
    }
    if (ec == http::error::header_limit) {
      return answer(Api::error(431, "the request's headers are over " +
                                        std::to_string(server_.options.max_header_bytes) + " bytes"),
                    false, false);
    }
    if (ec == http::error::body_limit) {
      const bool file = body_limit_ != server_.options.api.max_request_bytes;
      return answer(Api::error(413, "the body is over " + std::to_string(body_limit_) + " bytes (" +
                                        (file ? "--max-file-bytes" : "--max-request-bytes") + ")"),
                    false, false);
    }
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
        ec == net::error::operation_aborted) {
      return close();
    }
    return answer(Api::error(400, "not an HTTP/1 request: " + ec.message()), false, false);
  }

  void handle() {
    ++requests_;
    request_ = parser_->release();
    started_ = std::chrono::steady_clock::now();
    head_ = request_.method() == http::verb::head;
    const bool keep =
        request_.keep_alive() && !server_.draining.load() && requests_ < server_.options.max_keepalive_requests;
    HttpRequest r;
    r.method = std::string(request_.method_string());
    r.target = std::string(request_.target());
    r.host = std::string(request_[http::field::host]);
    r.content_type = std::string(request_[http::field::content_type]);
    r.authorization = std::string(request_[http::field::authorization]);
    r.origin = std::string(request_[http::field::origin]);
    r.body = std::move(request_.body());
    Routed routed = server_.api->route(r);
    if (!routed.job) return answer(std::move(routed.answer), keep, true);
    queue(std::move(routed), keep);
  }

  void queue(Routed routed, bool keep) {
    auto job = routed.job;
    if (int64_t(job->sources.size()) > server_.options.batching.max_queue) {
      return answer(Api::error(413, "more sentences than the queue holds"), keep, true);
    }
    {
      std::lock_guard<std::mutex> lock(presence_->mutex);
      presence_->fd = stream_.socket().native_handle();
    }
    std::shared_ptr<Presence> presence = presence_;
    Server::Impl* server = &server_;
    job->gone = [presence, server] { return server->give_up.load() || presence->gone(); };
    auto self = shared_from_this();
    auto finish = std::make_shared<std::function<HttpAnswer(const Hypotheses&)>>(std::move(routed.finish));
    // A keep-alive request with nothing read past it: its answer is written by the batch thread that made it when
    // the socket takes it whole, while a read waits here for the next request (see answer_here).
    armed_ = keep && !head_ && buffer_.size() == 0;
    phase_.store(kSearching);
    const unsigned version = request_.version();
    const bool armed = armed_;
    job->done = [self, finish, keep, armed, version](Hypotheses hyps, const std::string& error) {
      // On a batch thread: the answer is made here, and written here or on the connection's strand.
      HttpAnswer a;
      if (error.empty()) {
        try {
          a = (*finish)(hyps);
        } catch (const std::exception& e) {
          a = Api::error(500, bundle::short_what(e));
        }
      } else {
        a = self->server_.api->failed(error);
      }
      if (armed && a.status == 200) return self->answer_here(a, version);
      net::post(self->stream_.get_executor(), [self, a = std::move(a), keep]() mutable {
        --self->server_.in_flight;
        self->deadline_.cancel();
        if (self->claimed_.exchange(true)) return;
        if (a.status == 499) {  // nobody to answer (nginx's 499)
          self->server_.metrics.answered(499, -1);
          return self->close();
        }
        self->answer(std::move(a), keep && a.status < 500, true);
      });
    };
    ++server_.in_flight;
    claimed_.store(false);
    deadline_at_ = job->deadline;
    if (!server_.batcher->submit(job)) {
      --server_.in_flight;
      claimed_.store(true);
      armed_ = false;
      HttpAnswer full = Api::error(429, "the queue is full; retry later");
      full.headers.emplace_back("Retry-After", "1");
      return answer(std::move(full), keep, true);
    }
    if (armed_) wait_for_next();
    watch_deadline();
  }

  // The request's deadline: answered 504 here if the batcher has not answered by then (a job still queued behind
  // a long batch); the job is then abandoned wherever it is. While a read waits for the next request (armed_),
  // this timer also closes a connection left idle after an answer that a batch thread wrote.
  void watch_deadline() {
    const auto now = std::chrono::steady_clock::now();
    const bool has_deadline = deadline_at_ != Job::Clock::time_point::max();
    if (!armed_ && !has_deadline) return;
    const auto idle = std::chrono::milliseconds(server_.options.idle_timeout_ms);
    auto at = has_deadline ? deadline_at_ + std::chrono::milliseconds(20) : now + idle;
    if (armed_) at = std::min(at, now + idle);
    deadline_then(at);
  }

  // The request's timer, set to look at the request again (on_deadline) at `at`.
  void deadline_then(Job::Clock::time_point at) {
    deadline_.expires_at(at);
    deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->on_deadline();
    });
  }

  void on_deadline() {
    const auto now = std::chrono::steady_clock::now();
    if (armed_ && phase_.load() == kAnswered) {
      // Answered by a batch thread; the read still waits for the next request: idle until answered_at_ + idle.
      const auto end = Job::Clock::time_point(Job::Clock::duration(answered_at_.load())) +
                       std::chrono::milliseconds(server_.options.idle_timeout_ms);
      if (now < end) return deadline_then(end);
      // Idle for too long: the waiting read is cancelled, finds the answer out, and closes the connection.
      presence_->end();
      beast::error_code ignored;
      stream_.socket().cancel(ignored);
      return;
    }
    if (armed_ && phase_.load() == kReadFirst) return;  // whoever writes the answer goes on from there
    if (claimed_.load()) return look_again();
    if (deadline_at_ != Job::Clock::time_point::max() && now >= deadline_at_ + std::chrono::milliseconds(20)) {
      if (claimed_.exchange(true)) return look_again();
      presence_->end();  // its job is given up at its next step
      return answer(server_.api->failed(kDeadlinePassed), false, true);
    }
    watch_deadline();
  }

  // Being answered (a batch thread's write, or one posted to the strand): while a read waits, the idle timeout
  // starts once the answer is out, so look again shortly.
  void look_again() {
    if (armed_) deadline_then(std::chrono::steady_clock::now() + std::chrono::milliseconds(10));
  }

  // The read that waits, during a translation, for the next request of a keep-alive connection. Whichever ends
  // second, this read or the answer's write, goes on to the next request (resume).
  void wait_for_next() {
    stream_.expires_never();
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      if (!ec) self->buffer_.commit(n);
      if (ec) self->presence_->end();  // the client left (or the read was cancelled): its job is given up
      self->read_ended_ = ec;
      int searching = kSearching;
      if (self->phase_.compare_exchange_strong(searching, kReadFirst)) return;  // the answer is not out yet
      self->resume();
    });
  }

  // On the strand, the answer out and the waiting read ended: on to the next request, or closed.
  void resume() {
    deadline_.cancel();
    armed_ = false;
    if (read_ended_) return close();
    next();
  }

  // An answer written whole by the strand (async_write) while the read waits: go on if the read has ended,
  // else let it wait under the idle timeout.
  void answered_while_armed() {
    answered_at_.store(std::chrono::steady_clock::now().time_since_epoch().count());
    int searching = kSearching;
    if (phase_.compare_exchange_strong(searching, kAnswered)) return watch_deadline();
    resume();
  }

  // On a batch thread, for an armed request's 200: the answer is written here as far as the socket takes it
  // without waiting (no connection thread woken, no hand-over), the rest on the strand.
  void answer_here(const HttpAnswer& a, unsigned version) {
    --server_.in_flight;
    if (claimed_.exchange(true)) return;  // the deadline answered 504 already
    std::ostringstream wire;
    wire << *make_response(a, true, version, false);
    const std::string bytes = std::move(wire).str();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    size_t sent = 0;
    bool gone = false;
    {
      std::lock_guard<std::mutex> lock(presence_->mutex);
      gone = presence_->fd < 0;
      // Counted before the client can see the answer, as the strand's answers are.
      server_.metrics.answered(gone ? 499 : 200, gone ? -1 : seconds);
      while (!gone && sent < bytes.size()) {
        const ssize_t n = ::send(presence_->fd, bytes.data() + sent, bytes.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
          sent += size_t(n);
        } else if (n < 0 && errno == EINTR) {
          continue;
        } else {
          gone = n < 0 && errno != EAGAIN && errno != EWOULDBLOCK;
          break;
        }
      }
    }
    if (!gone && sent < bytes.size()) {
      // The socket's buffer is full: the rest is written on the strand, under the write timeout.
      auto rest = std::make_shared<std::string>(bytes.substr(sent));
      net::post(stream_.get_executor(), [self = shared_from_this(), rest] {
        self->deadline_.cancel();
        self->stream_.expires_after(std::chrono::milliseconds(self->server_.options.write_timeout_ms));
        net::async_write(self->stream_, net::buffer(*rest), [self, rest](beast::error_code ec, std::size_t) {
          self->stream_.expires_never();
          if (ec) return self->close();
          self->answered_while_armed();
        });
      });
      return;
    }
    answered_at_.store(std::chrono::steady_clock::now().time_since_epoch().count());
    int searching = kSearching;
    if (!phase_.compare_exchange_strong(searching, kAnswered)) {
      // The read ended first (the client left, or sent its next request already): the strand goes on from here.
      net::post(stream_.get_executor(), [self = shared_from_this()] { self->resume(); });
    }
  }

  static std::shared_ptr<Response> make_response(const HttpAnswer& a, bool keep, unsigned version, bool head) {
    auto res = std::make_shared<Response>(http::status(a.status), version ? version : 11);
    res->set(http::field::server, "mtx");
    if (!a.content_type.empty()) res->set(http::field::content_type, a.content_type);
    for (const auto& [name, value] : a.headers) res->set(name, value);
    res->keep_alive(keep);
    if (head) {
      res->content_length(a.body.size());  // HEAD: the length GET would have, and no body
    } else {
      res->body() = a.body;
      res->prepare_payload();
    }
    return res;
  }

  void answer(HttpAnswer a, bool keep, bool timed) {
    const double seconds =
        timed ? std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count() : -1;
    server_.metrics.answered(a.status, a.status == 200 && timed ? seconds : -1);
    auto res = make_response(a, keep, request_.version(), head_);
    stream_.expires_after(std::chrono::milliseconds(server_.options.write_timeout_ms));
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, std::size_t) {
      if (ec || !res->keep_alive()) return self->close();
      self->head_ = false;
      if (self->armed_) {
        self->stream_.expires_never();  // the waiting read has no timeout of its own: watch_deadline's idle
        return self->answered_while_armed();
      }
      self->next();
    });
  }

  void close() {
    presence_->end();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    // The socket itself closes when the last handler holding this session returns.
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  std::chrono::steady_clock::time_point started_;
  Server::Impl& server_;
  bool refuse_ = false;
  bool head_ = false;
  int requests_ = 0;
  // One request's answer: claimed once, by the strand (its answer, a 504) or by the batch thread (answer_here).
  std::atomic<bool> claimed_{true};
  // While armed_ (strand), a read waits for the next request during the translation; phase_ says which of that
  // read and the answer ended first, and the second goes on (resume).
  enum Phase : int { kSearching = 0, kAnswered = 1, kReadFirst = 2 };
  bool armed_ = false;
  std::atomic<int> phase_{kSearching};
  beast::error_code read_ended_;                 // strand: how the waiting read ended
  std::atomic<Job::Clock::rep> answered_at_{0};  // steady_clock ticks, when the answer was out
  Job::Clock::time_point deadline_at_ = Job::Clock::time_point::max();
  net::steady_timer deadline_;
  net::steady_timer read_timer_;
  bool timed_out_ = false;
  int64_t body_limit_ = 0;  // the body limit of the request being read
  std::shared_ptr<Presence> presence_ = std::make_shared<Presence>();
};

}  // namespace

void Server::Impl::accept() {
  // Accepted on the io_context itself (no strand per attempt: a failed accept then destroys no strand).
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor.is_open()) return;  // closed: the drain is over
    if (ec) {
      // Out of file descriptors (EMFILE/ENFILE), or the connection died in the backlog: the next accept is
      // tried after a pause, never given up.
      const auto now = std::chrono::steady_clock::now();
      if (now - last_accept_warning > std::chrono::seconds(1)) {
        last_accept_warning = now;
        log::warn("serve: accept failed ({}); retrying", ec.message());
      }
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](beast::error_code) { accept(); });
      return;
    }
    const bool refuse = ++connections > options.max_connections;
    std::make_shared<Session>(std::move(socket), *this, refuse)->start();
    accept();
  });
}

Server::Server(std::vector<ServedModel> models, ServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(models), std::move(options))) {}

Server::~Server() = default;

const Metrics& Server::metrics() const { return impl_->metrics; }

void Server::run(const std::function<void(int port)>& on_listening) {
  Impl& s = *impl_;
  beast::error_code ec;
  const auto address = net::ip::make_address(s.options.host, ec);
  if (ec) throw ConfigError("serve: --host " + s.options.host + " is not an IP address");
  const tcp::endpoint endpoint{address, static_cast<unsigned short>(s.options.port)};
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    throw Error("serve: cannot listen on " + s.options.host + ":" + std::to_string(s.options.port) + ": " +
                ec.message());
  }
  s.watch_signals();
  s.watch_hangup();
  s.accept();
  limit_allocator_caches();
  s.release_memory_now_and_then();
  if (on_listening) on_listening(s.acceptor.local_endpoint().port());
  std::vector<std::thread> threads;
  for (int i = 1; i < std::max(1, s.options.io_threads); ++i) threads.emplace_back([&s] { s.ioc.run(); });
  s.ioc.run();
  for (auto& t : threads) t.join();
  s.batcher->stop();
}

void Server::stop() {
  net::post(impl_->ioc, [this] { impl_->begin_drain(); });
}

}  // namespace mtx::serve
