// Shared by the serve tests of the API and of the connection layer (serve_api_test.cpp, serve_server_test.cpp):
// HTTP clients for a server on 127.0.0.1, the /metrics reader, the sentences they send and the ServeTest fixture.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/verb.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mtx/serve/server.h"
#include "test_utils.h"

namespace mtx::test {

struct Reply {
  int status = 0;
  std::string body;
  std::string retry_after;
  std::map<std::string, std::string> headers;  // lower-case names
};

// One HTTP/1.1 exchange on a fresh connection (60 s at most: a server that stops answering fails the test, it
// does not hang it). `headers` are added to Host and Content-Type (application/json unless given).
Reply call(int port, boost::beast::http::verb verb, const std::string& target, const std::string& body = "",
           const std::map<std::string, std::string>& headers = {});

// POST /v1/translate with `body`.
Reply post(int port, const nlohmann::json& body);

// A raw connection: bytes out, whatever comes back until the server closes or `wait` passes.
class Raw {
 public:
  explicit Raw(int port);
  void send(const std::string& bytes);
  std::string read_all(std::chrono::milliseconds wait);
  // Whatever comes back until it holds `marker` (the connection stays open) or `wait` passes (then it is closed).
  std::string read_until(const std::string& marker, std::chrono::milliseconds wait);
  void close();

 private:
  boost::asio::io_context ioc_;
  boost::beast::tcp_stream stream_;
};

// The metric's value in a /metrics text (-1: absent).
double metric(const std::string& text, const std::string& name);

inline const std::vector<std::string> kSentences = {
    "ein Hund läuft",           "zwei Männer spielen Fußball im Park heute", "Kinder",
    "eine Frau liest ein Buch", "ein Mann fährt Fahrrad und ein Hund läuft", "ein Hund"};

// n lines, each two of kSentences joined by "und": requests of many tokens.
std::vector<std::string> long_sentences(size_t n);

}  // namespace mtx::test

// A toy model (random weights, the toy corpus's tokenizer), served in this process on a free port (in the global
// namespace: gtest's test classes derive from it, and its name is the ServeTest.* tests' suite).
class ServeTest : public ::testing::Test {
 protected:
  void start(mtx::serve::ServerOptions options);
  void TearDown() override;
  mtx::test::TempDir tmp;
  std::unique_ptr<mtx::serve::Server> server;
  std::thread thread;
  int port = 0;
  bool ssru = false;
  void check_clients_at_once();  // ServeTest.ATranslationIsTheSameAloneOrAmong127OtherClients, per decoder  // set
                                 // before start(): the toy model's decoder has Marian's SSRU (model.decoder_autoreg)
};
