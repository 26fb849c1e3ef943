// The serve tests' shared helpers (serve_test_utils.h).
#include "serve_test_utils.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <cctype>
#include <functional>
#include <future>
#include <regex>
#include <stdexcept>

#include "mtx/bundle/bundle.h"
#include "mtx/data/prepare.h"

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;
using namespace mtx;
using namespace std::chrono_literals;

namespace mtx::test {

Reply call(int port, http::verb verb, const std::string& target, const std::string& body,
           const std::map<std::string, std::string>& headers) {
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

Reply post(int port, const json& body) { return call(port, http::verb::post, "/v1/translate", body.dump()); }

Raw::Raw(int port) : stream_(ioc_) {
  stream_.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
}

void Raw::send(const std::string& bytes) { net::write(stream_.socket(), net::buffer(bytes)); }

std::string Raw::read_all(std::chrono::milliseconds wait) {
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

std::string Raw::read_until(const std::string& marker, std::chrono::milliseconds wait) {
  std::string out;
  char buf[4096];
  stream_.expires_after(wait);
  std::function<void(beast::error_code, size_t)> more = [&](beast::error_code ec, size_t n) {
    out.append(buf, n);
    if (out.find(marker) != std::string::npos) return stream_.expires_never();
    if (!ec) stream_.async_read_some(net::buffer(buf), more);
  };
  stream_.async_read_some(net::buffer(buf), more);
  ioc_.restart();
  ioc_.run();
  return out;
}

void Raw::close() {
  beast::error_code ec;
  stream_.socket().close(ec);
}

double metric(const std::string& text, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(
          text, m,
          std::regex("\\n" + std::regex_replace(name, std::regex(R"([{}\"])"), R"(\$&)") + " ([0-9.e+-]+)\\n"))) {
    return -1;
  }
  return std::stod(m[1].str());
}

std::vector<std::string> long_sentences(size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(kSentences[i % kSentences.size()] + " und " + kSentences[(i + 1) % kSentences.size()]);
  return out;
}

}  // namespace mtx::test

void ServeTest::start(serve::ServerOptions options) {
  config::Config config = test::toy_setup(tmp);
  if (ssru) config.model.decoder_autoreg = config::DecoderAutoreg::ssru;
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

void ServeTest::TearDown() {
  if (server) server->stop();
  if (thread.joinable()) thread.join();
}
