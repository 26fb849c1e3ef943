#include "mtx/util/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "mtx/util/errors.h"

namespace mtx::log {
namespace {

std::atomic<Level> g_level{Level::info};
std::string g_prefix;
std::mutex g_sink_mutex;
std::shared_ptr<const Sink> g_sink;  // null: stderr

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto l = std::make_shared<spdlog::logger>("mtx", sink);
    l->set_pattern("[%Y-%m-%d %H:%M:%S] [%^%l%$] %v");
    l->set_level(spdlog::level::trace);
    return l;
  }();
  return *instance;
}

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::debug:
      return spdlog::level::debug;
    case Level::info:
      return spdlog::level::info;
    case Level::warn:
      return spdlog::level::warn;
    case Level::error:
      return spdlog::level::err;
    case Level::off:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

}  // namespace

void set_level(Level level) { g_level = level; }
void set_prefix(std::string prefix) { g_prefix = std::move(prefix); }
const std::string& prefix() { return g_prefix; }
Level level() { return g_level; }

Level parse_level(std::string_view name) {
  if (name == "debug") return Level::debug;
  if (name == "info") return Level::info;
  if (name == "warn") return Level::warn;
  if (name == "error") return Level::error;
  if (name == "off") return Level::off;
  throw ConfigError("--log-level: expected debug|info|warn|error|off, got '" + std::string(name) + "'");
}

void set_sink(Sink sink) {
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  g_sink = sink ? std::make_shared<const Sink>(std::move(sink)) : nullptr;
}

void write(Level level, std::string_view message) {
  if (level < g_level.load() || level == Level::off) return;
  std::shared_ptr<const Sink> sink;
  {
    std::lock_guard<std::mutex> lock(g_sink_mutex);
    sink = g_sink;
  }
  if (sink) {
    (*sink)(level, g_prefix.empty() ? message : std::string_view(g_prefix + std::string(message)));
    return;
  }
  logger().log(to_spdlog(level), "{}{}", g_prefix, message);
  logger().flush();
}

}  // namespace mtx::log
