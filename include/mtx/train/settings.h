// A run's settings, resolved once: the config file with --set for a new run, or for a resume the run's own
// config with what a resume may change. The trainer receives the result and never reads a config file.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "mtx/bundle/bundle.h"
#include "mtx/config/config.h"
#include "mtx/train/checkpoint.h"

namespace mtx::train {

struct RunSettings {
  config::Config config;                    // the run's resolved settings
  std::filesystem::path run_dir;            // best.pt, last.pt, step-N.pt, config.json, metrics.jsonl, curve.svg
  std::optional<CheckpointContent> resume;  // the run's last.pt when it continues
  std::optional<bundle::Bundle> init;       // a new run's starting weights and tokenizer (--init)
};

// What `mtx train` was asked: a new run (config_file, out) or a resume (resume), each with --set overrides.
struct RunRequest {
  std::filesystem::path config_file;   // new run: required; resume: optional, must describe the same run
  std::vector<std::string> overrides;  // "section.key=value"
  std::filesystem::path out;           // new run's directory (empty: runs/<config file's stem>)
  std::filesystem::path resume;        // run directory to continue (empty: a new run)
  std::filesystem::path init;          // new run: a model file to start from (e.g. mtx import's; empty: none)
};

// The settings keys a resume may change: the stop criteria, the device (a run moves between CPU and GPU
// machines; it continues exactly only on the device it was saved on), the collectives' timeout and bucket
// size, and train.accum_steps as long as it times the number of ranks stays what it was (the trainer
// checks that). A budget that a schedule decays over (cosine, linear, a cool-down) may not change.
const std::vector<std::string>& resumable_keys();

// A new run: `request.config_file` with the overrides, into `request.out`. Throws ConfigError when the
// config is invalid or the directory already holds a run (last.pt). With `request.init`, the run starts from
// that model file's weights and tokenizer: its model section replaces the config's (whose dropout settings are
// kept: they only act in training) and its tokenizer the config's tokenizer section; the optimizer and the
// schedule start fresh. A resume: the run's last.pt, its config
// with the overrides on top (see resume_run()); a given config file must differ from the run's only in
// resumable keys. Throws DataError when the directory holds no run.
RunSettings resolve_run(const RunRequest& request);

// Continues the run saved in `checkpoint` (read from `run_dir`/last.pt) with the settings `requested`.
// Throws ConfigError naming every key that differs from the run's own settings and may not change, or a
// changed budget that the run's learning-rate schedule decays over, saying how to go on instead.
RunSettings resume_run(CheckpointContent checkpoint, const config::Config& requested,
                       const std::filesystem::path& run_dir);

}  // namespace mtx::train
