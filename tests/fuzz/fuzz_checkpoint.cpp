// Checkpoints: input = a whole .pt file (seeded with a real one by scripts/fuzz.sh). Reading it gives a
// checkpoint whose parts all check out, or a DataError naming the file; the JSON parts on their own
// (training state, config) are read by train_state_from_json / config::from_json, which may refuse a
// document but never crash. Nothing else is allowed.
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "mtx/train/checkpoint.h"
#include "mtx/util/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto path = mtx::fuzz::write_scratch("fuzz.pt", bytes);
  try {
    auto c = mtx::train::load_checkpoint(path);
    if (mtx::train::weights_sha256(c.model) != c.weights_sha256) mtx::fuzz::broken("weights loaded unchecked");
  } catch (const mtx::DataError& e) {
    if (std::string_view(e.what()).find(path.string()) == std::string_view::npos) {
      mtx::fuzz::broken("a checkpoint error that does not name the file");
    }
  }
  // The same bytes as the JSON of a training state or config (what a checkpoint's header holds).
  const auto doc = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_discarded()) {
    try {
      const auto s = mtx::train::train_state_from_json(doc);
      if (mtx::train::to_json(mtx::train::train_state_from_json(mtx::train::to_json(s))) != mtx::train::to_json(s)) {
        mtx::fuzz::broken("training state changed by a JSON round trip");
      }
    } catch (const nlohmann::json::exception&) {  // load_checkpoint maps these to a DataError
    } catch (const mtx::Error&) {
    }
    try {
      mtx::config::from_json(doc);
    } catch (const mtx::Error&) {
    }
  }
  return 0;
}
