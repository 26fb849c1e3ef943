#include "mtx/train/average.h"

#include <torch/torch.h>

#include "mtx/train/checkpoint.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"

namespace mtx::train {

void average_checkpoints(const std::vector<std::filesystem::path>& inputs, const std::filesystem::path& out) {
  if (inputs.empty()) throw ConfigError("average: no checkpoint given");
  for (const auto& p : inputs) {
    if (!std::filesystem::exists(p)) throw DataError("average: checkpoint '" + p.string() + "' not found");
  }
  torch::NoGradGuard no_grad;
  CheckpointContent last = load_checkpoint(inputs.back());
  const nlohmann::json model_config = config::to_json(last.config)["model"];
  const std::string tok_hash = last.tokenizer->hash();
  // Sums in double precision, keyed by parameter/buffer name.
  std::vector<std::pair<std::string, torch::Tensor>> sums;
  for (const auto& item : last.model->named_parameters()) {
    sums.emplace_back(item.key(), torch::zeros_like(item.value(), torch::kDouble));
  }
  for (const auto& item : last.model->named_buffers()) {
    sums.emplace_back(item.key(), torch::zeros_like(item.value(), torch::kDouble));
  }
  for (const auto& path : inputs) {
    CheckpointContent c = path == inputs.back() ? std::move(last) : load_checkpoint(path);
    if (config::to_json(c.config)["model"] != model_config) {
      throw DataError("average: '" + path.string() + "' is a different model than '" + inputs.back().string() +
                      "' (model config differs: " + config::to_json(c.config)["model"].dump() + " vs " +
                      model_config.dump() + ")");
    }
    if (c.tokenizer->hash() != tok_hash) {
      throw DataError("average: '" + path.string() + "' has a different tokenizer than '" + inputs.back().string() +
                      "'");
    }
    auto params = c.model->named_parameters();
    auto buffers = c.model->named_buffers();
    for (auto& [name, sum] : sums) {
      const torch::Tensor* t = params.find(name);
      if (!t) t = buffers.find(name);
      if (!t || t->sizes() != sum.sizes()) {
        throw DataError("average: '" + path.string() + "' has no tensor '" + name + "' of shape " +
                        c10::str(sum.sizes()));
      }
      sum.add_(t->to(torch::kDouble));
    }
    if (path == inputs.back()) last = std::move(c);
  }
  auto params = last.model->named_parameters();
  auto buffers = last.model->named_buffers();
  for (auto& [name, sum] : sums) {
    torch::Tensor* t = params.find(name);
    if (!t) t = buffers.find(name);
    t->copy_(sum / double(inputs.size()));
  }
  save_checkpoint(out, last.config, *last.tokenizer, last.model, nullptr, last.state);
  log::info("averaged {} checkpoints into {}", inputs.size(), out.string());
}

}  // namespace mtx::train
