#include "mtx/train/trainer.h"

#include <unistd.h>

#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fstream>
#include <thread>

#include "mtx/data/batch.h"
#include "mtx/data/batcher.h"
#include "mtx/data/prepare.h"
#include "mtx/data/stream.h"
#include "mtx/decode/lm.h"
#include "mtx/decode/scoring.h"
#include "mtx/decode/translator.h"
#include "mtx/eval/metrics.h"
#include "mtx/model/autocast.h"
#include "mtx/train/average.h"
#include "mtx/train/curve.h"
#include "mtx/train/dist.h"
#include "mtx/train/loss.h"
#include "mtx/train/schedule.h"
#include "mtx/train/scheduler.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/device.h"
#include "mtx/util/errors.h"
#include "mtx/util/faults.h"
#include "mtx/util/hash.h"
#include "mtx/util/logging.h"
#include "mtx/util/strings.h"
#include "mtx/util/system.h"

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

using model::Autocast;

}  // namespace

namespace {

// Translations of a corpus's sources (detokenised), in corpus order. Uses no randomness, so exact
// resume holds; leaves the model in training mode.
std::vector<std::string> translate_corpus(model::Transformer& model, const tokenizer::Tokenizer& tok,
                                          const data::EncodedCorpus& corpus, const config::Config& cfg, int beam) {
  decode::TranslateOptions o = decode::options_from_config(cfg.decode);
  o.search.beam = beam;
  o.search.nbest = 1;
  std::vector<std::vector<int32_t>> sources(corpus.size());
  for (size_t i = 0; i < corpus.size(); ++i) sources[i].assign(corpus.src[i].begin(), corpus.src[i].end());
  std::vector<std::vector<decode::Hypothesis>> hyps;
  {
    decode::Translator translator(model, tok, o);
    hyps = translator.translate_ids(sources);
  }
  model->train();
  std::vector<std::string> out;
  out.reserve(hyps.size());
  for (const auto& h : hyps) out.push_back(h.empty() ? std::string() : tok.tgt().decode(h.front().tokens));
  return out;
}

// Greedy translation of the validation set: written to translations/val-step-N.txt in the run
// directory, the first lines logged next to their references.
void translate_validation(model::Transformer& model, const tokenizer::Tokenizer& tok, const data::EncodedCorpus& corpus,
                          const std::vector<std::string>& refs, const config::Config& cfg, const fs::path& run_dir,
                          int64_t step) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> hyps = translate_corpus(model, tok, corpus, cfg, 1);
  std::string text;
  for (const auto& h : hyps) text += h + "\n";
  const fs::path path = run_dir / "translations" / fmt::format("val-step-{}.txt", step);
  fs::create_directories(path.parent_path());
  write_file_atomic(path, text);
  log::info("greedy translation of {} validation sentences in {:.1f} s: {}", corpus.size(),
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), path.string());
  for (size_t i = 0; i < std::min<size_t>(size_t(cfg.train.translate_log_lines), hyps.size()); ++i) {
    log::info("  val {} | hyp: {}", i + 1, hyps[i]);
    log::info("  val {} | ref: {}", i + 1, refs[i]);
  }
}

// What the loop trains and validates on, per task: pairs in token-budget batches (translation) or the
// windows of a token stream (lm). Either way batches come in a deterministic order with a resumable position.
class TrainingData {
 public:
  virtual ~TrainingData() = default;
  virtual const tokenizer::Tokenizer& tokenizer() const = 0;
  // As Batcher::next: false once at an epoch's end.
  virtual bool next(data::Batch& batch) = 0;
  // Moves past the next batch without building it (another rank's share of an update).
  virtual bool skip() = 0;
  virtual data::BatchPosition position() const = 0;
  virtual void restore(data::BatchPosition position) = 0;
  virtual int64_t epoch_batches() = 0;
  virtual std::string describe() const = 0;  // for the start-up line
  virtual LossEvaluation validation_loss(model::Transformer& model, const torch::Device& device, bool bf16) = 0;
  // The translation task's data (validation BLEU and translations); null for a language model.
  virtual const data::PreparedData* translation() const { return nullptr; }
  // A language model's loss on data.test, reported when training ends (the tutorial's last line).
  virtual std::optional<LossEvaluation> test_loss(model::Transformer&, const torch::Device&) { return std::nullopt; }
};

class TranslationData : public TrainingData {
 public:
  TranslationData(const config::Config& cfg, const data::PrepareOptions& prep)
      : cfg_(cfg),
        data_(data::prepare_data(cfg, prep)),
        ids_(data_.tokenizer.special_ids()),
        batcher_(data::Batcher::for_corpus(data_.train, batcher_options(cfg.train))) {
    if (!data_.valid) throw ConfigError("data.valid: training needs a validation split");
  }
  const tokenizer::Tokenizer& tokenizer() const override { return data_.tokenizer; }
  bool next(data::Batch& batch) override {
    if (!batcher_.next(indices_)) return false;
    batch = data::make_batch(data_.train, indices_, ids_);
    return true;
  }
  bool skip() override { return batcher_.next(indices_); }
  data::BatchPosition position() const override { return batcher_.position(); }
  void restore(data::BatchPosition position) override { batcher_.restore(position); }
  int64_t epoch_batches() override {
    const int64_t n = int64_t(batcher_.epoch_batches());
    if (n == 0) {
      throw DataError(
          fmt::format("data.train: no training pairs to train on ({} after the length filters); loosen "
                      "data.filter_min_tokens / data.filter_max_tokens / data.filter_max_ratio",
                      data_.train.size()));
    }
    return n;
  }
  std::string describe() const override { return fmt::format("{} pairs", data_.train.size()); }
  LossEvaluation validation_loss(model::Transformer& model, const torch::Device& device, bool bf16) override {
    return evaluate_loss(model, *data_.valid, ids_, cfg_.train.max_tokens, device, bf16);
  }
  const data::PreparedData* translation() const override { return &data_; }

 private:
  static data::BatcherOptions batcher_options(const config::TrainConfig& tc) {
    data::BatcherOptions bo;
    bo.max_tokens = tc.max_tokens;
    bo.sort_window = tc.sort_window;
    bo.seed = uint64_t(tc.seed);
    return bo;
  }
  const config::Config& cfg_;
  data::PreparedData data_;
  tokenizer::SpecialIds ids_;
  data::Batcher batcher_;
  std::vector<uint32_t> indices_;
};

// The LM tutorial's data: train.batch_size streams read in windows of train.bptt, in order every epoch.
class LmData : public TrainingData {
 public:
  LmData(const config::Config& cfg, const data::PrepareOptions& prep)
      : cfg_(cfg),
        data_(data::prepare_streams(cfg, prep)),
        batcher_(data_.train, cfg.train.batch_size, cfg.train.bptt, "data.train") {
    if (!data_.valid) throw ConfigError("data.valid: training needs a validation split");
    // Checked now, not at the first validation.
    data::StreamBatcher(*data_.valid, cfg.train.eval_batch_size, cfg.train.bptt, "data.valid");
  }
  const tokenizer::Tokenizer& tokenizer() const override { return data_.tokenizer; }
  bool next(data::Batch& batch) override { return batcher_.next(batch); }
  bool skip() override {
    data::Batch unused;
    return batcher_.next(unused);
  }
  data::BatchPosition position() const override { return batcher_.position(); }
  void restore(data::BatchPosition position) override { batcher_.restore(position); }
  int64_t epoch_batches() override { return batcher_.epoch_batches(); }
  std::string describe() const override {
    return fmt::format("{} tokens ({} in the vocabulary) in {} streams, bptt {}", data_.train.size(),
                       data_.tokenizer.tgt().vocab_size(), batcher_.columns(), cfg_.train.bptt);
  }
  LossEvaluation validation_loss(model::Transformer& model, const torch::Device& device, bool) override {
    return from(decode::stream_loss(model, *data_.valid, cfg_.train.eval_batch_size, cfg_.train.bptt, device));
  }
  std::optional<LossEvaluation> test_loss(model::Transformer& model, const torch::Device& device) override {
    if (!data_.test) return std::nullopt;
    return from(decode::stream_loss(model, *data_.test, cfg_.train.eval_batch_size, cfg_.train.bptt, device));
  }

 private:
  static LossEvaluation from(const decode::StreamLoss& s) {
    LossEvaluation v;
    v.loss = s.loss;
    v.ppl = s.ppl;
    v.tokens = s.tokens;
    return v;
  }
  const config::Config& cfg_;
  data::PreparedStreams data_;
  data::StreamBatcher batcher_;
};

// The run's step-<N>.pt files (N digits only; other files are the user's), oldest first, with their N.
std::vector<std::pair<int64_t, fs::path>> step_checkpoints(const fs::path& run_dir) {
  std::vector<std::pair<int64_t, fs::path>> steps;
  for (const auto& e : fs::directory_iterator(run_dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() <= 8 || name.rfind("step-", 0) != 0 || e.path().extension() != ".pt") continue;
    const std::string digits = name.substr(5, name.size() - 8);
    if (digits.size() > 18 ||
        !std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      continue;
    }
    steps.emplace_back(std::stoll(digits), e.path());
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

// Overwrites `to`'s weights and buffers with `from`'s (same model configuration).
void copy_weights(const model::Transformer& from, model::Transformer& to) {
  torch::NoGradGuard no_grad;
  const auto params = from->named_parameters();
  const auto buffers = from->named_buffers();
  for (auto& item : to->named_parameters()) item.value().copy_(params[item.key()]);
  for (auto& item : to->named_buffers()) item.value().copy_(buffers[item.key()]);
}

std::string minutes_seconds(double s) {
  const long total = long(s);
  return fmt::format("{}m {}s", total / 60, total % 60);
}

// Replaces metrics.jsonl (atomically) by its rows up to `step` (a resumed run continues from there)
// and returns the loss curves they hold.
void load_metrics(const fs::path& path, int64_t step, std::vector<CurvePoint>& train, std::vector<CurvePoint>& valid) {
  if (!fs::exists(path)) return;
  std::ifstream in(path);
  std::string line, kept;
  auto point = [](const json& row, const char* key, std::vector<CurvePoint>& curve) {
    const auto it = row.find(key);
    if (it != row.end() && it->is_number()) curve.push_back({row["step"].get<double>(), it->get<double>()});
  };
  while (std::getline(in, line)) {
    json row;
    try {
      row = json::parse(line);
    } catch (const json::exception&) {
      continue;  // a torn last line of a killed run
    }
    if (!row.is_object() || !row.contains("step") || !row["step"].is_number_integer()) continue;
    if (row["step"].get<int64_t>() > step) continue;
    kept += line + "\n";
    if (row.value("type", "") == "train") point(row, "nll", train);
    if (row.value("type", "") == "valid") point(row, "val_loss", valid);
  }
  in.close();
  write_file_atomic(path, kept);
}

}  // namespace

void request_stop(int signal) { g_stop_signal.store(signal); }

TrainSummary run_training(const config::Config& cfg, const fs::path& run_dir, std::optional<CheckpointContent> resume) {
  const auto& tc = cfg.train;
  torch::Device device = select_device(tc.device, "train.device");
  // Several processes: join their group first (rank 0 prepares the data while the others wait).
  const std::optional<dist::Env> denv = dist::env_from_environment();
  std::unique_ptr<dist::Group> group;
  if (denv) {
    log::set_prefix(fmt::format("[rank {}/{}] ", denv->rank, denv->world_size));
    if (denv->rank != 0 && log::level() < log::Level::warn) log::set_level(log::Level::warn);  // rank 0 speaks
    if (device.is_cuda()) device = torch::Device(torch::kCUDA, int8_t(denv->local_rank));
    group = std::make_unique<dist::Group>(*denv, device, std::chrono::milliseconds(int64_t(tc.dist_timeout_s * 1000)));
  }
  // train.threads 0 (all cores): the ranks on this machine share them.
  set_threads(tc.threads == 0 && denv ? std::max(1, int(std::thread::hardware_concurrency()) / denv->local_world_size)
                                      : tc.threads);
  const int rank = group ? group->rank() : 0;
  const int world = group ? group->size() : 1;
  const bool writer = rank == 0;  // validates, logs and writes the run directory
  auto barrier = [&] {
    if (!group) return;
    std::vector<double> nothing{0};
    group->sum(nothing);
  };
  const bool bf16 = tc.bf16 && device.is_cuda();
  if (tc.bf16 && !device.is_cuda()) log::warn("train.bf16 applies to CUDA only; training in fp32 on the CPU");
  g_stop_signal.store(0);

  data::PrepareOptions prep;
  prep.threads = tc.threads;
  if (resume) prep.tokenizer = resume->tokenizer;
  const bool lm = cfg.task == config::Task::lm;
  std::unique_ptr<TrainingData> source;
  auto load_data = [&] {
    if (lm)
      source = std::make_unique<LmData>(cfg, prep);
    else
      source = std::make_unique<TranslationData>(cfg, prep);
  };
  // Rank 0 first: it trains and caches the tokenizer and the encoded corpus that the others then reuse.
  if (writer) load_data();
  barrier();
  if (!writer) load_data();
  const tokenizer::Tokenizer& tok = source->tokenizer();
  const tokenizer::SpecialIds ids = tok.special_ids();
  const data::PreparedData* pairs = source->translation();  // null for a language model
  // Validation references as text (the tokenizer is lossless), for validation BLEU and logged samples.
  std::vector<std::string> val_refs;
  if (pairs) {
    for (size_t i = 0; i < pairs->valid->size(); ++i) {
      const auto r = pairs->valid->tgt[i];
      val_refs.push_back(tok.tgt().decode(r.data, r.size));
    }
  }
  const bool bleu_best = tc.best_metric == config::BestMetric::bleu;
  const bool want_bleu = bleu_best || tc.val_bleu;
  const std::string metric_name = bleu_best ? "val. BLEU" : "val. loss";
  fs::create_directories(run_dir);
  if (writer) config::write_resolved(cfg, run_dir / "config.json");

  torch::manual_seed(uint64_t(tc.seed));
  model::Transformer model = resume ? resume->model : build_model(cfg, tok);
  model->to(device);
  model->train();
  auto optimizer = make_optimizer(tc, model->parameters());
  if (resume) restore_optimizer(*resume, *optimizer);
  Scheduler scheduler(tc, cfg.model.d_model, resume ? resume->state : TrainState{}, resume.has_value());
  const TrainState& state = scheduler.state();
  source->restore(state.position);
  const int64_t batches_per_epoch = source->epoch_batches();

  std::vector<CurvePoint> train_curve, valid_curve;
  const fs::path metrics_path = run_dir / "metrics.jsonl";
  std::ofstream metrics;  // rank 0's only
  if (writer) {
    if (resume)
      load_metrics(metrics_path, state.step, train_curve, valid_curve);
    else
      fs::remove(metrics_path);
    metrics.open(metrics_path, std::ios::app);
  }
  // A run may resume on another number of ranks when the batches per update stay the same.
  if (resume && resume->state.world_size * resume->config.train.accum_steps != int64_t(world) * tc.accum_steps) {
    throw ConfigError(
        fmt::format("--resume: the run took {} batches per update ({} rank(s) x train.accum_steps {}); "
                    "{} rank(s) x {} differ: keep train.accum_steps x the number of ranks",
                    resume->state.world_size * resume->config.train.accum_steps, resume->state.world_size,
                    resume->config.train.accum_steps, world, tc.accum_steps));
  }
  std::unique_ptr<dist::GradientReducer> reducer;
  if (group) {
    // Every rank must hold the same model, tokenizer and config: compare 52-bit prefixes of their hashes.
    const auto fingerprint = [](const std::string& hex) { return double(std::stoull(hex.substr(0, 13), nullptr, 16)); };
    const std::vector<double> mine = {fingerprint(weights_sha256(model)), fingerprint(tok.hash()),
                                      fingerprint(sha256_hex(config::to_json(cfg).dump()))};
    std::vector<double> seen;
    for (const double h : mine) seen.insert(seen.end(), {h, -h});
    group->max(seen);
    const char* what[] = {"model weights", "tokenizer", "config"};
    for (size_t i = 0; i < mine.size(); ++i) {
      if (seen[2 * i] != mine[i] || -seen[2 * i + 1] != mine[i]) {
        throw Error(
            fmt::format("rank {}: the ranks start from different {}: every rank needs the same config, data "
                        "and (on --resume) the same run directory",
                        rank, what[i]));
      }
    }
    reducer = std::make_unique<dist::GradientReducer>(model->parameters(), *group, int64_t(tc.dist_bucket_mb) << 20,
                                                      tc.dist_ordered);
    log::info("{} ranks over {}: {} batches per update ({} per rank), gradients in {} buckets of {:.1f} MB in all{}",
              world, group->backend(), tc.accum_steps * world, tc.accum_steps, reducer->buckets(),
              double(reducer->bytes()) / 1e6, tc.dist_ordered ? ", summed in rank order" : ", ring all-reduce");
  }

  log::info("training {} parameters on {} ({} threads): {}, {} batches per epoch, {}{}", model->parameter_count(),
            device.str(), runtime_info().threads, source->describe(), batches_per_epoch,
            resume ? fmt::format("resuming at step {} (epoch {})", state.step, state.epoch) : "from scratch",
            bf16 ? ", bf16 autocast" : "");
  if (resume) restore_rng(*resume);  // last: nothing above may consume random numbers after this

  const bool tty = writer && ::isatty(STDERR_FILENO) == 1;
  const auto run_start = Clock::now();
  const double elapsed_before = state.elapsed_s;
  auto elapsed = [&] { return elapsed_before + std::chrono::duration<double>(Clock::now() - run_start).count(); };
  auto last_progress = Clock::now();
  const int64_t steps_at_start = state.step;
  const int64_t tokens_at_start = state.tgt_tokens;

  // Running sums for the metrics rows (logging only: they do not steer training).
  double window_loss = 0, window_nll = 0;
  int64_t window_tokens = 0;
  auto window_start = Clock::now();
  int64_t window_step = state.step;
  auto epoch_start = Clock::now();
  int bad_steps = 0;
  TrainSummary summary;

  // Validation loss, and BLEU (cased sacreBLEU 13a) of the validation translations when wanted.
  struct Validation : LossEvaluation {
    double bleu = std::numeric_limits<double>::quiet_NaN();
    double metric(bool bleu_best) const { return bleu_best ? bleu : loss; }
  };
  // Rank 0 validates; the others receive its results, so that every rank's scheduler takes the same decisions.
  auto validate = [&](bool share = true) {
    Validation v;
    if (writer) {
      static_cast<LossEvaluation&>(v) = source->validation_loss(model, device, bf16);
      if (fault::fires("nan_val_loss", state.step)) v.loss = v.ppl = std::numeric_limits<double>::quiet_NaN();
      if (want_bleu) {
        const auto hyps = translate_corpus(model, tok, *pairs->valid, cfg, tc.val_bleu_beam);
        v.bleu = eval::corpus_score(*eval::make_bleu({}), hyps, {val_refs}).score;
      }
    }
    if (group && share) {
      std::vector<double> x{v.loss, v.ppl, v.bleu, double(v.tokens)};
      group->broadcast(x);
      v.loss = x[0], v.ppl = x[1], v.bleu = x[2], v.tokens = int64_t(x[3]);
    }
    return v;
  };
  auto bleu_text = [&](double bleu) { return want_bleu ? fmt::format(" Val. BLEU: {:5.2f} |", bleu) : std::string(); };

  // Every checkpoint is taken here, of the scheduler's state at this moment: last.pt always; after a
  // counted validation also step-N.pt (keep_last) and, when it improved, best.pt.
  auto save = [&](bool validated, bool improved) {
    TrainState snapshot = scheduler.checkpoint(source->position(), elapsed());
    if (!writer) return;
    snapshot.world_size = world;
    save_checkpoint(run_dir / "last.pt", cfg, tok, model, optimizer.get(), snapshot);
    if (validated && improved) copy_file_atomic(run_dir / "last.pt", run_dir / "best.pt");
    if (validated && tc.keep_last > 0) {
      copy_file_atomic(run_dir / "last.pt", run_dir / fmt::format("step-{}.pt", snapshot.step));
      const auto kept = step_checkpoints(run_dir);
      for (size_t i = 0; i + size_t(tc.keep_last) < kept.size(); ++i) fs::remove(kept[i].second);
    }
  };
  auto write_curve = [&] {
    write_curve_svg(run_dir / "curve.svg", train_curve, valid_curve,
                    fmt::format("mtx: {} (best {} {:.3f} at update {})", run_dir.filename().string(), metric_name,
                                state.best_metric, state.best_step));
  };
  // A counted validation: the scheduler takes it, metrics.jsonl and the curve record it.
  auto record = [&](const Validation& v, int64_t epoch) {
    const bool improved = scheduler.on_validation(v.metric(bleu_best), v.loss, v.ppl, v.bleu);
    summary.last_val_loss = v.loss;
    if (!writer) return improved;
    valid_curve.push_back({double(state.step), v.loss});
    json row = {{"type", "valid"},  {"step", state.step}, {"epoch", epoch},        {"val_loss", v.loss},
                {"val_ppl", v.ppl}, {"best", improved},   {"elapsed_s", elapsed()}};
    if (want_bleu) row["val_bleu"] = v.bleu;
    metrics << row.dump() << std::endl;
    write_curve();
    return improved;
  };

  auto clear_progress = [&] {
    if (tty) std::fprintf(stderr, "\r\033[K");
  };

  // Developer aid: MTX_PROFILE=FILE records updates 6..10 of this run with torch's profiler as a
  // chrome://tracing file (scripts/bench/profile_summary.py totals it per op).
  const char* profile_path = writer ? std::getenv("MTX_PROFILE") : nullptr;  // rank 0's updates only
  const int64_t profile_from = state.step + 5, profile_to = state.step + 10;
  std::unique_ptr<torch::autograd::profiler::RecordProfile> profile;

  while (true) {
    if (profile_path && *profile_path) {
      if (state.step == profile_from && !profile) {
        profile = std::make_unique<torch::autograd::profiler::RecordProfile>(std::string(profile_path));
      } else if (state.step == profile_to && profile) {
        profile.reset();
        log::info("profile of updates {}..{} written to {}", profile_from + 1, profile_to, profile_path);
      }
    }
    // ---- stop criteria, checked between updates ----
    // Every rank takes rank 0's clock (the wall-clock budget, time-based schedules) and any rank's signal.
    double update_start_s = elapsed();
    int stop_signal = g_stop_signal.load();
    if (group) {
      std::vector<double> agreed{writer ? update_start_s : 0.0, double(stop_signal)};
      group->max(agreed);
      update_start_s = agreed[0];
      stop_signal = int(agreed[1]);
    }
    summary.stop_reason = scheduler.stop_reason(update_start_s, stop_signal);
    if (!summary.stop_reason.empty()) {
      summary.signal = summary.stop_reason == "signal" ? stop_signal : 0;
      if (summary.stop_reason == "early_stopping") {
        log::info("early stopping: no improvement of the {} in {} validations (best {:.3f} at update {})", metric_name,
                  state.bad_validations, state.best_metric, state.best_step);
      }
      break;
    }

    // ---- one update over accum_steps batches per rank ----
    // The update's batches j = 0 .. accum_steps x world - 1, in the batcher's order: rank r trains on
    // j = r x accum_steps ... (r + 1) x accum_steps - 1 and steps over the others' (every rank reads the same order).
    std::vector<data::Batch> mine;
    std::vector<int64_t> mine_index;  // j of each of mine
    bool epoch_ended = false;
    int64_t drawn = 0;
    while (drawn < int64_t(tc.accum_steps) * world) {
      const bool own = drawn / tc.accum_steps == rank;
      data::Batch batch;
      if (!(own ? source->next(batch) : source->skip())) {
        epoch_ended = true;
        break;
      }
      if (own) {
        mine.push_back(std::move(batch));
        mine_index.push_back(drawn);
      }
      ++drawn;
    }
    if (drawn > 0) {
      int64_t tokens = 0;
      for (const auto& b : mine) tokens += b.tgt_tokens;
      if (group) {
        std::vector<double> all{double(tokens)};
        group->sum(all);  // the update's target tokens over every rank: the loss is per token of the whole update
        tokens = int64_t(all[0]);
      }
      optimizer->zero_grad();
      double loss_sum = 0, nll_sum = 0;
      for (size_t k = 0; k < mine.size(); ++k) {
        const data::Batch b = mine[k].to(device);
        // Dropout masks from (seed, update, batch index), whichever process trains the batch.
        torch::manual_seed(dist::batch_seed(tc.seed, state.step + 1, mine_index[k]));
        LossTerms t;
        {
          Autocast autocast(bf16);
          const torch::Tensor real = b.tgt_out.ne(ids.pad);  // [b, t]
          t = token_loss(model->logits_at(b.src, b.tgt_in, real), b.tgt_out.masked_select(real), tc.label_smoothing);
        }
        (t.smoothed_sum / double(tokens)).backward();
        loss_sum += t.smoothed_sum.item<double>();
        nll_sum += t.nll_sum.item<double>();
      }
      if (group) {
        reducer->reduce();
        std::vector<double> sums{loss_sum, nll_sum};
        group->sum(sums);
        loss_sum = sums[0], nll_sum = sums[1];
      }
      if (fault::fires("nonfinite_grad", state.step + 1)) {
        model->parameters().front().mutable_grad().view(-1)[0].fill_(std::numeric_limits<float>::infinity());
      }
      // The global gradient norm, clipped when train.clip_norm is set: computed either way, since a
      // non-finite gradient must skip the update whether or not clipping is on.
      double grad_norm = 0;
      bool finite = std::isfinite(loss_sum);
      if (finite) {
        grad_norm = torch::nn::utils::clip_grad_norm_(
            model->parameters(), tc.clip_norm > 0 ? tc.clip_norm : std::numeric_limits<double>::infinity());
        finite = std::isfinite(grad_norm);
      }
      if (!finite) {
        optimizer->zero_grad();
        ++bad_steps;
        clear_progress();
        log::warn("non-finite loss or gradient at update {} (epoch {}): update skipped ({} in a row)", state.step + 1,
                  state.epoch, bad_steps);
        if (bad_steps >= tc.max_bad_steps) {
          throw Error(
              fmt::format("training diverged: {} non-finite updates in a row at update {}; lower train.lr / "
                          "train.lr_factor or raise train.warmup_steps (last good checkpoint: {})",
                          bad_steps, state.step, (run_dir / "last.pt").string()));
        }
      } else {
        bad_steps = 0;
        const double lr = scheduler.next_lr(update_start_s);
        set_lr(*optimizer, lr);
        optimizer->step();
        scheduler.on_update(tokens, nll_sum);
        window_loss += loss_sum;
        window_nll += nll_sum;
        window_tokens += tokens;
        const double now = elapsed();
        const double run_s = now - elapsed_before;
        const double tok_per_s = run_s > 0 ? double(state.tgt_tokens - tokens_at_start) / run_s : 0;
        if (state.step % tc.log_every == 0) {
          json row = {{"type", "train"},
                      {"step", state.step},
                      {"epoch", state.epoch},
                      {"loss", window_loss / double(window_tokens)},
                      {"nll", window_nll / double(window_tokens)},
                      {"lr", lr},
                      {"grad_norm", grad_norm},
                      {"tgt_tokens", state.tgt_tokens},
                      {"tokens_per_s", tok_per_s},
                      {"elapsed_s", now}};
          if (group) {
            // The share of the window's time spent in collectives (rank 0's view; it includes waiting for the others).
            const double window_s = std::chrono::duration<double>(Clock::now() - window_start).count();
            row["ranks"] = world;
            row["comm_share"] = window_s > 0 ? group->take_comm_seconds() / window_s : 0.0;
          }
          if (writer) metrics << row.dump() << std::endl;
          train_curve.push_back({double(state.step), window_nll / double(window_tokens)});
          if (lm) {
            // The LM tutorial's progress line (its loss: the mean over the window's batches).
            const double window_s = std::chrono::duration<double>(Clock::now() - window_start).count();
            const double nll = window_nll / double(window_tokens);
            clear_progress();
            log::info(
                "| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | {:5.2f} ms/batch | loss {:5.2f} | ppl {:8.2f}",
                state.epoch, source->position().index, batches_per_epoch, lr,
                1000 * window_s / double(state.step - window_step), nll, std::exp(std::min(nll, 700.0)));
          } else if (!tty) {
            log::info("epoch {} update {} | loss {:.3f} (nll {:.3f}) | lr {:.3g} | {:.0f} tgt tok/s", state.epoch,
                      state.step, window_loss / double(window_tokens), window_nll / double(window_tokens), lr,
                      tok_per_s);
          }
          window_loss = window_nll = 0;
          window_tokens = 0;
          window_start = Clock::now();
          window_step = state.step;
        }
        if (tty && std::chrono::duration<double>(Clock::now() - last_progress).count() > 0.5) {
          last_progress = Clock::now();
          const double steps_per_s = double(state.step - steps_at_start) / std::max(run_s, 1e-9);
          double remaining = 1e300;
          if (tc.max_steps > 0) remaining = std::min(remaining, double(tc.max_steps - state.step) / steps_per_s);
          if (tc.max_epochs > 0) {
            const double left = double(tc.max_epochs - state.epoch + 1) * double(batches_per_epoch) / tc.accum_steps -
                                double(source->position().index) / tc.accum_steps;
            remaining = std::min(remaining, std::max(0.0, left) / steps_per_s);
          }
          if (tc.max_minutes > 0) remaining = std::min(remaining, tc.max_minutes * 60 - now);
          std::fprintf(
              stderr,
              "\r\033[Kepoch %lld | update %lld | batch %lld/%lld | loss %.3f | lr %.3g | %.0f tgt tok/s | ETA %s",
              static_cast<long long>(state.epoch), static_cast<long long>(state.step),
              static_cast<long long>(source->position().index), static_cast<long long>(batches_per_epoch),
              loss_sum / double(tokens), lr, tok_per_s,
              remaining < 1e299 ? format_duration(std::max(0.0, remaining)).c_str() : "?");
          std::fflush(stderr);
        }
        if (scheduler.validation_due()) {
          const Validation v = validate();
          clear_progress();
          log::info("| Update: {} | Val. Loss: {:.3f} | Val. PPL: {:7.3f} |{}", state.step, v.loss, v.ppl,
                    bleu_text(v.bleu));
          const bool improved = record(v, state.epoch);
          save(true, improved);
        }
        if (scheduler.translation_due() && writer) {
          clear_progress();
          translate_validation(model, tok, *pairs->valid, val_refs, cfg, run_dir, state.step);
        }
      }
    }
    if (epoch_ended) {
      // One validation per update: when validate_every just validated this update, the epoch's end uses it.
      std::optional<Validation> v;
      if (scheduler.epoch_end_needs_validation()) v = validate();
      const Scheduler::EpochEnd e = scheduler.on_epoch_end();
      const double val_loss = v ? v->loss : state.last_val_loss, val_ppl = v ? v->ppl : state.last_val_ppl;
      clear_progress();
      const double epoch_s = std::chrono::duration<double>(Clock::now() - epoch_start).count();
      if (lm) {
        const std::string rule(89, '-');
        log::info("{}", rule);
        log::info("| end of epoch {:3d} | time: {:5.2f}s | valid loss {:5.2f} | valid ppl {:8.2f}", e.epoch, epoch_s,
                  val_loss, val_ppl);
        log::info("{}", rule);
      } else {
        log::info(
            "| Epoch: {:03d} | Time: {}| Train Loss: {:.3f} | Train PPL: {:7.3f} | Val. Loss: {:.3f} | Val. PPL: "
            "{:7.3f} |{}",
            e.epoch, minutes_seconds(epoch_s), e.train_nll, std::exp(std::min(e.train_nll, 700.0)), val_loss, val_ppl,
            bleu_text(v ? v->bleu : state.last_val_bleu));
      }
      epoch_start = Clock::now();
      const bool improved = v && record(*v, e.epoch);
      save(v.has_value(), improved);
    }
  }
  clear_progress();
  summary.steps = state.step;
  summary.epoch = state.epoch;
  summary.best_val_loss = state.best_metric;
  if (!writer) return summary;  // the rest is rank 0's: the stop's validation, last.pt, avg.pt

  // Whatever stopped training, the state at the stop is saved in last.pt (unless it just was). Its
  // validation is a report: it moves no best metric or patience and writes no best.pt or step-N.pt, so a
  // run resumed from here takes the same decisions as one that never stopped. Except where the budget is
  // the schedule's own end (cosine, linear, or a cool-down: the learning rate reaches its floor there, and a
  // longer budget is another schedule, not a continuation): that validation counts, so best.pt and avg.pt see
  // the annealed model.
  const bool budget_end =
      (summary.stop_reason == "max_steps" || summary.stop_reason == "max_minutes") &&
      (tc.schedule == config::Schedule::cosine || tc.schedule == config::Schedule::linear || tc.cooldown > 0);
  if (scheduler.unsaved()) {
    const Validation v = validate(false);
    log::info("| Final (update {}) | Val. Loss: {:.3f} | Val. PPL: {:7.3f} |{}", state.step, v.loss, v.ppl,
              bleu_text(v.bleu));
    if (budget_end) {
      save(true, record(v, state.epoch));
    } else {
      json row = {{"type", "final"},    {"step", state.step}, {"epoch", state.epoch},
                  {"val_loss", v.loss}, {"val_ppl", v.ppl},   {"elapsed_s", elapsed()}};
      if (want_bleu) row["val_bleu"] = v.bleu;
      metrics << row.dump() << std::endl;
      save(false, false);
      summary.last_val_loss = v.loss;
      // Until a scheduled validation has chosen a best model, best.pt is the model at the stop (the first
      // scheduled validation replaces it in any run, resumed or not).
      if (!std::isfinite(state.best_metric)) copy_file_atomic(run_dir / "last.pt", run_dir / "best.pt");
      if (std::isfinite(state.best_metric) && scheduler.better_than_best(v.metric(bleu_best))) {
        log::info(
            "the model at the stop (last.pt, {} {:.3f}) beats best.pt ({:.3f} at update {}); best.pt holds the "
            "best of the scheduled validations only",
            metric_name, v.metric(bleu_best), state.best_metric, state.best_step);
      }
    }
  }
  write_curve();
  if (tc.average_last > 1) {
    // The last K scheduled checkpoints, the model at the stop (last.pt) among them when it is newer.
    const auto steps = step_checkpoints(run_dir);
    std::vector<fs::path> last;
    std::vector<int64_t> last_steps;
    for (const auto& s : steps) last.push_back(s.second), last_steps.push_back(s.first);
    if (steps.empty() || steps.back().first < state.step) {
      last.push_back(run_dir / "last.pt");
      last_steps.push_back(state.step);
    }
    if (last.size() > size_t(tc.average_last)) {
      last.erase(last.begin(), last.end() - tc.average_last);
      last_steps.erase(last_steps.begin(), last_steps.end() - tc.average_last);
    }
    if (last.size() >= 2 && !tc.average_choose) average_checkpoints(last, run_dir / "avg.pt");
    if (last.size() >= 2 && tc.average_choose) {
      // avg.pt is the best on the validation set (best_metric) of the averages of the last k = 1 .. K
      // checkpoints (k = 1: the newest alone), so that K is a ceiling rather than a guess.
      torch::NoGradGuard no_grad;
      int best_k = 0;
      double best_metric = 0;
      for (size_t k = 1; k <= last.size(); ++k) {
        const std::vector<fs::path> tail(last.end() - k, last.end());
        const fs::path candidate = k == 1 ? tail.back() : run_dir / fmt::format("avg-{}.pt", k);
        if (k > 1) average_checkpoints(tail, candidate);
        copy_weights(load_checkpoint(candidate, device).model, model);
        const Validation v = validate(false);
        log::info("| Average of the last {} | Val. Loss: {:.3f} | Val. PPL: {:7.3f} |{}", k, v.loss, v.ppl,
                  bleu_text(v.bleu));
        json row = {{"type", "average"},
                    {"k", k},
                    {"from_step", last_steps[last.size() - k]},
                    {"to_step", last_steps.back()},
                    {"val_loss", v.loss},
                    {"val_ppl", v.ppl}};
        if (want_bleu) row["val_bleu"] = v.bleu;
        metrics << row.dump() << std::endl;
        const double m = v.metric(bleu_best);
        if (best_k == 0 || (bleu_best ? m > best_metric : m < best_metric)) best_k = int(k), best_metric = m;
      }
      if (best_k == 1) {
        copy_file_atomic(last.back(), run_dir / "avg.pt");
      } else {
        fs::rename(run_dir / fmt::format("avg-{}.pt", best_k), run_dir / "avg.pt");
      }
      for (size_t k = 2; k <= last.size(); ++k) fs::remove(run_dir / fmt::format("avg-{}.pt", k));
      summary.average_k = best_k;
      metrics << json{{"type", "average_pick"}, {"k", best_k}, {"metric", metric_name}, {"value", best_metric}}.dump()
              << std::endl;
      log::info("avg.pt: the average of the last {} checkpoints (the best validation {} of k = 1..{})", best_k,
                metric_name, last.size());
    }
  }
  if (lm) {
    // The tutorial's last line: the best model (best.pt) on the test stream.
    CheckpointContent best = load_checkpoint(run_dir / "best.pt", device);
    if (const auto t = source->test_loss(best.model, device)) {
      const std::string rule(89, '=');
      log::info("{}", rule);
      log::info("| End of training | test loss {:5.2f} | test ppl {:8.2f}", t->loss, t->ppl);
      log::info("{}", rule);
      metrics << json{{"type", "test"}, {"step", best.state.step}, {"test_loss", t->loss}, {"test_ppl", t->ppl}}.dump()
              << std::endl;
      summary.test_loss = t->loss;
    }
  }
  summary.steps = state.step;
  summary.epoch = state.epoch;
  summary.best_val_loss = state.best_metric;
  const std::string best =
      std::isfinite(state.best_metric)
          ? fmt::format(
                "best {} {:.3f}{} at update {}", metric_name, state.best_metric,
                bleu_best ? std::string() : fmt::format(" (ppl {:.2f})", std::exp(std::min(state.best_metric, 700.0))),
                state.best_step)
          : std::string("no scheduled validation yet, best.pt is the model at the stop");
  log::info("stopped ({}) at update {} after {}; {}; {}", summary.stop_reason, state.step, format_duration(elapsed()),
            best, (run_dir / "best.pt").string());
  if (summary.signal) {
    log::info("interrupted by signal {}: last.pt is saved; continue with: mtx train --resume {}", summary.signal,
              run_dir.string());
  }
  return summary;
}

}  // namespace mtx::train
