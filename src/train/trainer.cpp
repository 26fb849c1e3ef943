#include "mtx/train/trainer.h"

#include <unistd.h>

#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <thread>

#include "mtx/model/autocast.h"
#include "mtx/train/average.h"
#include "mtx/train/dist.h"
#include "mtx/train/loss.h"
#include "mtx/train/scheduler.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/cpus.h"
#include "mtx/util/device.h"
#include "mtx/util/errors.h"
#include "mtx/util/faults.h"
#include "mtx/util/hash.h"
#include "mtx/util/logging.h"
#include "mtx/util/strings.h"
#include "mtx/util/system.h"
#include "run_log.h"
#include "training_data.h"
#include "validator.h"

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace mtx::train {
namespace {

std::atomic<int> g_stop_signal{0};

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const config::TrainConfig& c,
                                                        const std::vector<torch::Tensor>& params) {
  switch (c.optimizer) {
    case config::Optimizer::adam:
      return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(c.lr)
                                                              .betas({c.adam_beta1, c.adam_beta2})
                                                              .eps(c.adam_eps)
                                                              .weight_decay(c.weight_decay));
    case config::Optimizer::adamw:
      return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(c.lr)
                                                               .betas({c.adam_beta1, c.adam_beta2})
                                                               .eps(c.adam_eps)
                                                               .weight_decay(c.weight_decay));
    case config::Optimizer::sgd:
      return std::make_unique<torch::optim::SGD>(
          params, torch::optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weight_decay));
  }
  throw Error("unknown optimizer");
}

void set_lr(torch::optim::Optimizer& opt, double lr) {
  for (auto& group : opt.param_groups()) group.options().set_lr(lr);
}

std::string minutes_seconds(double s) {
  const long total = long(s);
  return fmt::format("{}m {}s", total / 60, total % 60);
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Every rank must hold the same model, tokenizer and config: compares 52-bit prefixes of their hashes.
void check_ranks_agree(dist::Group& group, model::Transformer& model, const tokenizer::Tokenizer& tok,
                       const config::Config& cfg) {
  const auto fingerprint = [](const std::string& hex) { return double(std::stoull(hex.substr(0, 13), nullptr, 16)); };
  const std::vector<double> mine = {fingerprint(weights_sha256(model)), fingerprint(tok.hash()),
                                    fingerprint(sha256_hex(config::to_json(cfg).dump()))};
  std::vector<double> seen;
  seen.reserve(2 * mine.size());
  for (const double h : mine) {
    seen.push_back(h);
    seen.push_back(-h);
  }
  group.max(seen);
  const char* what[] = {"model weights", "tokenizer", "config"};
  for (size_t i = 0; i < mine.size(); ++i) {
    if (seen[2 * i] != mine[i] || -seen[2 * i + 1] != mine[i]) {
      throw Error(
          fmt::format("rank {}: the ranks start from different {}: every rank needs the same config, data "
                      "and (on --resume) the same run directory",
                      group.rank(), what[i]));
    }
  }
}

}  // namespace

// Developer aid: MTX_PROFILE=FILE records updates 6..10 of this run (rank 0's) with torch's profiler as a
// chrome://tracing file (scripts/bench/profile_summary.py totals it per op).
class Trainer::Profiler {
 public:
  Profiler(bool writer, int64_t step) : path_(writer ? std::getenv("MTX_PROFILE") : nullptr), from_(step + 5) {}
  void at(int64_t step) {
    if (!path_ || !*path_) return;
    if (step == from_ && !profile_) {
      profile_ = std::make_unique<torch::autograd::profiler::RecordProfile>(std::string(path_));
    } else if (step == from_ + 5 && profile_) {
      profile_.reset();
      log::info("profile of updates {}..{} written to {}", from_ + 1, from_ + 5, path_);
    }
  }

 private:
  const char* path_;
  int64_t from_;
  std::unique_ptr<torch::autograd::profiler::RecordProfile> profile_;
};

// Running sums for the metrics rows and the progress line (they do not steer training).
class Trainer::Progress {
 public:
  Progress(bool tty, int64_t step, int64_t tokens) : tty(tty), steps_at_start(step), tokens_at_start(tokens) {
    window_step = step;
  }
  void clear() const {
    if (tty) std::fprintf(stderr, "\r\033[K");
  }
  void add(const Update& u) {
    window_loss += u.loss_sum;
    window_nll += u.nll_sum;
    window_tokens += u.tokens;
  }
  void next_window(int64_t step) {
    window_loss = window_nll = 0;
    window_tokens = 0;
    window_start = Clock::now();
    window_step = step;
  }

  const bool tty;
  const int64_t steps_at_start, tokens_at_start;
  double window_loss = 0, window_nll = 0;
  int64_t window_tokens = 0;
  Clock::time_point window_start = Clock::now(), last_line = Clock::now();
  int64_t window_step = 0;
};

Trainer::Trainer(RunSettings settings)
    : settings_(std::move(settings)), tc_(settings_.config.train), device_(select_device(tc_.device, "train.device")) {
  const config::Config& cfg = settings_.config;
  const fs::path& run_dir = settings_.run_dir;
  std::optional<CheckpointContent>& resume = settings_.resume;
  // Several processes: join their group first (rank 0 prepares the data while the others wait).
  const std::optional<dist::Env> denv = dist::env_from_environment();
  if (denv) {
    log::set_prefix(fmt::format("[rank {}/{}] ", denv->rank, denv->world_size));
    if (denv->rank != 0 && log::level() < log::Level::warn) log::set_level(log::Level::warn);  // rank 0 speaks
    if (device_.is_cuda()) device_ = torch::Device(torch::kCUDA, int8_t(denv->local_rank));
    group_ =
        std::make_unique<dist::Group>(*denv, device_, std::chrono::milliseconds(int64_t(tc_.dist_timeout_s * 1000)));
  }
  // train.threads 0 (all cores): the ranks on this machine share them.
  set_threads(tc_.threads == 0 && denv ? std::max(1, usable_cpus() / denv->local_world_size) : tc_.threads);
  rank_ = group_ ? group_->rank() : 0;
  world_ = group_ ? group_->size() : 1;
  writer_ = rank_ == 0;
  bf16_ = tc_.bf16 && device_.is_cuda();
  if (tc_.bf16 && !device_.is_cuda()) log::warn("train.bf16 applies to CUDA only; training in fp32 on the CPU");
  g_stop_signal.store(0);

  data::PrepareOptions prep;
  prep.threads = tc_.threads;
  if (resume) prep.tokenizer = resume->tokenizer;
  if (settings_.init) prep.tokenizer = settings_.init->tokenizer;
  // Rank 0 first: it trains and caches the tokenizer and the encoded corpus that the others then reuse.
  if (writer_) data_ = make_training_data(cfg, prep);
  if (group_) {
    std::vector<double> barrier{0};
    group_->sum(barrier);
  }
  if (!writer_) data_ = make_training_data(cfg, prep);
  const tokenizer::Tokenizer& tok = data_->tokenizer();
  validator_ = std::make_unique<Validator>(cfg, *data_, device_, bf16_, group_.get());
  fs::create_directories(run_dir);
  if (writer_) config::write_resolved(cfg, run_dir / "config.json");

  torch::manual_seed(uint64_t(tc_.seed));
  model_ = resume ? resume->model : build_model(cfg, tok);
  const std::string init_from = settings_.init ? settings_.init->path.string() : "";
  if (settings_.init) {
    // The starting weights, name by name (the same model: built from the file's own model section).
    torch::NoGradGuard no_grad;
    auto from = settings_.init->model->named_parameters();
    for (auto& p : model_->named_parameters()) p.value().copy_(from[p.key()]);
    auto buffers = settings_.init->model->named_buffers();
    for (auto& b : model_->named_buffers()) b.value().copy_(buffers[b.key()]);
    log::info("starting from {}: its weights and tokenizer; the optimizer and the schedule start fresh",
              settings_.init->path.string());
    settings_.init.reset();
  }
  model_->to(device_);
  model_->train();
  optimizer_ = make_optimizer(tc_, model_->parameters());
  if (resume) restore_optimizer(*resume, *optimizer_);
  scheduler_ =
      std::make_unique<Scheduler>(tc_, cfg.model.d_model, resume ? resume->state : TrainState{}, resume.has_value());
  const TrainState& state = scheduler_->state();
  data_->restore(state.position);
  batches_per_epoch_ = data_->epoch_batches();
  log_ = std::make_unique<RunLog>(run_dir, writer_, resume.has_value(), state.step);
  // A run may resume on another number of ranks when the batches per update stay the same.
  if (resume && resume->state.world_size * resume->config.train.accum_steps != int64_t(world_) * tc_.accum_steps) {
    throw ConfigError(
        fmt::format("--resume: the run took {} batches per update ({} rank(s) x train.accum_steps {}); "
                    "{} rank(s) x {} differ: keep train.accum_steps x the number of ranks",
                    resume->state.world_size * resume->config.train.accum_steps, resume->state.world_size,
                    resume->config.train.accum_steps, world_, tc_.accum_steps));
  }
  if (group_) {
    check_ranks_agree(*group_, model_, tok, cfg);
    reducer_ = std::make_unique<dist::GradientReducer>(model_->parameters(), *group_, int64_t(tc_.dist_bucket_mb) << 20,
                                                       tc_.dist_ordered);
    log::info("{} ranks over {}: {} batches per update ({} per rank), gradients in {} buckets of {:.1f} MB in all{}",
              world_, group_->backend(), tc_.accum_steps * world_, tc_.accum_steps, reducer_->buckets(),
              double(reducer_->bytes()) / 1e6, tc_.dist_ordered ? ", summed in rank order" : ", ring all-reduce");
  }
  log::info("training {} parameters on {} ({} threads): {}, {} batches per epoch, {}{}", model_->parameter_count(),
            device_.str(), runtime_info().threads, data_->describe(), batches_per_epoch_,
            resume              ? fmt::format("resuming at step {} (epoch {})", state.step, state.epoch)
            : init_from.empty() ? std::string("from scratch")
                                : "from " + init_from,
            bf16_ ? ", bf16 autocast" : "");
  if (resume) restore_rng(*resume);  // last: nothing above may consume random numbers after this

  run_start_ = Clock::now();
  elapsed_before_ = state.elapsed_s;
  epoch_start_ = Clock::now();
  profiler_ = std::make_unique<Profiler>(writer_, state.step);
  progress_ = std::make_unique<Progress>(writer_ && ::isatty(STDERR_FILENO) == 1, state.step, state.tgt_tokens);
}

Trainer::~Trainer() = default;

double Trainer::elapsed() const { return elapsed_before_ + seconds_since(run_start_); }

TrainSummary Trainer::run() {
  while (true) {
    profiler_->at(scheduler_->state().step);
    const Moment now = agree_on_now();
    summary_.stop_reason = scheduler_->stop_reason(now.elapsed_s, now.signal);
    if (!summary_.stop_reason.empty()) {
      summary_.signal = summary_.stop_reason == "signal" ? now.signal : 0;
      break;
    }
    const UpdateBatches batches = draw_update();
    if (batches.drawn > 0) {
      if (const std::optional<Update> u = update(batches, now.elapsed_s)) after_update(*u);
    }
    if (batches.epoch_ended) end_epoch();
  }
  return finish();
}

Trainer::Moment Trainer::agree_on_now() {
  // Every rank takes rank 0's clock (the wall-clock budget, time-based schedules) and any rank's signal.
  Moment now{elapsed(), g_stop_signal.load()};
  if (group_) {
    std::vector<double> agreed{writer_ ? now.elapsed_s : 0.0, double(now.signal)};
    group_->max(agreed);
    now.elapsed_s = agreed[0];
    now.signal = int(agreed[1]);
  }
  return now;
}

Trainer::UpdateBatches Trainer::draw_update() {
  // The update's batches j = 0 .. accum_steps x world - 1, in the batch sampler's order: rank r trains on
  // j = r x accum_steps ... (r + 1) x accum_steps - 1 and steps over the others' (every rank reads the same order).
  UpdateBatches u;
  while (u.drawn < int64_t(tc_.accum_steps) * world_) {
    const bool own = u.drawn / tc_.accum_steps == rank_;
    data::Batch batch;
    if (!(own ? data_->next(batch) : data_->skip())) {
      u.epoch_ended = true;
      break;
    }
    if (own) {
      u.mine.push_back(std::move(batch));
      u.index.push_back(u.drawn);
    }
    ++u.drawn;
  }
  return u;
}

std::optional<Trainer::Update> Trainer::update(const UpdateBatches& batches, double elapsed_s) {
  const TrainState& state = scheduler_->state();
  const int64_t pad = data_->tokenizer().special_ids().pad;
  Update u;
  for (const auto& b : batches.mine) u.tokens += b.tgt_tokens;
  if (group_) {
    std::vector<double> all{double(u.tokens)};
    group_->sum(all);  // the update's target tokens over every rank: the loss is per token of the whole update
    u.tokens = int64_t(all[0]);
  }
  optimizer_->zero_grad();
  for (size_t k = 0; k < batches.mine.size(); ++k) {
    const data::Batch b = batches.mine[k].to(device_);
    // Dropout masks from (seed, update, batch index), whichever process trains the batch.
    torch::manual_seed(dist::batch_seed(tc_.seed, state.step + 1, batches.index[k]));
    LossTerms t;
    {
      model::Autocast autocast(bf16_);
      const torch::Tensor real = b.tgt_out.ne(pad);  // [b, t]
      t = token_loss(model_->logits_at(b.src, b.tgt_in, real), b.tgt_out.masked_select(real), tc_.label_smoothing);
    }
    (t.smoothed_sum / double(u.tokens)).backward();
    u.loss_sum += t.smoothed_sum.item<double>();
    u.nll_sum += t.nll_sum.item<double>();
  }
  if (group_) {
    reducer_->reduce();
    std::vector<double> sums{u.loss_sum, u.nll_sum};
    group_->sum(sums);
    u.loss_sum = sums[0], u.nll_sum = sums[1];
  }
  if (fault::fires("nonfinite_grad", state.step + 1)) {
    model_->parameters().front().mutable_grad().view(-1)[0].fill_(std::numeric_limits<float>::infinity());
  }
  // The global gradient norm, clipped when train.clip_norm is set: computed either way, since a non-finite
  // gradient must skip the update whether or not clipping is on.
  bool finite = std::isfinite(u.loss_sum);
  if (finite) {
    u.grad_norm = torch::nn::utils::clip_grad_norm_(
        model_->parameters(), tc_.clip_norm > 0 ? tc_.clip_norm : std::numeric_limits<double>::infinity());
    finite = std::isfinite(u.grad_norm);
  }
  if (!finite) {
    optimizer_->zero_grad();
    ++bad_steps_;
    progress_->clear();
    log::warn("non-finite loss or gradient at update {} (epoch {}): update skipped ({} in a row)", state.step + 1,
              state.epoch, bad_steps_);
    if (bad_steps_ >= tc_.max_bad_steps) {
      throw Error(fmt::format(
          "training diverged: {} non-finite updates in a row at update {}; lower train.lr / train.lr_factor or raise "
          "train.warmup_steps (last good checkpoint: {})",
          bad_steps_, state.step, (settings_.run_dir / "last.pt").string()));
    }
    return std::nullopt;
  }
  bad_steps_ = 0;
  u.lr = scheduler_->next_lr(elapsed_s);
  set_lr(*optimizer_, u.lr);
  optimizer_->step();
  scheduler_->on_update(u.tokens, u.nll_sum);
  return u;
}

void Trainer::after_update(const Update& u) {
  report(u);
  if (scheduler_->validation_due()) validate_due();
  if (scheduler_->translation_due() && writer_) {
    progress_->clear();
    validator_->translate(model_, settings_.run_dir, scheduler_->state().step);
  }
}

void Trainer::report(const Update& u) {
  const TrainState& state = scheduler_->state();
  Progress& p = *progress_;
  p.add(u);
  const double now = elapsed();
  const double run_s = now - elapsed_before_;
  const double tok_per_s = run_s > 0 ? double(state.tgt_tokens - p.tokens_at_start) / run_s : 0;
  const int64_t batches_per_epoch = batches_per_epoch_;
  if (state.step % tc_.log_every == 0) {
    const double loss = p.window_loss / double(p.window_tokens), nll = p.window_nll / double(p.window_tokens);
    json row = {{"type", "train"},
                {"step", state.step},
                {"epoch", state.epoch},
                {"loss", loss},
                {"nll", nll},
                {"lr", u.lr},
                {"grad_norm", u.grad_norm},
                {"tgt_tokens", state.tgt_tokens},
                {"tokens_per_s", tok_per_s},
                {"elapsed_s", now}};
    if (group_) {
      // The share of the window's time spent in collectives (rank 0's view; it includes waiting for the others).
      const double window_s = seconds_since(p.window_start);
      row["ranks"] = world_;
      row["comm_share"] = window_s > 0 ? group_->take_comm_seconds() / window_s : 0.0;
    }
    log_->train(row, nll);
    if (settings_.config.task == config::Task::lm) {
      // The LM tutorial's progress line (its loss: the mean over the window's batches).
      const double window_s = seconds_since(p.window_start);
      p.clear();
      log::info("| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | {:5.2f} ms/batch | loss {:5.2f} | ppl {:8.2f}",
                state.epoch, data_->position().index, batches_per_epoch, u.lr,
                1000 * window_s / double(state.step - p.window_step), nll, std::exp(std::min(nll, 700.0)));
    } else if (!p.tty) {
      log::info("epoch {} update {} | loss {:.3f} (nll {:.3f}) | lr {:.3g} | {:.0f} tgt tok/s", state.epoch, state.step,
                loss, nll, u.lr, tok_per_s);
    }
    p.next_window(state.step);
  }
  if (p.tty && seconds_since(p.last_line) > 0.5) {
    p.last_line = Clock::now();
    const double steps_per_s = double(state.step - p.steps_at_start) / std::max(run_s, 1e-9);
    double remaining = 1e300;
    if (tc_.max_steps > 0) remaining = std::min(remaining, double(tc_.max_steps - state.step) / steps_per_s);
    if (tc_.max_epochs > 0) {
      const double left = double(tc_.max_epochs - state.epoch + 1) * double(batches_per_epoch) / tc_.accum_steps -
                          double(data_->position().index) / tc_.accum_steps;
      remaining = std::min(remaining, std::max(0.0, left) / steps_per_s);
    }
    if (tc_.max_minutes > 0) remaining = std::min(remaining, tc_.max_minutes * 60 - now);
    std::fprintf(stderr,
                 "\r\033[Kepoch %lld | update %lld | batch %lld/%lld | loss %.3f | lr %.3g | %.0f tgt tok/s | ETA %s",
                 static_cast<long long>(state.epoch), static_cast<long long>(state.step),
                 static_cast<long long>(data_->position().index), static_cast<long long>(batches_per_epoch),
                 u.loss_sum / double(u.tokens), u.lr, tok_per_s,
                 remaining < 1e299 ? format_duration(std::max(0.0, remaining)).c_str() : "?");
    std::fflush(stderr);
  }
}

void Trainer::validate_due() {
  const int64_t step = scheduler_->state().step;
  const Validation v = validator_->run(model_, step);
  progress_->clear();
  log::info("| Update: {} | Val. Loss: {:.3f} | Val. PPL: {:7.3f} |{}", step, v.loss, v.ppl,
            validator_->bleu_text(v.bleu));
  save(true, record(v.loss, v.ppl, v.bleu, scheduler_->state().epoch));
}

bool Trainer::record(double loss, double ppl, double bleu, int64_t epoch) {
  const double metric = validator_->bleu_best() ? bleu : loss;
  const bool improved = scheduler_->on_validation(metric, loss, ppl, bleu);
  summary_.last_val_loss = loss;
  const TrainState& state = scheduler_->state();
  json row = {{"type", "valid"}, {"step", state.step}, {"epoch", epoch},        {"val_loss", loss},
              {"val_ppl", ppl},  {"best", improved},   {"elapsed_s", elapsed()}};
  if (validator_->wants_bleu()) row["val_bleu"] = bleu;
  log_->valid(row, loss,
              fmt::format("mtx: {} (best {} {:.3f} at update {})", settings_.run_dir.filename().string(),
                          validator_->metric_name(), state.best_metric, state.best_step));
  return improved;
}

void Trainer::end_epoch() {
  // One validation per update: when validate_every just validated this update, the epoch's end uses it.
  std::optional<Validation> v;
  if (scheduler_->epoch_end_needs_validation()) v = validator_->run(model_, scheduler_->state().step);
  const Scheduler::EpochEnd e = scheduler_->on_epoch_end();
  const TrainState& state = scheduler_->state();
  const double val_loss = v ? v->loss : state.last_val_loss, val_ppl = v ? v->ppl : state.last_val_ppl;
  progress_->clear();
  const double epoch_s = seconds_since(epoch_start_);
  if (settings_.config.task == config::Task::lm) {
    const std::string rule(89, '-');
    log::info("{}", rule);
    log::info("| end of epoch {:3d} | time: {:5.2f}s | valid loss {:5.2f} | valid ppl {:8.2f}", e.epoch, epoch_s,
              val_loss, val_ppl);
    log::info("{}", rule);
  } else {
    log::info(
        "| Epoch: {:03d} | Time: {}| Train Loss: {:.3f} | Train PPL: {:7.3f} | Val. Loss: {:.3f} | Val. PPL: {:7.3f} "
        "|{}",
        e.epoch, minutes_seconds(epoch_s), e.train_nll, std::exp(std::min(e.train_nll, 700.0)), val_loss, val_ppl,
        validator_->bleu_text(v ? v->bleu : state.last_val_bleu));
  }
  epoch_start_ = Clock::now();
  const bool improved = v && record(v->loss, v->ppl, v->bleu, e.epoch);
  save(v.has_value(), improved);
}

void Trainer::save(bool validated, bool improved) {
  TrainState snapshot = scheduler_->checkpoint(data_->position(), elapsed());
  if (!writer_) return;
  const fs::path& dir = settings_.run_dir;
  snapshot.world_size = world_;
  save_checkpoint(dir / "last.pt", settings_.config, data_->tokenizer(), model_, optimizer_.get(), snapshot);
  if (validated && improved) copy_file_atomic(dir / "last.pt", dir / "best.pt");
  if (validated && tc_.keep_last > 0) {
    copy_file_atomic(dir / "last.pt", dir / fmt::format("step-{}.pt", snapshot.step));
    const auto kept = step_checkpoints(dir);
    for (size_t i = 0; i + size_t(tc_.keep_last) < kept.size(); ++i) fs::remove(kept[i].second);
  }
}

TrainSummary Trainer::finish() {
  progress_->clear();
  const TrainState& state = scheduler_->state();
  if (summary_.stop_reason == "early_stopping") {
    log::info("early stopping: no improvement of the {} in {} validations (best {:.3f} at update {})",
              validator_->metric_name(), state.bad_validations, state.best_metric, state.best_step);
  }
  summary_.steps = state.step;
  summary_.epoch = state.epoch;
  summary_.best_val_loss = state.best_metric;
  if (!writer_) return summary_;  // the rest is rank 0's: the stop's validation, last.pt, avg.pt
  if (scheduler_->unsaved()) validate_at_stop();
  log_->draw(fmt::format("mtx: {} (best {} {:.3f} at update {})", settings_.run_dir.filename().string(),
                         validator_->metric_name(), state.best_metric, state.best_step));
  if (tc_.average_last > 1) average_last();
  if (settings_.config.task == config::Task::lm) test_language_model();
  summary_.best_val_loss = state.best_metric;
  const std::string metric = validator_->metric_name();
  const std::string best =
      std::isfinite(state.best_metric)
          ? fmt::format("best {} {:.3f}{} at update {}", metric, state.best_metric,
                        validator_->bleu_best()
                            ? std::string()
                            : fmt::format(" (ppl {:.2f})", std::exp(std::min(state.best_metric, 700.0))),
                        state.best_step)
          : std::string("no scheduled validation yet, best.pt is the model at the stop");
  log::info("stopped ({}) at update {} after {}; {}; {}", summary_.stop_reason, state.step, format_duration(elapsed()),
            best, (settings_.run_dir / "best.pt").string());
  if (summary_.signal) {
    log::info("interrupted by signal {}: last.pt is saved; continue with: mtx train --resume {}", summary_.signal,
              settings_.run_dir.string());
  }
  return summary_;
}

void Trainer::validate_at_stop() {
  // Whatever stopped training, the state at the stop is saved in last.pt. Its validation is a report: it
  // moves no best metric or patience and writes no best.pt or step-N.pt, so a run resumed from here takes
  // the same decisions as one that never stopped -- unless the stop is the schedule's own end (the
  // scheduler says), where it counts, so that best.pt and avg.pt see the annealed model.
  const TrainState& state = scheduler_->state();
  const fs::path& dir = settings_.run_dir;
  const Validation v = validator_->run(model_, state.step, false);
  log::info("| Final (update {}) | Val. Loss: {:.3f} | Val. PPL: {:7.3f} |{}", state.step, v.loss, v.ppl,
            validator_->bleu_text(v.bleu));
  if (scheduler_->stop_ends_schedule(summary_.stop_reason)) {
    save(true, record(v.loss, v.ppl, v.bleu, state.epoch));
    return;
  }
  json row = {{"type", "final"},    {"step", state.step}, {"epoch", state.epoch},
              {"val_loss", v.loss}, {"val_ppl", v.ppl},   {"elapsed_s", elapsed()}};
  if (validator_->wants_bleu()) row["val_bleu"] = v.bleu;
  log_->row(row);
  save(false, false);
  summary_.last_val_loss = v.loss;
  // Until a scheduled validation has chosen a best model, best.pt is the model at the stop (the first
  // scheduled validation replaces it in any run, resumed or not).
  if (!std::isfinite(state.best_metric)) copy_file_atomic(dir / "last.pt", dir / "best.pt");
  const double metric = v.metric(validator_->bleu_best());
  if (std::isfinite(state.best_metric) && scheduler_->better_than_best(metric)) {
    log::info(
        "the model at the stop (last.pt, {} {:.3f}) beats best.pt ({:.3f} at update {}); best.pt holds the best of "
        "the scheduled validations only",
        validator_->metric_name(), metric, state.best_metric, state.best_step);
  }
}

void Trainer::average_last() {
  // The last K scheduled checkpoints, the model at the stop (last.pt) among them when it is newer.
  const fs::path& dir = settings_.run_dir;
  const int64_t step = scheduler_->state().step;
  const auto steps = step_checkpoints(dir);
  std::vector<fs::path> last;
  std::vector<int64_t> last_steps;
  for (const auto& s : steps) last.push_back(s.second), last_steps.push_back(s.first);
  if (steps.empty() || steps.back().first < step) {
    last.push_back(dir / "last.pt");
    last_steps.push_back(step);
  }
  if (last.size() > size_t(tc_.average_last)) {
    last.erase(last.begin(), last.end() - tc_.average_last);
    last_steps.erase(last_steps.begin(), last_steps.end() - tc_.average_last);
  }
  if (last.size() < 2) return;
  if (!tc_.average_choose) {
    average_checkpoints(last, dir / "avg.pt");
    return;
  }
  // avg.pt is the best on the validation set (best_metric) of the averages of the last k = 1 .. K
  // checkpoints (k = 1: the newest alone), so that K is a ceiling rather than a guess.
  torch::NoGradGuard no_grad;
  const bool bleu_best = validator_->bleu_best();
  int best_k = 0;
  double best_metric = 0;
  for (size_t k = 1; k <= last.size(); ++k) {
    const std::vector<fs::path> tail(last.end() - k, last.end());
    const fs::path candidate = k == 1 ? tail.back() : dir / fmt::format("avg-{}.pt", k);
    if (k > 1) average_checkpoints(tail, candidate);
    model::Transformer averaged = load_checkpoint(candidate, device_).model;
    const Validation v = validator_->run(averaged, step, false);
    log::info("| Average of the last {} | Val. Loss: {:.3f} | Val. PPL: {:7.3f} |{}", k, v.loss, v.ppl,
              validator_->bleu_text(v.bleu));
    json row = {{"type", "average"},
                {"k", k},
                {"from_step", last_steps[last.size() - k]},
                {"to_step", last_steps.back()},
                {"val_loss", v.loss},
                {"val_ppl", v.ppl}};
    if (validator_->wants_bleu()) row["val_bleu"] = v.bleu;
    log_->row(row);
    const double m = v.metric(bleu_best);
    if (best_k == 0 || (bleu_best ? m > best_metric : m < best_metric)) best_k = int(k), best_metric = m;
  }
  if (best_k == 1) {
    copy_file_atomic(last.back(), dir / "avg.pt");
  } else {
    fs::rename(dir / fmt::format("avg-{}.pt", best_k), dir / "avg.pt");
  }
  for (size_t k = 2; k <= last.size(); ++k) fs::remove(dir / fmt::format("avg-{}.pt", k));
  summary_.average_k = best_k;
  log_->row({{"type", "average_pick"}, {"k", best_k}, {"metric", validator_->metric_name()}, {"value", best_metric}});
  log::info("avg.pt: the average of the last {} checkpoints (the best validation {} of k = 1..{})", best_k,
            validator_->metric_name(), last.size());
}

void Trainer::test_language_model() {
  // The tutorial's last line: the best model (best.pt) on the test stream.
  CheckpointContent best = load_checkpoint(settings_.run_dir / "best.pt", device_);
  if (const auto t = data_->test_loss(best.model, device_)) {
    const std::string rule(89, '=');
    log::info("{}", rule);
    log::info("| End of training | test loss {:5.2f} | test ppl {:8.2f}", t->loss, t->ppl);
    log::info("{}", rule);
    log_->row({{"type", "test"}, {"step", best.state.step}, {"test_loss", t->loss}, {"test_ppl", t->ppl}});
    summary_.test_loss = t->loss;
  }
}

void request_stop(int signal) { g_stop_signal.store(signal); }

}  // namespace mtx::train
