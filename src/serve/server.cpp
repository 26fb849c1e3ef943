// The HTTP side of mtx serve. Boost.Beast over Asio: one io_context with a few threads serves any number of
// keep-alive connections asynchronously (no thread per client, unlike cpp-httplib's blocking pool, where each open
// connection holds a pool thread), with Beast's parser for requests and body limits (no hand-written HTTP).
// Translation runs on the batcher's thread; its results are posted back to each connection's strand.
#include "mtx/serve/server.h"

#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <atomic>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>

#include "mtx/decode/align.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"
#include "mtx/util/system.h"
#include "mtx/util/utf8.h"

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;

namespace mtx::serve {
namespace {

extern const char* const kPage;

// A Prometheus histogram with fixed upper bounds.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void add(double v) {
    size_t i = 0;
    while (i < bounds_.size() && v > bounds_[i]) ++i;
    ++counts_[i];
    sum_ += v;
    ++n_;
  }
  void write(std::ostream& out, const std::string& name, const std::string& help) const {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
    int64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
      cumulative += counts_[i];
      out << name << "_bucket{le=\"" << bounds_[i] << "\"} " << cumulative << "\n";
    }
    out << name << "_bucket{le=\"+Inf\"} " << n_ << "\n"
        << name << "_sum " << sum_ << "\n"
        << name << "_count " << n_ << "\n";
  }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;
  double sum_ = 0;
  int64_t n_ = 0;
};

struct Metrics {
  std::mutex mutex;
  std::map<int, int64_t> requests;  // by status
  int64_t sentences = 0, source_tokens = 0, generated_tokens = 0, batches = 0, max_batch_requests = 0;
  int64_t joined_requests = 0, joined_sentences = 0;  // continuous batching: taken into running batches
  Histogram batch_sentences{{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}};
  Histogram batch_tokens{{16, 64, 256, 1024, 4096, 16384, 65536}};
  Histogram batch_requests{{1, 2, 4, 8, 16, 32, 64, 128}};
  Histogram latency{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}};
};

// An answer with a one-line reason.
struct HttpError {
  http::status status;
  std::string reason;
};

}  // namespace

struct Server::Impl {
  std::vector<ServedModel> models;
  ServerOptions options;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  net::signal_set signals{ioc, SIGINT, SIGTERM};
  std::unique_ptr<Batcher> batcher;
  Metrics metrics;
  std::atomic<int64_t> in_flight{0};
  std::atomic<bool> draining{false};
  net::steady_timer drain_timer{ioc};

  Impl(std::vector<ServedModel> m, ServerOptions o) : models(std::move(m)), options(std::move(o)) {
    if (models.empty()) throw ConfigError("serve: no model (--ckpt)");
    if (options.eager_batches) options.batching.outstanding = [this] { return in_flight.load(); };
    if (options.batches > 1) {
      options.batching.threads = options.batches;
      options.batching.thread_init = use_one_thread_here;
    }
    batcher = std::make_unique<Batcher>(
        options.batching,
        [this](const BatchKey& key, const auto& sources, const decode::SentenceDone& finished,
               const Batcher::More& more) { return translate(key, sources, finished, more); },
        [this](const BatchRecord& r) {
          std::lock_guard<std::mutex> lock(metrics.mutex);
          metrics.max_batch_requests = std::max(metrics.max_batch_requests, r.batch_jobs);
          if (r.joined) {
            metrics.joined_requests += r.jobs;
            metrics.joined_sentences += r.sentences;
            return;
          }
          ++metrics.batches;
          metrics.batch_sentences.add(double(r.sentences));
          metrics.batch_tokens.add(double(r.tokens));
          metrics.batch_requests.add(double(r.jobs));
        });
  }

  const ServedModel* find(const std::string& name) const {
    for (const auto& m : models) {
      if (m.name == name) return &m;
    }
    return nullptr;
  }

  // Each request is answered as soon as its own sentences are translated (`finished`), not when its batch ends.
  // A batch that is one search (one per thread) takes in more requests as it goes (`more`: continuous batching).
  Hypotheses translate(const BatchKey& key, const std::vector<std::vector<int32_t>>& sources,
                       const decode::SentenceDone& finished, const Batcher::More& more) {
    const ServedModel& m = *find(key.model);
    decode::TranslateOptions o = decode::options_from_config(m.bundle.config.decode);
    o.search.beam = key.beam;
    o.search.nbest = key.nbest;
    o.search.alpha = key.alpha;
    o.search.scores = key.scores;
    o.workers = options.batches > 1 ? 1 : options.workers;
    decode::Translator translator(m.bundle.model, *m.bundle.tokenizer, o);
    if (o.workers == 1) return translator.translate_continuously(sources, more, finished);
    return translator.translate_ids(sources, finished);
  }

  void count(int status, double seconds) {
    std::lock_guard<std::mutex> lock(metrics.mutex);
    ++metrics.requests[status];
    if (seconds >= 0) metrics.latency.add(seconds);
  }

  std::string metrics_text() {
    std::ostringstream out;
    std::lock_guard<std::mutex> lock(metrics.mutex);
    out << "# HELP mtx_requests_total Requests answered, by HTTP status.\n# TYPE mtx_requests_total counter\n";
    for (const auto& [status, n] : metrics.requests)
      out << "mtx_requests_total{status=\"" << status << "\"} " << n << "\n";
    const std::array<std::tuple<const char*, const char*, int64_t>, 6> counters = {
        {{"mtx_sentences_total", "Sentences translated.", metrics.sentences},
         {"mtx_source_tokens_total", "Source tokens translated (EOS included).", metrics.source_tokens},
         {"mtx_generated_tokens_total", "Target tokens generated (best hypotheses, EOS included).",
          metrics.generated_tokens},
         {"mtx_batches_total", "Batches translated.", metrics.batches},
         {"mtx_joined_requests_total", "Requests taken into a batch while it ran (continuous batching).",
          metrics.joined_requests},
         {"mtx_joined_sentences_total", "Sentences taken into a batch while it ran.", metrics.joined_sentences}}};
    for (const auto& [name, help, v] : counters) {
      out << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n" << name << " " << v << "\n";
    }
    out << "# HELP mtx_queue_sentences Sentences waiting for a batch.\n# TYPE mtx_queue_sentences gauge\n"
        << "mtx_queue_sentences " << batcher->queued_sentences() << "\n";
    out << "# HELP mtx_requests_in_flight Translation requests accepted and not yet answered.\n"
        << "# TYPE mtx_requests_in_flight gauge\nmtx_requests_in_flight " << in_flight.load() << "\n";
    out << "# HELP mtx_batch_requests_max The most requests that shared one batch (those that joined it included).\n"
        << "# TYPE mtx_batch_requests_max gauge\nmtx_batch_requests_max " << metrics.max_batch_requests << "\n";
    metrics.batch_sentences.write(out, "mtx_batch_sentences", "Sentences per batch.");
    metrics.batch_tokens.write(out, "mtx_batch_tokens", "Source tokens per batch (EOS included).");
    metrics.batch_requests.write(out, "mtx_batch_requests", "Requests per batch.");
    metrics.latency.write(out, "mtx_request_duration_seconds", "Translation request latency, read to answer.");
    return out.str();
  }

  json models_json() const {
    json list = json::array();
    for (const auto& m : models) {
      const auto& c = m.bundle.config;
      list.push_back({{"name", m.name},
                      {"path", m.bundle.path.string()},
                      {"source_language", c.data.src_lang},
                      {"target_language", c.data.tgt_lang},
                      {"direction", c.data.src_lang + "-" + c.data.tgt_lang},
                      {"parameters", m.bundle.model->parameter_count()},
                      {"quantization", m.quantization},
                      {"weights_sha256", m.bundle.weights_sha256},
                      {"max_source_tokens", c.model.max_len - 1},
                      {"beam", c.decode.beam},
                      {"alpha", c.decode.alpha}});
    }
    return {{"models", list}, {"default", models.front().name}};
  }

  // A translation request's body: the job to queue (its sources tokenized) or the reason it cannot be.
  struct Parsed {
    std::shared_ptr<Job> job;
    const ServedModel* model = nullptr;
    bool single = false, scores = false, alignment = false;
  };
  Parsed parse_translate(const std::string& body) const {
    json doc;
    try {
      doc = json::parse(body);
    } catch (const json::exception& e) {
      throw HttpError{http::status::bad_request, "invalid JSON: " + std::string(e.what()).substr(0, 160)};
    }
    auto bad = [](const std::string& reason) { return HttpError{http::status::bad_request, reason}; };
    if (!doc.is_object()) throw bad("the body must be a JSON object with \"text\"");
    for (const auto& item : doc.items()) {
      static const std::array<const char*, 7> known = {"text",  "model",  "beam",     "nbest",
                                                       "alpha", "scores", "alignment"};
      const std::string& k = item.key();
      if (std::find_if(known.begin(), known.end(), [&](const char* n) { return k == n; }) == known.end()) {
        throw bad("unknown field \"" + k + "\" (text, model, beam, nbest, alpha, scores, alignment)");
      }
    }
    Parsed p;
    const std::string model_name =
        doc.contains("model")
            ? (doc["model"].is_string() ? doc["model"].get<std::string>() : throw bad("\"model\" must be a string"))
            : models.front().name;
    p.model = find(model_name);
    if (!p.model) {
      std::string names;
      for (const auto& m : models) names += (names.empty() ? "" : ", ") + m.name;
      throw bad("unknown model \"" + model_name + "\" (serving: " + names + ")");
    }
    const auto& decode = p.model->bundle.config.decode;
    auto integer = [&](const char* key, int fallback, int lo, int hi) {
      if (!doc.contains(key)) return fallback;
      if (!doc[key].is_number_integer()) throw bad(std::string("\"") + key + "\" must be an integer");
      const auto v = doc[key].get<int64_t>();
      if (v < lo || v > hi) {
        throw bad(std::string("\"") + key + "\" must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      }
      return int(v);
    };
    auto boolean = [&](const char* key) {
      if (!doc.contains(key)) return false;
      if (!doc[key].is_boolean()) throw bad(std::string("\"") + key + "\" must be true or false");
      return doc[key].get<bool>();
    };
    auto job = std::make_shared<Job>();
    job->key.model = model_name;
    job->key.beam = integer("beam", decode.beam, 1, options.max_beam);
    job->key.nbest = integer("nbest", 1, 1, job->key.beam);
    job->key.alpha = decode.alpha;
    if (doc.contains("alpha")) {
      if (!doc["alpha"].is_number() || !(doc["alpha"].get<double>() >= 0) ||
          !std::isfinite(doc["alpha"].get<double>())) {
        throw bad("\"alpha\" must be a number >= 0");
      }
      job->key.alpha = doc["alpha"].get<double>();
    }
    p.scores = boolean("scores");
    job->key.scores = p.scores || job->key.nbest > 1 || job->key.beam > 1;  // only greedy search leaves them out
    p.alignment = boolean("alignment");
    if (!doc.contains("text")) throw bad("\"text\" is missing: a string or a list of strings");
    std::vector<std::string> lines;
    if (doc["text"].is_string()) {
      p.single = true;
      lines.push_back(doc["text"].get<std::string>());
    } else if (doc["text"].is_array() && !doc["text"].empty()) {
      for (const auto& t : doc["text"]) {
        if (!t.is_string()) throw bad("\"text\" must be a string or a list of strings");
        lines.push_back(t.get<std::string>());
      }
    } else {
      throw bad("\"text\" must be a string or a non-empty list of strings");
    }
    const auto& tok = *p.model->bundle.tokenizer;
    const int64_t longest = int64_t(p.model->bundle.config.model.max_len) - 1;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string where = p.single ? "\"text\"" : "\"text\"[" + std::to_string(i) + "]";
      const size_t invalid = utf8::find_invalid(lines[i]);
      if (invalid != utf8::kValid) throw bad(where + " is not valid UTF-8 (byte " + std::to_string(invalid) + ")");
      if (lines[i].find_first_of("\r\n") != std::string::npos) throw bad(where + " holds a line break: one line each");
      if (lines[i].find_first_not_of(" \t\f\v") == std::string::npos) throw bad(where + " is empty");
      std::vector<int32_t> ids = tok.src().encode(lines[i]);
      if (ids.empty()) throw bad(where + " is empty");
      if (int64_t(ids.size()) > longest) {
        throw bad(where + " has " + std::to_string(ids.size()) + " pieces; the model takes at most " +
                  std::to_string(longest));
      }
      job->sources.push_back(std::move(ids));
    }
    p.job = std::move(job);
    return p;
  }

  json answer(const Parsed& p, const Hypotheses& hyps) {
    const auto& tok = *p.model->bundle.tokenizer;
    json list = json::array();
    int64_t generated = 0, source = 0;
    for (size_t i = 0; i < hyps.size(); ++i) {
      const auto& h = hyps[i];
      source += int64_t(p.job->sources[i].size()) + 1;
      json t = {{"text", h.empty() ? "" : tok.tgt().decode(h.front().tokens)}};
      if (!h.empty()) generated += int64_t(h.front().tokens.size()) + 1;
      if (p.scores && !h.empty()) t["score"] = h.front().score;
      if (p.alignment) {
        // On a batch thread, possibly while searches run: cross_attention leaves the model as it is.
        model::Transformer model = p.model->bundle.model;
        t["alignment"] =
            h.empty() ? "" : decode::pharaoh(decode::align_words(model, tok, p.job->sources[i], h.front().tokens));
      }
      if (p.job->key.nbest > 1) {
        json alternatives = json::array();
        for (const auto& alt : h)
          alternatives.push_back({{"text", tok.tgt().decode(alt.tokens)}, {"score", alt.score}});
        t["nbest"] = alternatives;
      }
      list.push_back(t);
    }
    {
      std::lock_guard<std::mutex> lock(metrics.mutex);
      metrics.sentences += int64_t(hyps.size());
      metrics.source_tokens += source;
      metrics.generated_tokens += generated;
    }
    return {{"translations", list}, {"model", p.model->name}};
  }

  void begin_drain() {
    if (draining.exchange(true)) return;
    log::info("serve: draining: no new connections; finishing {} request(s) in flight", in_flight.load());
    beast::error_code ec;
    acceptor.close(ec);
    check_drained();
  }
  void check_drained() {
    if (in_flight.load() == 0) {
      ioc.stop();
      return;
    }
    drain_timer.expires_after(std::chrono::milliseconds(10));
    drain_timer.async_wait([this](beast::error_code) { check_drained(); });
  }

  void accept();
};

namespace {

using Response = http::response<http::string_body>;

Response make_response(http::status status, std::string body, const char* type, unsigned version, bool keep_alive) {
  Response res{status, version};
  res.set(http::field::server, "mtx");
  res.set(http::field::content_type, type);
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

// JSON text of a document that may hold bytes a client sent: invalid UTF-8 becomes U+FFFD, never an exception.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

Response error_response(const HttpError& e, unsigned version, bool keep_alive) {
  return make_response(e.status, dump(json{{"error", e.reason}}) + "\n", "application/json", version, keep_alive);
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Server::Impl& server) : stream_(std::move(socket)), server_(server) {}
  void start() { read(); }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(uint64_t(server_.options.max_request_bytes));
    stream_.expires_after(std::chrono::seconds(120));  // an idle keep-alive connection closes
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec == http::error::body_limit) {
      const HttpError e{http::status::payload_too_large,
                        "the body is over " + std::to_string(server_.options.max_request_bytes) + " bytes"};
      server_.count(int(e.status), -1);
      return write(error_response(e, 11, false));
    }
    if (ec) return close();
    request_ = parser_->release();
    started_ = std::chrono::steady_clock::now();
    handle();
  }

  void handle() {
    const bool keep = request_.keep_alive() && !server_.draining.load();
    const unsigned version = request_.version();
    const std::string full(request_.target());
    const std::string target = full.substr(0, full.find('?'));  // the path; the page reads its own query
    auto send = [&](http::status status, std::string body, const char* type) {
      server_.count(int(status), -1);
      write(make_response(status, std::move(body), type, version, keep));
    };
    try {
      if (target == "/v1/translate") {
        if (request_.method() != http::verb::post)
          throw HttpError{http::status::method_not_allowed, "POST a JSON body"};
        if (server_.draining.load()) throw HttpError{http::status::service_unavailable, "the server is shutting down"};
        return translate(keep, version);
      }
      if (request_.method() != http::verb::get && request_.method() != http::verb::head) {
        throw HttpError{http::status::method_not_allowed, "GET " + target};
      }
      if (target == "/health") return send(http::status::ok, "{\"status\":\"ok\"}\n", "application/json");
      if (target == "/v1/models")
        return send(http::status::ok, server_.models_json().dump() + "\n", "application/json");
      if (target == "/metrics") return send(http::status::ok, server_.metrics_text(), "text/plain; version=0.0.4");
      if (target == "/" || target == "/index.html") return send(http::status::ok, kPage, "text/html; charset=utf-8");
      throw HttpError{http::status::not_found, "no such path: " + target};
    } catch (const HttpError& e) {
      server_.count(int(e.status), -1);
      write(error_response(e, version, keep));
    } catch (const std::exception& e) {
      const HttpError internal{http::status::internal_server_error, bundle::short_what(e)};
      server_.count(int(internal.status), -1);
      write(error_response(internal, version, false));
    }
  }

  void translate(bool keep, unsigned version) {
    auto parsed = std::make_shared<Server::Impl::Parsed>(server_.parse_translate(request_.body()));
    const int fd = stream_.socket().native_handle();
    parsed->job->gone = [fd] {
      char c;
      const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
      return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    };
    auto self = shared_from_this();
    parsed->job->done = [self, parsed, keep, version](Hypotheses hyps, const std::string& error) {
      if (error == kClientGone) {  // nobody to answer: counted as nginx's 499
        net::post(self->stream_.get_executor(), [self] {
          self->server_.count(499, -1);
          --self->server_.in_flight;
          self->close();
        });
        return;
      }
      // On the batch thread: the answer is built here, written on the connection's strand.
      Response res = error.empty() ? make_response(http::status::ok, dump(self->server_.answer(*parsed, hyps)) + "\n",
                                                   "application/json", version, keep)
                                   : error_response({http::status::internal_server_error, error}, version, false);
      net::post(self->stream_.get_executor(), [self, res = std::move(res)]() mutable {
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - self->started_).count();
        self->server_.count(int(res.result()), seconds);
        self->in_flight_ = true;
        self->write(std::move(res));
      });
    };
    ++server_.in_flight;
    if (!server_.batcher->submit(parsed->job)) {
      --server_.in_flight;
      Response res = error_response({http::status::too_many_requests, "the queue is full; retry later"}, version, keep);
      res.set(http::field::retry_after, "1");
      server_.count(429, -1);
      return write(std::move(res));
    }
  }

  void write(Response res) {
    auto shared = std::make_shared<Response>(std::move(res));
    http::async_write(stream_, *shared, [self = shared_from_this(), shared](beast::error_code ec, std::size_t) {
      if (self->in_flight_) {
        self->in_flight_ = false;
        --self->server_.in_flight;
      }
      if (ec || !shared->keep_alive()) return self->close();
      self->read();
    });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  std::chrono::steady_clock::time_point started_;
  bool in_flight_ = false;  // the response being written answers a queued translation
  Server::Impl& server_;
};

}  // namespace

void Server::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) return;  // closed: draining
    std::make_shared<Session>(std::move(socket), *this)->start();
    accept();
  });
}

Server::Server(std::vector<ServedModel> models, ServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(models), std::move(options))) {}

Server::~Server() = default;

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
  s.signals.async_wait([&s](beast::error_code e, int) {
    if (!e) s.begin_drain();
  });
  s.accept();
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

namespace {

// The page at /: a box for the source, the translation below.
const char* const kPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>mtx</title>
<style>
body { font-family: sans-serif; max-width: 48rem; margin: 2rem auto; padding: 0 1rem; }
textarea { width: 100%; height: 6rem; font-size: 1rem; }
#out { margin-top: 1rem; font-size: 1.1rem; min-height: 2rem; white-space: pre-wrap; }
.pair { margin-bottom: 0.8rem; } .src { color: #555; } .w { padding: 0 1px; }
.hl { background: #ffe08a; }
#err { color: #a00; }
</style>
</head>
<body>
<h1>mtx</h1>
<form id="form">
<textarea id="src" placeholder="One sentence per line"></textarea>
<p><select id="model"></select> <button type="submit" id="go">Translate</button></p>
</form>
<div id="out"></div>
<div id="pairs"></div>
<div id="err"></div>
<script>
const models = document.getElementById('model');
fetch('/v1/models').then(r => r.json()).then(m => {
  for (const x of m.models) { const o = document.createElement('option'); o.value = o.textContent = x.name; models.appendChild(o); }
});
const form = document.getElementById('form');
form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const lines = document.getElementById('src').value.split('\n').filter(l => l.trim() !== '');
  const out = document.getElementById('out'), err = document.getElementById('err');
  out.textContent = ''; err.textContent = '';
  if (!lines.length) return;
  const r = await fetch('/v1/translate', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                          body: JSON.stringify({text: lines, model: models.value || undefined,
                                                                alignment: true})});
  const body = await r.json();
  if (!r.ok) { err.textContent = body.error; return; }
  out.textContent = body.translations.map(t => t.text).join('\n');
  // Each pair: the source words, the translation's words; hovering a target word lights the source word it
  // attended to most (the Pharaoh pairs "src-tgt").
  const pairs = document.getElementById('pairs');
  pairs.textContent = '';
  body.translations.forEach((t, i) => {
    const div = document.createElement('div'); div.className = 'pair';
    const words = (s, cls) => { const p = document.createElement('div'); p.className = cls;
      const spans = s.split(/\s+/).filter(w => w).map(w => { const e = document.createElement('span');
        e.className = 'w'; e.textContent = w; p.appendChild(e); p.appendChild(document.createTextNode(' ')); return e; });
      div.appendChild(p); return spans; };
    const src = words(lines[i], 'src'), tgt = words(t.text, 'tgt');
    for (const link of (t.alignment || '').split(' ').filter(x => x)) {
      const [s, w] = link.split('-').map(Number);
      if (!tgt[w] || !src[s]) continue;
      tgt[w].dataset.src = s;
      tgt[w].addEventListener('mouseenter', () => { src[s].classList.add('hl'); tgt[w].classList.add('hl'); });
      tgt[w].addEventListener('mouseleave', () => { src[s].classList.remove('hl'); tgt[w].classList.remove('hl'); });
    }
    pairs.appendChild(div);
  });
  out.dataset.done = 'yes';
});
// /?text=...: the box filled and submitted, as if typed (links to a translation; the headless browser test).
const given = new URLSearchParams(location.search).get('text');
if (given !== null) { document.getElementById('src').value = given; form.requestSubmit(); }
</script>
</body>
</html>
)HTML";

}  // namespace

}  // namespace mtx::serve
