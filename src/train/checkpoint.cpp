#include "mtx/train/checkpoint.h"

#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <type_traits>

#include "mtx/bundle/bundle.h"
#include "mtx/util/errors.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtx::train {
namespace {

std::string tensor_bytes(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kCPU).contiguous();
  return std::string(reinterpret_cast<const char*>(c.data_ptr<uint8_t>()), size_t(c.numel()));
}

using bundle::short_what;

}  // namespace

namespace {

// JSON has no NaN or infinity: a non-finite number is written as null and read back as `missing`.
json number(double x) { return std::isfinite(x) ? json(x) : json(); }
double number_or(const json& j, const char* key, double missing) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return missing;
  if (!it->is_number()) throw DataError(std::string("training state: '") + key + "' is not a number: " + it->dump());
  return it->get<double>();
}

}  // namespace

json to_json(const TrainState& s) {
  return {{"step", s.step},
          {"epoch", s.epoch},
          {"position", {{"epoch", s.position.epoch}, {"index", s.position.index}}},
          {"tgt_tokens", s.tgt_tokens},
          {"elapsed_s", s.elapsed_s},
          {"best_metric", number(s.best_metric)},
          {"best_step", s.best_step},
          {"bad_validations", s.bad_validations},
          {"schedule", s.schedule},
          {"epoch_nll", s.epoch_nll},
          {"epoch_tokens", s.epoch_tokens},
          {"last_validation_step", s.last_validation_step},
          {"last_val_loss", number(s.last_val_loss)},
          {"last_val_ppl", number(s.last_val_ppl)},
          {"last_val_bleu", number(s.last_val_bleu)},
          {"world_size", s.world_size}};
}

namespace {

// An integer of the training state, as mtx writes it (a JSON integer): a float, string or out-of-range value is
// a DataError, never a conversion (fuzz_checkpoint: 3.4e29 into an int64_t is undefined behaviour).
template <class T = int64_t>
T integer(const json& j, const char* key) {
  const json& v = j.at(key);
  if (v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max()))
    return T(v.get<uint64_t>());
  if (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() >= int64_t(std::numeric_limits<T>::min()) &&
      v.get<int64_t>() <= int64_t(std::numeric_limits<T>::max())) {
    return T(v.get<int64_t>());
  }
  throw DataError(std::string("training state: '") + key + "' is not an integer of its range: " + v.dump());
}
template <class T = int64_t>
T integer_or(const json& j, const char* key, T missing) {
  return j.contains(key) ? integer<T>(j, key) : missing;
}
double real(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_number()) throw DataError(std::string("training state: '") + key + "' is not a number: " + v.dump());
  return v.get<double>();
}

}  // namespace

TrainState train_state_from_json(const json& j) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  if (!j.is_object()) throw DataError("training state: not a JSON object");
  TrainState s;
  s.step = integer(j, "step");
  s.epoch = integer(j, "epoch");
  const json& position = j.at("position");
  if (!position.is_object()) throw DataError("training state: 'position' is not an object");
  s.position = {integer<decltype(s.position.epoch)>(position, "epoch"),
                integer<decltype(s.position.index)>(position, "index")};
  s.tgt_tokens = integer(j, "tgt_tokens");
  s.elapsed_s = real(j, "elapsed_s");
  s.best_metric = number_or(j, "best_metric", std::numeric_limits<double>::infinity());
  s.best_step = integer(j, "best_step");
  s.bad_validations = integer<int>(j, "bad_validations");
  s.schedule = j.at("schedule");
  s.epoch_nll = number_or(j, "epoch_nll", 0.0);
  s.epoch_tokens = integer_or<int64_t>(j, "epoch_tokens", 0);
  s.last_validation_step = integer_or<int64_t>(j, "last_validation_step", -1);
  s.last_val_loss = number_or(j, "last_val_loss", kNaN);
  s.last_val_ppl = number_or(j, "last_val_ppl", kNaN);
  s.last_val_bleu = number_or(j, "last_val_bleu", kNaN);
  s.world_size = integer_or<int64_t>(j, "world_size", 1);
  if (s.world_size < 1) throw DataError("training state: 'world_size' must be >= 1");
  // Older checkpoints (no last_validation_step) were taken at an epoch's end before the epoch counter moved on.
  if (!j.contains("last_validation_step") && s.position.index == 0 && s.position.epoch > s.epoch) {
    s.epoch = s.position.epoch;
  }
  return s;
}

void save_checkpoint(const fs::path& path, const config::Config& config, const tokenizer::Tokenizer& tok,
                     model::Transformer& model, torch::optim::Optimizer* optimizer, const TrainState& state) {
  std::map<std::string, std::string> parts = {{"mtx_state", to_json(state).dump()}};
  if (optimizer) {  // serialized on its own, so that its bytes can be hashed and checked before they are parsed
    torch::serialize::OutputArchive opt;
    optimizer->save(opt);
    std::string bytes;
    opt.save_to([&bytes](const void* data, size_t n) -> size_t {
      bytes.append(static_cast<const char*>(data), n);
      return n;
    });
    parts.emplace("mtx_optimizer", std::move(bytes));
  }
  parts.emplace("rng_cpu", tensor_bytes(at::detail::getDefaultCPUGenerator().get_state()));
  if (torch::cuda::is_available()) {
    parts.emplace("rng_cuda", tensor_bytes(at::globalContext().defaultGenerator(at::kCUDA).get_state()));
  }
  bundle::save_bundle(path, config, tok, model, parts);
}

CheckpointContent load_checkpoint(const fs::path& path, const torch::Device& device) {
  bundle::ExtraParts extra;
  bundle::Bundle b = bundle::load_bundle(path, device, &extra);
  CheckpointContent c;
  c.path = path;
  c.config = std::move(b.config);
  c.tokenizer = std::move(b.tokenizer);
  c.model = b.model;
  c.weights_sha256 = std::move(b.weights_sha256);
  try {
    const auto state = extra.parts.find("mtx_state");
    if (state == extra.parts.end()) {
      throw DataError(path.string() +
                      ": no training state (a model bundle for inference, not a checkpoint to train on)");
    }
    c.state = train_state_from_json(json::parse(state->second));
  } catch (const DataError& e) {
    if (std::string(e.what()).rfind(path.string(), 0) == 0) throw;
    throw DataError(path.string() + ": damaged or not an mtx checkpoint (" + short_what(e) + ")");
  } catch (const std::exception& e) {
    throw DataError(path.string() + ": damaged or not an mtx checkpoint (" + short_what(e) + ")");
  }
  if (const auto it = extra.parts.find("mtx_optimizer"); it != extra.parts.end())
    c.optimizer_bytes = std::move(it->second);
  c.archive = extra.archive;
  return c;
}

namespace {

// The key under which an optimizer keeps a parameter's state: its TensorImpl address, as a pointer
// (LibTorch 2.x) or as text (1.x, what its c10::guts::to_string writes); picked by the key type.
[[maybe_unused]] void* state_key(const torch::Tensor& p, void* /*tag*/) { return p.unsafeGetTensorImpl(); }
[[maybe_unused]] std::string state_key(const torch::Tensor& p, const std::string& /*tag*/) {
  std::ostringstream address;
  address << p.unsafeGetTensorImpl();
  return address.str();
}

// The archive is read onto the CPU: each parameter's optimizer state goes where the parameter lives, so a
// run saved on one device resumes on another (CUDA -> CPU, CPU -> CUDA).
void move_state_to_params(torch::optim::Optimizer& optimizer) {
  auto& states = optimizer.state();
  using Key = typename std::decay_t<decltype(states)>::key_type;  // void* (LibTorch 2.x) or std::string (1.x)
  for (auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) {
      const auto it = states.find(state_key(p, Key{}));
      if (it == states.end()) continue;
      auto to = [&](const torch::Tensor& t) { return t.defined() ? t.to(p.device()) : t; };
      if (auto* a = dynamic_cast<torch::optim::AdamParamState*>(it->second.get())) {
        a->exp_avg(to(a->exp_avg())).exp_avg_sq(to(a->exp_avg_sq())).max_exp_avg_sq(to(a->max_exp_avg_sq()));
      } else if (auto* w = dynamic_cast<torch::optim::AdamWParamState*>(it->second.get())) {
        w->exp_avg(to(w->exp_avg())).exp_avg_sq(to(w->exp_avg_sq())).max_exp_avg_sq(to(w->max_exp_avg_sq()));
      } else if (auto* s = dynamic_cast<torch::optim::SGDParamState*>(it->second.get())) {
        s->momentum_buffer(to(s->momentum_buffer()));
      } else {
        throw Error("restore_optimizer: unknown optimizer state type");
      }
    }
  }
}

}  // namespace

void restore_optimizer(const CheckpointContent& content, torch::optim::Optimizer& optimizer) {
  const std::string where = content.path.string() + ": ";
  try {
    torch::serialize::InputArchive opt;
    if (!content.optimizer_bytes.empty()) {
      opt.load_from(content.optimizer_bytes.data(), content.optimizer_bytes.size(), torch::Device(torch::kCPU));
    } else if (!content.archive || !content.archive->try_read("optimizer", opt)) {  // older checkpoints
      throw DataError(where + "checkpoint has no optimizer state to resume from");
    }
    optimizer.load(opt);
    move_state_to_params(optimizer);
  } catch (const DataError&) {
    throw;
  } catch (const std::exception& e) {
    throw DataError(where + "optimizer state does not fit this model or is damaged (" + short_what(e) + ")");
  }
}

void restore_rng(const CheckpointContent& content) {
  try {
    // A fresh tensor per read: try_read into a defined one would repoint the archive's own tensor.
    if (torch::Tensor state; content.archive->try_read("rng_cpu", state, true)) {
      at::Generator cpu = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(cpu.mutex());
      cpu.set_state(state);
    }
    if (torch::Tensor state; torch::cuda::is_available() && content.archive->try_read("rng_cuda", state, true)) {
      at::Generator cuda = at::globalContext().defaultGenerator(at::kCUDA);
      std::lock_guard<std::mutex> lock(cuda.mutex());
      cuda.set_state(state);
    }
  } catch (const std::exception& e) {
    throw DataError(content.path.string() + ": random generator state is damaged (" + short_what(e) + ")");
  }
}

namespace {

// A model file without training state (mtx quantize's, mtx import's): what it holds.
nlohmann::json bundle_info(const std::filesystem::path& path) {
  bundle::Bundle b = bundle::load_bundle(path);  // verifies the weights against their sha256
  return {{"checkpoint", path.string()},        {"params", b.model->parameter_count()},
          {"int8", b.model->is_int8()},         {"training_state", nullptr},
          {"weights_sha256", b.weights_sha256}, {"tokenizer", b.tokenizer->describe()},
          {"config", config::to_json(b.config)}};
}

}  // namespace

nlohmann::json describe_checkpoint(const std::filesystem::path& path) {
  train::CheckpointContent c;
  try {
    c = train::load_checkpoint(path);  // verifies the weights against their sha256
  } catch (const DataError& e) {
    if (std::string(e.what()).find(": no training state") == std::string::npos) throw;
    return bundle_info(path);
  }
  const std::string actual = c.weights_sha256;
  const auto best = c.state.best_metric;
  return {{"checkpoint", path.string()},
          {"params", c.model->parameter_count()},
          {"int8", c.model->is_int8()},
          {"step", c.state.step},
          {"epoch", c.state.epoch},
          {"tgt_tokens", c.state.tgt_tokens},
          {"elapsed_s", c.state.elapsed_s},
          {"best_metric", std::isfinite(best) ? nlohmann::json(best) : nlohmann::json()},
          {"best_metric_name", c.config.train.best_metric == config::BestMetric::bleu ? "val_bleu" : "val_loss"},
          {"best_step", c.state.best_step},
          {"weights_sha256", actual},
          {"tokenizer", c.tokenizer->describe()},
          {"config", config::to_json(c.config)}};
}

}  // namespace mtx::train
