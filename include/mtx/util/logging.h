// The one logging entry point of mtx: leveled, formatted (fmt syntax) messages on stderr, over spdlog.
// Nothing else includes spdlog; library code logs through these functions only.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace mtx::log {

enum class Level { debug, info, warn, error, off };

// Sets the minimum level shown; called once by the CLI (default: info).
void set_level(Level level);
Level level();
// Parses "debug" | "info" | "warn" | "error" | "off"; throws ConfigError otherwise.
Level parse_level(std::string_view name);

// Text put before every message (e.g. "[rank 1/2] " in a distributed run); set before threads start.
void set_prefix(std::string prefix);
const std::string& prefix();

void write(Level level, std::string_view message);

// Where messages go instead of stderr (e.g. the Python package's `logging`); called from any thread that logs,
// with the message and its prefix. An empty function puts stderr back.
using Sink = std::function<void(Level level, std::string_view message)>;
void set_sink(Sink sink);

template <class... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::debug) write(Level::debug, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::info) write(Level::info, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::warn) write(Level::warn, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::error) write(Level::error, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace mtx::log
