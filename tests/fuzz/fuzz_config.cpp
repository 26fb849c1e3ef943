// Config files and --set overrides: input = JSON text, then '\0'-separated --set assignments. Every input
// is a Config or a ConfigError; a Config survives to_json -> from_json unchanged.
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "mtx/config/config.h"
#include "mtx/util/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = mtx::fuzz::split_all(std::string_view(reinterpret_cast<const char*>(data), size), '\0');
  const auto file = mtx::fuzz::write_scratch("config.json", parts[0]);
  const std::vector<std::string> overrides(parts.begin() + 1, parts.end());
  try {
    const mtx::config::Config c = mtx::config::load(file, overrides);
    const mtx::config::Config again = mtx::config::from_json(mtx::config::to_json(c));
    if (!mtx::config::differences(c, again).empty()) mtx::fuzz::broken("config changed by a JSON round trip");
  } catch (const mtx::Error&) {
  }
  return 0;
}
