// mtx serve: translation over HTTP with cross-request batching (serve/server.h; docs/serving.md).
#include "commands.h"
#include "mtx/serve/server.h"
#include "mtx/util/device.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"
#include "mtx/util/system.h"

#include <filesystem>

namespace mtx::cli {

struct ServeArgs {
  std::vector<std::string> ckpts;  // PATH or NAME=PATH
  QuantizeArgs quantize;
  std::string device = "auto";
  int threads = 0;
  serve::ServerOptions server;
};

namespace {

int run_serve(ServeArgs& a) {
  const torch::Device device = select_device(parse_device(inference_device(a.device, a.quantize)), "--device");
  std::vector<serve::ServedModel> models;
  for (const auto& spec : a.ckpts) {
    const size_t eq = spec.find('=');
    const std::string path = eq == std::string::npos ? spec : spec.substr(eq + 1);
    std::string name = eq == std::string::npos ? std::filesystem::path(path).stem().string() : spec.substr(0, eq);
    for (const auto& m : models) {
      if (m.name == name) throw ConfigError("--ckpt: two models are called '" + name + "': name them (NAME=PATH)");
    }
    TranslationModels loaded = load_translation_models({path}, device, a.quantize);
    const bool int8 = loaded.bundles.front().model->is_int8();
    models.push_back({name, std::move(loaded.bundles.front()), int8 ? "int8" : "none"});
  }
  set_threads(a.threads);
  if (a.server.batches == 0) a.server.batches = runtime_info().threads;  // one batch per translation thread
  if (runtime_info().threads == 1) a.server.workers = 1;                 // one thread: each batch is one search
  serve::Server server(std::move(models), a.server);
  server.run([&](int port) {
    log::info("serving on http://{}:{} (POST /v1/translate, GET /health /v1/models /metrics /)", a.server.host, port);
  });
  log::info("serve: stopped");
  return 0;
}

}  // namespace

Command add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "Translate over HTTP: cross-request batching, limits, metrics, a page");
  cmd->add_option("--ckpt", a->ckpts, "A model to serve, PATH or NAME=PATH (repeat; the first is the default)")
      ->required();
  cmd->add_option("--host", a->server.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", a->server.port, "Port (0: any free one, printed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--max-batch-tokens", a->server.batching.max_batch_tokens,
                  "Source tokens per batch, pooled across requests")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-wait-ms", a->server.batching.max_wait_ms,
                  "How long a batch waits for other requests after its oldest arrived")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("!--no-eager-batches", a->server.eager_batches,
                "Always wait --max-wait-ms for company, even when every request in flight is already queued");
  cmd->add_flag("!--no-continuous-batching", a->server.batching.continuous,
                "Never take requests into a running batch: each batch runs as it started");
  cmd->add_option("--max-queue", a->server.batching.max_queue, "Sentences waiting at most; past it, 429")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-request-bytes", a->server.max_request_bytes, "Larger request bodies get 413")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--threads", a->threads, "CPU threads for translation (0 = one per core)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--workers", a->server.workers, "Searches at once on the CPU (0 = one per thread)")
      ->check(CLI::NonNegativeNumber);
  a->server.batches = 0;
  cmd->add_option("--batches", a->server.batches,
                  "Batches translated at once, each one search on one CPU thread (default: one per thread; 1: one "
                  "batch, its searches on every thread)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--io-threads", a->server.io_threads, "Threads that read and write connections")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--device", a->device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  add_quantize_flags(*cmd, a->quantize);
  return {cmd, [a] { return run_serve(*a); }};
}

}  // namespace mtx::cli
