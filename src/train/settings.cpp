#include "mtx/train/settings.h"

#include <fmt/format.h>

#include <algorithm>

#include "mtx/bundle/bundle.h"
#include "mtx/util/errors.h"
#include "mtx/util/strings.h"

namespace fs = std::filesystem;

namespace mtx::train {
namespace {

// Whether the learning rate of `c`'s schedule depends on the run's budget (max_steps, max_minutes).
bool schedule_reads_budget(const config::TrainConfig& c) {
  return c.schedule == config::Schedule::cosine || c.schedule == config::Schedule::linear || c.cooldown > 0;
}

// The settings in which `requested` differs from the run's `saved` and may not on a resume.
std::vector<std::string> forbidden_changes(const config::Config& saved, const config::Config& requested) {
  std::vector<std::string> changed;
  for (const auto& d : config::differences(saved, requested)) {
    const std::string key = d.substr(0, d.find(':'));
    const auto& ok = resumable_keys();
    if (std::find(ok.begin(), ok.end(), key) == ok.end()) changed.push_back(d);
  }
  return changed;
}

CheckpointContent load_run(const fs::path& dir) {
  const fs::path last = dir / "last.pt";
  if (!fs::exists(last)) throw DataError("--resume: '" + last.string() + "' not found (not a run directory?)");
  return load_checkpoint(last);
}

}  // namespace

const std::vector<std::string>& resumable_keys() {
  static const std::vector<std::string> keys = {"train.max_steps",  "train.max_epochs",     "train.max_minutes",
                                                "train.device",     "train.dist_timeout_s", "train.dist_bucket_mb",
                                                "train.accum_steps"};
  return keys;
}

RunSettings resume_run(CheckpointContent checkpoint, const config::Config& requested, const fs::path& run_dir) {
  const std::vector<std::string> changed = forbidden_changes(checkpoint.config, requested);
  if (!changed.empty()) {
    throw ConfigError("--resume " + run_dir.string() + ": only " + join(resumable_keys(), ", ") +
                      " may change on resume; checkpoint vs requested: " + join(changed, "; "));
  }
  const config::TrainConfig& was = checkpoint.config.train;
  const config::TrainConfig& now = requested.train;
  if (schedule_reads_budget(was) && (was.max_steps != now.max_steps || was.max_minutes != now.max_minutes)) {
    throw ConfigError(fmt::format(
        "--resume {}: the run's learning rate ({} schedule{}) falls over its budget of train.max_steps {} and "
        "train.max_minutes {}; resuming with max_steps {} and max_minutes {} would change it mid-run. Resume "
        "with the run's budget (drop the --set of train.max_steps / train.max_minutes), or train longer in a new "
        "run with the larger budget",
        run_dir.string(), config::to_string(was.schedule), was.cooldown > 0 ? " with a cool-down" : "", was.max_steps,
        was.max_minutes, now.max_steps, now.max_minutes));
  }
  return {requested, run_dir, std::move(checkpoint), std::nullopt};
}

RunSettings resolve_run(const RunRequest& request) {
  if (!request.init.empty() && !request.resume.empty()) {
    throw ConfigError("--init starts a new run; --resume continues one: give one of them");
  }
  if (request.resume.empty()) {
    config::Config config = config::load(request.config_file, request.overrides);
    const fs::path out = request.out.empty() ? fs::path("runs") / request.config_file.stem() : fs::path(request.out);
    if (fs::exists(out / "last.pt")) {
      throw ConfigError("--out " + out.string() + " already holds a run (last.pt): continue it with --resume " +
                        out.string() + " or choose another --out");
    }
    if (request.init.empty()) return {std::move(config), out, std::nullopt, std::nullopt};
    bundle::Bundle init = bundle::load_bundle(request.init);
    if (init.model->is_int8()) {
      throw ConfigError("--init " + request.init.string() +
                        ": an int8 bundle cannot be trained; start from its float model");
    }
    if (init.config.task != config.task) {
      throw ConfigError("--init " + request.init.string() + ": a " + config::to_string(init.config.task) +
                        " model for a " + config::to_string(config.task) + " run");
    }
    config::ModelConfig model = init.config.model;
    model.dropout = config.model.dropout;
    model.attention_dropout = config.model.attention_dropout;
    model.activation_dropout = config.model.activation_dropout;
    config.model = model;
    config.tokenizer = init.config.tokenizer;
    config.tokenizer.model_dir.clear();
    config::validate(config);
    return {std::move(config), out, std::nullopt, std::move(init)};
  }
  CheckpointContent checkpoint = load_run(request.resume);
  // The run's own settings with --set on top; --config, if given, must describe the same run.
  nlohmann::json document = config::to_json(checkpoint.config);
  for (const auto& o : request.overrides) config::apply_override(document, o);
  const config::Config requested = config::from_json(document);
  if (!request.config_file.empty()) {
    const std::vector<std::string> changed =
        forbidden_changes(checkpoint.config, config::load(request.config_file, request.overrides));
    if (!changed.empty()) {
      throw ConfigError("--resume " + request.resume.string() + ": --config " + request.config_file.string() +
                        " describes another run; only " + join(resumable_keys(), ", ") +
                        " may change on resume; checkpoint vs requested: " + join(changed, "; "));
    }
  }
  return resume_run(std::move(checkpoint), requested, request.resume);
}

}  // namespace mtx::train
