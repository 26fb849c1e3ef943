#include "mtx/train/trainer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fmt/format.h>
#include <minizip/unzip.h>
#include <minizip/zip.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "mtx/train/average.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/errors.h"
#include "mtx/util/faults.h"
#include "mtx/util/system.h"
#include "test_utils.h"

namespace fs = std::filesystem;
namespace train = mtx::train;
namespace model = mtx::model;

namespace {

mtx::config::Config toy_training(const mtx::test::TempDir& tmp) {
  mtx::config::Config c = mtx::test::toy_setup(tmp);
  c.model.dropout = 0.1;  // dropout on: exact resume must restore the RNG
  c.model.attention_dropout = 0.1;
  c.train.max_epochs = 0;
  c.train.warmup_steps = 10;
  c.train.log_every = 5;
  c.train.keep_last = 2;
  return c;
}

// The step-*.pt names in a run directory, sorted.
std::vector<std::string> step_files(const fs::path& run) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(run)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) == 0) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool same_weights(train::CheckpointContent& a, train::CheckpointContent& b) {
  const auto pa = a.model->named_parameters(), pb = b.model->named_parameters();
  if (pa.size() != pb.size()) return false;
  for (const auto& p : pa) {
    if (!torch::equal(p.value(), pb[p.key()])) return false;
  }
  return true;
}

}  // namespace

TEST(Trainer, ResumeContinuesBitwiseIdentically) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.accum_steps = 2;
  c.train.validate_every = 7;

  c.train.max_steps = 24;
  mtx::test::train_run(c, tmp / "one");

  c.train.max_steps = 11;
  mtx::test::train_run(c, tmp / "two");
  c.train.max_steps = 24;
  mtx::test::train_run(c, tmp / "two", train::load_checkpoint(tmp / "two" / "last.pt"));

  auto a = train::load_checkpoint(tmp / "one" / "last.pt");
  auto b = train::load_checkpoint(tmp / "two" / "last.pt");
  EXPECT_EQ(a.state.step, 24);
  EXPECT_EQ(b.state.step, 24);
  EXPECT_TRUE(same_weights(a, b)) << "N+M in one run and N + resume + M must give identical weights";
  EXPECT_EQ(a.weights_sha256, b.weights_sha256);
  EXPECT_EQ(a.state.position, b.state.position);
  EXPECT_EQ(a.state.tgt_tokens, b.state.tgt_tokens);
}

TEST(Trainer, RunDirectoryHoldsCheckpointsMetricsAndCurve) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.max_epochs = 3;
  const train::TrainSummary s = mtx::test::train_run(c, tmp / "run");
  EXPECT_EQ(s.stop_reason, "max_epochs");
  for (const char* f : {"best.pt", "last.pt", "config.json", "metrics.jsonl", "curve.svg"}) {
    EXPECT_TRUE(fs::exists(tmp / "run" / f)) << f;
  }
  EXPECT_EQ(step_files(tmp / "run").size(), 2u) << "keep_last = 2";

  std::ifstream in(tmp / "run" / "metrics.jsonl");
  std::string line;
  int train_rows = 0, valid_rows = 0;
  double first_loss = -1, last_loss = -1;
  int64_t last_tokens = 0;
  while (std::getline(in, line)) {
    const auto row = nlohmann::json::parse(line);
    if (row["type"] == "train") {
      ++train_rows;
      for (const char* k : {"step", "epoch", "loss", "lr", "tgt_tokens", "elapsed_s"})
        EXPECT_TRUE(row.contains(k)) << k;
      EXPECT_GE(row["tgt_tokens"].get<int64_t>(), last_tokens) << "cumulative";
      last_tokens = row["tgt_tokens"];
    } else {
      ++valid_rows;
      if (first_loss < 0) first_loss = row["val_loss"];
      last_loss = row["val_loss"];
    }
  }
  EXPECT_GT(train_rows, 0);
  EXPECT_EQ(valid_rows, 3);
  EXPECT_LT(last_loss, first_loss) << "validation loss falls";
  const std::string svg = mtx::read_file(tmp / "run" / "curve.svg");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("polyline"), std::string::npos);

  auto best = train::load_checkpoint(tmp / "run" / "best.pt");
  EXPECT_NEAR(best.state.best_metric, s.best_val_loss, 1e-12);
  EXPECT_TRUE(best.tokenizer.has_value());
  EXPECT_EQ(mtx::config::to_json(best.config), mtx::config::to_json(c));
}

TEST(Trainer, EarlyStoppingHonoursPatience) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.max_epochs = 50;
  c.train.patience = 1;
  c.train.schedule = mtx::config::Schedule::constant;
  c.train.lr = 0.05;  // far too high: validation stops improving quickly
  c.train.warmup_steps = 0;
  const train::TrainSummary s = mtx::test::train_run(c, tmp / "run");
  EXPECT_EQ(s.stop_reason, "early_stopping");
  EXPECT_LT(s.epoch, 50);
}

TEST(Trainer, BestCheckpointCanBeChosenByValidationBleu) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.max_epochs = 12;
  c.train.max_tokens = 256;  // many small updates: the toy sentences are learnt, so BLEU moves
  c.train.schedule = mtx::config::Schedule::constant;
  c.train.lr = 0.003;
  c.train.warmup_steps = 0;
  c.train.best_metric = mtx::config::BestMetric::bleu;
  const train::TrainSummary s = mtx::test::train_run(c, tmp / "run");
  std::ifstream in(tmp / "run" / "metrics.jsonl");
  double best_bleu = -1;
  int64_t best_step = -1;
  int rows = 0;
  for (std::string line; std::getline(in, line);) {
    const auto row = nlohmann::json::parse(line);
    if (row["type"] != "valid") continue;
    ++rows;
    ASSERT_TRUE(row.contains("val_bleu")) << line;
    const double b = row["val_bleu"];
    EXPECT_GE(b, 0.0);
    EXPECT_LE(b, 100.0 + 1e-9);
    if (b > best_bleu) {
      best_bleu = b;
      best_step = row["step"];
    }
    EXPECT_EQ(row["best"].get<bool>(), row["step"].get<int64_t>() == best_step) << "best = a new highest BLEU";
  }
  EXPECT_EQ(rows, 12);
  EXPECT_GT(best_bleu, 0.0) << "the toy model learns something";
  auto best = train::load_checkpoint(tmp / "run" / "best.pt");
  EXPECT_NEAR(best.state.best_metric, best_bleu, 1e-9);
  EXPECT_EQ(best.state.best_step, best_step);
  EXPECT_NEAR(s.best_val_loss, best_bleu, 1e-9);
}

TEST(Trainer, NonFiniteLossesAreSkippedThenStop) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.schedule = mtx::config::Schedule::constant;
  c.train.lr = 1e30;  // the first update wrecks the weights: every later loss is NaN/Inf
  c.train.warmup_steps = 0;
  c.train.clip_norm = 0;
  c.train.max_bad_steps = 3;
  c.train.max_steps = 50;
  try {
    mtx::test::train_run(c, tmp / "run");
    FAIL() << "expected the run to stop";
  } catch (const mtx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("3 non-finite updates in a row"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp / "run" / "last.pt")) << "no checkpoint with non-finite weights";
}

TEST(Checkpoint, NonFiniteWeightsAreNeverWritten) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.max_steps = 2;
  mtx::test::train_run(c, tmp / "run");
  auto ckpt = train::load_checkpoint(tmp / "run" / "last.pt");
  const std::string before = mtx::read_file(tmp / "run" / "last.pt");
  {
    torch::NoGradGuard g;
    ckpt.model->parameters()[0][0].fill_(std::numeric_limits<float>::quiet_NaN());
  }
  EXPECT_THROW(
      train::save_checkpoint(tmp / "run" / "last.pt", ckpt.config, *ckpt.tokenizer, ckpt.model, nullptr, ckpt.state),
      mtx::Error);
  EXPECT_EQ(mtx::read_file(tmp / "run" / "last.pt"), before) << "the old checkpoint is untouched";
}

TEST(Checkpoint, RoundTripKeepsWeightsAndTokenizerAndRejectsGarbage) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.max_steps = 3;
  mtx::test::train_run(c, tmp / "run");
  auto a = train::load_checkpoint(tmp / "run" / "last.pt");
  train::save_checkpoint(tmp / "copy.pt", a.config, *a.tokenizer, a.model, nullptr, a.state);
  auto b = train::load_checkpoint(tmp / "copy.pt");
  EXPECT_TRUE(same_weights(a, b));
  EXPECT_EQ(train::weights_sha256(b.model), a.weights_sha256);
  EXPECT_EQ(b.tokenizer->hash(), a.tokenizer->hash());
  EXPECT_EQ(b.state.step, 3);
  mtx::test::write_text(tmp / "bad.pt", "not a checkpoint");
  EXPECT_THROW(train::load_checkpoint(tmp / "bad.pt"), mtx::DataError);
  EXPECT_THROW(train::load_checkpoint(tmp / "missing.pt"), mtx::DataError);
}

// Any single flipped byte anywhere in a checkpoint either changes nothing that is read (zip padding, names,
// CRCs) or is a DataError naming the file: never a crash, never a resume from silently different weights,
// training state, optimizer state or random generator state.
TEST(Checkpoint, EveryFlippedByteIsRefusedOrChangesNothing) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.max_steps = 2;
  mtx::test::train_run(c, tmp / "run");
  const fs::path good_path = tmp / "run" / "last.pt";
  const std::string good = mtx::read_file(good_path);
  const auto ref = train::load_checkpoint(good_path);
  ASSERT_FALSE(ref.optimizer_bytes.empty());
  torch::Tensor ref_rng;
  ASSERT_TRUE(ref.archive->try_read("rng_cpu", ref_rng, true));
  const size_t stride = good.size() / 400 + 1;
  int refused = 0, unchanged = 0;
  for (size_t off = 7; off < good.size(); off += stride) {
    std::string bad = good;
    bad[off] = char(~bad[off]);
    const fs::path path = tmp / "flip.pt";
    mtx::test::write_text(path, bad);
    try {
      auto ck = train::load_checkpoint(path);
      model::Transformer fresh = train::build_model(ck.config, *ck.tokenizer);
      auto opt = torch::optim::Adam(fresh->parameters(), torch::optim::AdamOptions(1e-3));
      train::restore_optimizer(ck, opt);
      train::restore_rng(ck);
      torch::Tensor rng;
      ASSERT_TRUE(ck.archive->try_read("rng_cpu", rng, true)) << "flip at " << off;
      EXPECT_EQ(ck.weights_sha256, ref.weights_sha256) << "flip at " << off;
      EXPECT_EQ(train::weights_sha256(ck.model), ref.weights_sha256) << "flip at " << off;
      EXPECT_EQ(train::to_json(ck.state), train::to_json(ref.state)) << "flip at " << off;
      EXPECT_EQ(mtx::config::to_json(ck.config), mtx::config::to_json(ref.config)) << "flip at " << off;
      EXPECT_EQ(ck.tokenizer->hash(), ref.tokenizer->hash()) << "flip at " << off;
      EXPECT_TRUE(ck.optimizer_bytes == ref.optimizer_bytes) << "optimizer state changed by a flip at " << off;
      EXPECT_TRUE(torch::equal(rng, ref_rng)) << "generator state changed by a flip at " << off;
      ++unchanged;
    } catch (const mtx::DataError& e) {
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "flip at " << off << ": not a DataError: " << e.what();
    }
  }
  EXPECT_GT(refused, 300) << unchanged << " flips changed nothing";
}

// Copies the zip archive `from` to `to`, entry by entry (stored, with fresh CRCs), passing each entry's bytes
// through `edit`: a damaged checkpoint whose zip container is sound.
void rewrite_zip(const fs::path& from, const fs::path& to,
                 const std::function<void(const std::string&, std::string&)>& edit) {
  unzFile in = unzOpen64(from.c_str());
  ASSERT_NE(in, nullptr);
  zipFile out = zipOpen64(to.c_str(), APPEND_STATUS_CREATE);
  ASSERT_NE(out, nullptr);
  for (int status = unzGoToFirstFile(in); status == UNZ_OK; status = unzGoToNextFile(in)) {
    unz_file_info64 info;
    char name[1024] = {};
    ASSERT_EQ(unzGetCurrentFileInfo64(in, &info, name, sizeof name - 1, nullptr, 0, nullptr, 0), UNZ_OK);
    std::string bytes(size_t(info.uncompressed_size), '\0');
    ASSERT_EQ(unzOpenCurrentFile(in), UNZ_OK);
    ASSERT_EQ(unzReadCurrentFile(in, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
    ASSERT_EQ(unzCloseCurrentFile(in), UNZ_OK);
    edit(name, bytes);
    zip_fileinfo zi = {};
    ASSERT_EQ(zipOpenNewFileInZip64(out, name, &zi, nullptr, 0, nullptr, 0, nullptr, 0, 0, 0), ZIP_OK);
    ASSERT_EQ(zipWriteInFileInZip(out, bytes.data(), unsigned(bytes.size())), ZIP_OK);
    ASSERT_EQ(zipCloseFileInZip(out), ZIP_OK);
  }
  unzClose(in);
  ASSERT_EQ(zipClose(out, nullptr), ZIP_OK);
}

// Found by fuzz_checkpoint: LibTorch compiles a checkpoint's code/ entries on every load, and its TorchScript
// front end crashed (SEGV in ScriptTypeParser) on a module declaration whose `__parameters__` became
// `__pavameters__`. Such entries, whole zips with sound CRCs, are refused by mtx before LibTorch parses them.
TEST(Checkpoint, DamagedTorchScriptIsRefusedBeforeLibTorchCompilesIt) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.max_steps = 1;
  mtx::test::train_run(c, tmp / "run");
  const fs::path good = tmp / "run" / "last.pt";
  const auto ref = train::load_checkpoint(good);
  // The copy itself loads: what is refused below is the edit, not the rewriting.
  rewrite_zip(good, tmp / "copy.pt", [](const std::string&, std::string&) {});
  EXPECT_EQ(train::load_checkpoint(tmp / "copy.pt").weights_sha256, ref.weights_sha256);
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"__parameters__ = [\"weight\", \"bias\", ]", "__pavameters__ = [\"weight\", \"bias\", ]"},
      {"  bias : Tensor", "  bias : Tensor[0]"},
      {"class Module(Module):", "def f(x):\n  return x\nclass Module(Module):"},
      {"  weight : Tensor", "  weight : __torch__.(]"},
      {"__buffers__ = []", std::string("__buffers__ = [") + std::string(5000, '"') + "]"},
  };
  for (const auto& [from, to] : edits) {
    const fs::path bad = tmp / "bad.pt";
    int edited = 0;
    rewrite_zip(good, bad, [&, &from = from, &to = to](const std::string& name, std::string& bytes) {
      const size_t at = bytes.find(from);
      if (name.size() > 3 && name.compare(name.size() - 3, 3, ".py") == 0 && at != std::string::npos && edited == 0) {
        bytes.replace(at, from.size(), to);
        ++edited;
      }
    });
    ASSERT_EQ(edited, 1) << from;
    try {
      train::load_checkpoint(bad);
      ADD_FAILURE() << "loaded with " << to;
    } catch (const mtx::DataError& e) {
      EXPECT_NE(std::string(e.what()).find("is not a module declaration"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad.string() + ": archive/code/"), std::string::npos) << e.what();
    }
  }
}

// Found by fuzz_checkpoint: a training state whose integer holds 3.4e29 was converted by nlohmann (undefined
// behaviour); any such value, a string, or a non-object is now a DataError (load_checkpoint names the file).
TEST(Checkpoint, TrainingStateJsonIsCheckedNotConverted) {
  const nlohmann::json good = train::to_json(train::TrainState{});
  EXPECT_NO_THROW(train::train_state_from_json(good));
  for (const char* key : {"step", "epoch", "tgt_tokens", "best_step", "bad_validations"}) {
    for (const nlohmann::json& bad : {nlohmann::json(3.44444e29), nlohmann::json(1.5), nlohmann::json("7"),
                                      nlohmann::json(18446744073709551615ull)}) {
      nlohmann::json j = good;
      j[key] = bad;
      EXPECT_THROW(train::train_state_from_json(j), mtx::DataError) << key << " = " << bad.dump();
    }
  }
  nlohmann::json j = good;
  j["bad_validations"] = int64_t(1) << 40;  // an int64 that does not fit the int counter
  EXPECT_THROW(train::train_state_from_json(j), mtx::DataError);
  j = good;
  j["elapsed_s"] = "soon";
  EXPECT_THROW(train::train_state_from_json(j), mtx::DataError);
  EXPECT_THROW(train::train_state_from_json(nlohmann::json::array()), mtx::DataError);
}

TEST(Checkpoint, AveragingGivesTheElementwiseMeanAndRefusesOtherModels) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.max_steps = 6;
  c.train.validate_every = 3;
  c.train.keep_last = 2;
  c.train.average_last = 2;
  mtx::test::train_run(c, tmp / "run");
  ASSERT_TRUE(fs::exists(tmp / "run" / "step-3.pt"));
  ASSERT_TRUE(fs::exists(tmp / "run" / "step-6.pt"));
  ASSERT_TRUE(fs::exists(tmp / "run" / "avg.pt")) << "train.average_last writes avg.pt";
  train::average_checkpoints({tmp / "run" / "step-3.pt", tmp / "run" / "step-6.pt"}, tmp / "mean.pt");
  auto a = train::load_checkpoint(tmp / "run" / "step-3.pt");
  auto b = train::load_checkpoint(tmp / "run" / "step-6.pt");
  auto m = train::load_checkpoint(tmp / "mean.pt");
  auto avg = train::load_checkpoint(tmp / "run" / "avg.pt");
  const auto pa = a.model->named_parameters(), pb = b.model->named_parameters();
  for (const auto& p : m.model->named_parameters()) {
    const torch::Tensor want = (pa[p.key()].to(torch::kDouble) + pb[p.key()].to(torch::kDouble)) / 2;
    EXPECT_TRUE(torch::allclose(p.value().to(torch::kDouble), want, 0, 1e-7)) << p.key();
  }
  EXPECT_TRUE(same_weights(m, avg));
  EXPECT_EQ(m.state.step, 6);

  // A different model is refused with a message naming it.
  mtx::test::TempDir tmp2;
  mtx::config::Config other = toy_training(tmp2);
  other.model.ffn_dim = 48;
  other.train.max_steps = 1;
  mtx::test::train_run(other, tmp2 / "run");
  const std::string msg = mtx::test::boundary_error<mtx::DataError>([&] {
    train::average_checkpoints({tmp / "run" / "step-6.pt", tmp2 / "run" / "last.pt"}, tmp / "bad.pt");
  });
  EXPECT_NE(msg.find("different model"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(tmp / "bad.pt"));
}

// train.average_choose: avg.pt is the average of the last k checkpoints (k = 1..average_last) that
// validates best, each candidate validated on its own weights.
TEST(Checkpoint, AverageChosenOnValidationIsTheBestOfTheLastK) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.max_steps = 12;
  c.train.validate_every = 3;
  c.train.keep_last = 4;
  c.train.average_last = 4;
  c.train.average_choose = true;
  const train::TrainSummary summary = mtx::test::train_run(c, tmp / "run");
  std::map<int64_t, double> loss_by_k;
  double loss_at_12 = std::numeric_limits<double>::quiet_NaN();
  std::ifstream in(tmp / "run" / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto row = nlohmann::json::parse(line);
    if (row["type"] == "valid" && row["step"] == 12) loss_at_12 = row["val_loss"];
    if (row["type"] == "average") {
      loss_by_k[row["k"].get<int64_t>()] = row["val_loss"];
      EXPECT_EQ(row["to_step"], 12) << line;
      EXPECT_EQ(row["from_step"], 12 - 3 * (row["k"].get<int64_t>() - 1)) << line;
    }
  }
  ASSERT_EQ(loss_by_k.size(), 4u);
  EXPECT_DOUBLE_EQ(loss_by_k[1], loss_at_12) << "k = 1 is step 12 alone";
  int64_t best_k = 1;
  for (const auto& [k, loss] : loss_by_k) {
    if (loss < loss_by_k[best_k]) best_k = k;
    if (k > 1) {
      EXPECT_NE(loss, loss_by_k[k - 1]) << "each average is validated on its own weights";
    }
  }
  EXPECT_EQ(summary.average_k, best_k);
  std::vector<fs::path> tail;
  for (int64_t s = 12 - 3 * (best_k - 1); s <= 12; s += 3)
    tail.push_back(tmp / "run" / ("step-" + std::to_string(s) + ".pt"));
  train::average_checkpoints(tail, tmp / "want.pt");
  auto want = train::load_checkpoint(tmp / "want.pt");
  auto avg = train::load_checkpoint(tmp / "run" / "avg.pt");
  EXPECT_TRUE(same_weights(want, avg)) << "avg.pt should average the last " << best_k;
  for (int k = 2; k <= 4; ++k) EXPECT_FALSE(fs::exists(tmp / "run" / ("avg-" + std::to_string(k) + ".pt")));

  c.train.average_last = 1;
  EXPECT_THROW(mtx::config::validate(c), mtx::ConfigError) << "choosing among one average is refused";
}

// ---- Defects of issue #12: each test below failed on the code before its fix. ----

namespace {

struct ValidRow {
  int64_t step = 0;
  int64_t epoch = 0;
  bool best = false;
  bool operator==(const ValidRow& o) const { return step == o.step && epoch == o.epoch && best == o.best; }
};

std::vector<ValidRow> valid_rows(const fs::path& run) {
  std::vector<ValidRow> rows;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto row = nlohmann::json::parse(line);
    if (row["type"] == "valid") rows.push_back({row["step"], row["epoch"], row["best"]});
  }
  return rows;
}

std::string describe(const std::vector<ValidRow>& rows) {
  std::string s;
  for (const auto& r : rows) s += fmt::format("(step {} epoch {}{}) ", r.step, r.epoch, r.best ? " best" : "");
  return s;
}

std::string sha_of(const fs::path& ckpt) { return train::load_checkpoint(ckpt).weights_sha256; }

// Disarms the failpoints when a test ends, whatever happens.
struct Faults {
  explicit Faults(const std::string& spec) { mtx::fault::arm(spec); }
  ~Faults() { mtx::fault::arm(""); }
};

}  // namespace

// Defect 1: a run stopped at an epoch's end (max_epochs) and resumed with a larger max_epochs trains
// exactly the missing epochs, labelled with their numbers.
TEST(Trainer, ResumingAfterMaxEpochsTrainsTheMissingEpochsOnly) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.max_epochs = 4;
  const auto whole = mtx::test::train_run(c, tmp / "one");
  c.train.max_epochs = 2;
  mtx::test::train_run(c, tmp / "two");
  c.train.max_epochs = 4;
  const auto resumed = mtx::test::train_run(c, tmp / "two", train::load_checkpoint(tmp / "two" / "last.pt"));
  EXPECT_EQ(resumed.steps, whole.steps) << "4 epochs in one run and 2 + resume to 4 train as many updates";
  EXPECT_EQ(resumed.stop_reason, "max_epochs");
  EXPECT_EQ(valid_rows(tmp / "two"), valid_rows(tmp / "one"))
      << describe(valid_rows(tmp / "two")) << "vs " << describe(valid_rows(tmp / "one"));
  EXPECT_EQ(sha_of(tmp / "two" / "last.pt"), sha_of(tmp / "one" / "last.pt"));
  const auto last = train::load_checkpoint(tmp / "one" / "last.pt");
  EXPECT_EQ(last.state.epoch, last.state.position.epoch) << "the checkpoint's epoch is the batch sampler's";
}

// Defect 2: the validation at a stop between scheduled validations is a report only: it moves no
// best metric, writes no step-N.pt, so the run resumed from there equals the unbroken one.
TEST(Trainer, StopBetweenValidationsLeavesTheRunAsAnUnbrokenOne) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.validate_every = 4;
  c.train.keep_last = 6;
  c.train.average_last = 3;
  c.train.max_steps = 14;
  mtx::test::train_run(c, tmp / "one");
  c.train.max_steps = 6;  // 6 is no validation point: a stop (signal, time) lands between two
  mtx::test::train_run(c, tmp / "two");
  EXPECT_EQ(step_files(tmp / "two"), std::vector<std::string>{"step-4.pt"}) << "a stop adds no step checkpoint";
  c.train.max_steps = 14;
  mtx::test::train_run(c, tmp / "two", train::load_checkpoint(tmp / "two" / "last.pt"));
  EXPECT_EQ(step_files(tmp / "two"), step_files(tmp / "one"));
  EXPECT_EQ(valid_rows(tmp / "two"), valid_rows(tmp / "one"))
      << describe(valid_rows(tmp / "two")) << "vs " << describe(valid_rows(tmp / "one"));
  for (const char* f : {"last.pt", "best.pt", "avg.pt"}) {
    EXPECT_EQ(sha_of(tmp / "two" / f), sha_of(tmp / "one" / f)) << f;
  }
  const auto a = train::load_checkpoint(tmp / "one" / "last.pt"), b = train::load_checkpoint(tmp / "two" / "last.pt");
  EXPECT_EQ(a.state.best_step, b.state.best_step);
  EXPECT_EQ(a.state.best_metric, b.state.best_metric);
  EXPECT_EQ(a.state.bad_validations, b.state.bad_validations);
}

TEST(Trainer, AScheduleThatEndsAtTheBudgetCountsTheFinalValidation) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.validate_every = 4;
  c.train.keep_last = 6;
  c.train.average_last = 2;
  c.train.max_steps = 10;  // validations at 4 and 8; the budget ends at 10, between two
  c.train.schedule = mtx::config::Schedule::cosine;
  c.train.lr = 0.003;
  mtx::test::train_run(c, tmp / "run");
  // The annealed model at the end is validated as a scheduled point: a step checkpoint, a "valid" row, and
  // best.pt / avg.pt choose among 4, 8 and 10.
  EXPECT_EQ(step_files(tmp / "run"), (std::vector<std::string>{"step-10.pt", "step-4.pt", "step-8.pt"}));
  std::ifstream in(tmp / "run" / "metrics.jsonl");
  std::vector<int64_t> valid_steps;
  double best_loss = 1e300;
  int64_t best_step = 0;
  for (std::string line; std::getline(in, line);) {
    const auto row = nlohmann::json::parse(line);
    EXPECT_NE(row["type"], "final") << line;
    if (row["type"] != "valid") continue;
    valid_steps.push_back(row["step"]);
    if (row["val_loss"].get<double>() < best_loss) {
      best_loss = row["val_loss"];
      best_step = row["step"];
    }
  }
  EXPECT_EQ(valid_steps, (std::vector<int64_t>{4, 8, 10}));
  const auto best = train::load_checkpoint(tmp / "run" / "best.pt");
  EXPECT_EQ(best.state.best_step, best_step);
  EXPECT_EQ(best.state.step, best_step);
  // The same stop under a schedule that goes on past it stays a report (see the test above).
  c.train.schedule = mtx::config::Schedule::noam;
  mtx::test::train_run(c, tmp / "noam");
  EXPECT_EQ(step_files(tmp / "noam"), (std::vector<std::string>{"step-4.pt", "step-8.pt"}));
  // Unless a cool-down takes that schedule to zero at the budget's end: then the stop is its end too.
  c.train.cooldown = 0.3;
  mtx::test::train_run(c, tmp / "noam-cooled");
  EXPECT_EQ(step_files(tmp / "noam-cooled"), (std::vector<std::string>{"step-10.pt", "step-4.pt", "step-8.pt"}));
}

// Defect 3: when validate_every divides the update that ends an epoch, that update is validated (and
// counted towards patience and the plateau schedule) once.
TEST(Trainer, AnUpdateIsValidatedOnceWhenAnEpochEndsOnIt) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.max_epochs = 3;
  c.train.validate_every = 9;  // the toy epoch is 27 updates
  mtx::test::train_run(c, tmp / "run");
  const auto rows = valid_rows(tmp / "run");
  ASSERT_EQ(rows.size(), 9u) << describe(rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].step, int64_t(9 * (i + 1)));
    EXPECT_EQ(rows[i].epoch, int64_t(i / 3 + 1)) << "an epoch-end validation is labelled with the epoch it ends";
  }
}

// Defect 5: best.pt and metrics.jsonl are replaced, never rewritten in place: a reader that opened the old
// file reads it whole.
TEST(Trainer, CheckpointsAndMetricsAreReplacedAtomically) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.max_epochs = 1;
  mtx::test::train_run(c, tmp / "run");
  const std::string best_before = mtx::read_file(tmp / "run" / "best.pt");
  const std::string metrics_before = mtx::read_file(tmp / "run" / "metrics.jsonl");
  std::ifstream best_reader(tmp / "run" / "best.pt", std::ios::binary);
  std::ifstream metrics_reader(tmp / "run" / "metrics.jsonl", std::ios::binary);
  c.train.max_epochs = 3;
  mtx::test::train_run(c, tmp / "run", train::load_checkpoint(tmp / "run" / "last.pt"));
  ASSERT_NE(mtx::read_file(tmp / "run" / "best.pt"), best_before) << "the toy model improves: best.pt is replaced";
  std::ostringstream best_seen, metrics_seen;
  best_seen << best_reader.rdbuf();
  metrics_seen << metrics_reader.rdbuf();
  EXPECT_TRUE(best_seen.str() == best_before) << "best.pt was overwritten in place (" << best_seen.str().size()
                                              << " bytes seen, " << best_before.size() << " before)";
  EXPECT_TRUE(metrics_seen.str() == metrics_before) << "metrics.jsonl was rewritten in place";
  for (const auto& e : fs::directory_iterator(tmp / "run")) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << "left behind: " << e.path();
  }
}

// Defect 6a: a non-finite gradient skips the update when clipping is off, too.
TEST(Trainer, NonFiniteGradientsAreSkippedWithoutClipping) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.clip_norm = 0;
  c.train.max_steps = 6;
  {
    Faults faults("nonfinite_grad@3");
    const auto s = mtx::test::train_run(c, tmp / "run");
    EXPECT_EQ(s.steps, 6);
  }
  auto last = train::load_checkpoint(tmp / "run" / "last.pt");
  EXPECT_TRUE(train::weights_finite(last.model));
  EXPECT_EQ(last.state.step, 6);
}

// Defect 6b: files in the run directory that look like step checkpoints but are not do not stop training.
TEST(Trainer, StrayStepLikeFilesAreLeftAlone) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.max_steps = 4;
  c.train.validate_every = 2;
  c.train.keep_last = 1;
  c.train.average_last = 2;
  for (const char* f : {"step-best.pt", "step-.pt", "step-12abc.pt"}) mtx::test::write_text(tmp / "run" / f, "mine");
  mtx::test::train_run(c, tmp / "run");
  for (const char* f : {"step-best.pt", "step-.pt", "step-12abc.pt"}) EXPECT_TRUE(fs::exists(tmp / "run" / f)) << f;
  EXPECT_TRUE(fs::exists(tmp / "run" / "step-4.pt"));
  EXPECT_FALSE(fs::exists(tmp / "run" / "step-2.pt")) << "keep_last = 1";
}

// Defect 6c: a training set that the filters empty is an error before training, not an endless loop.
TEST(Trainer, AnEmptyTrainingSetIsAnErrorNotALoop) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.data.filter_max_tokens = 1;  // every toy pair is longer
  c.train.max_steps = 10;
  c.train.max_minutes = 0.05;  // bounds the old endless loop to 3 seconds
  const std::string msg = mtx::test::boundary_error<mtx::DataError>([&] { mtx::test::train_run(c, tmp / "run"); });
  EXPECT_NE(msg.find("no training pairs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("data.filter_max_tokens"), std::string::npos) << msg;

  // With the tokenizer given (a resumed run), where the old code looped over empty epochs.
  mtx::config::Config ok = toy_training(tmp);
  ok.train.max_steps = 2;
  mtx::test::train_run(ok, tmp / "resumed");
  const std::string msg2 = mtx::test::boundary_error<mtx::DataError>(
      [&] { mtx::test::train_run(c, tmp / "resumed", train::load_checkpoint(tmp / "resumed" / "last.pt")); });
  EXPECT_NE(msg2.find("no training pairs"), std::string::npos) << msg2;
}

// Defect 6d: a NaN validation loss is never the best, and the run still resumes.
TEST(Trainer, NanValidationLossIsNotBestAndResumeWorks) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.validate_every = 4;
  c.train.max_steps = 4;
  {
    Faults faults("nan_val_loss@4");
    mtx::test::train_run(c, tmp / "run");
  }
  c.train.max_steps = 8;
  EXPECT_NO_THROW(mtx::test::train_run(c, tmp / "run", train::load_checkpoint(tmp / "run" / "last.pt")));
  const auto rows = valid_rows(tmp / "run");
  ASSERT_GE(rows.size(), 2u) << describe(rows);
  EXPECT_EQ(rows[0].step, 4);
  EXPECT_FALSE(rows[0].best) << "a NaN loss is no improvement";
  EXPECT_TRUE(rows[1].best) << "the first finite loss is";
  const auto best = train::load_checkpoint(tmp / "run" / "best.pt");
  EXPECT_TRUE(std::isfinite(best.state.best_metric));
  EXPECT_NE(best.state.best_step, 4);
}

// A fixed run -- dropout, validations, step checkpoints, a stop and a resume -- ends with weights pinned in
// tests/fixtures/trainer_weights.json, per LibTorch version, BLAS kernels, CPU vendor and instruction set (the
// float results depend on them): a change to the training loop that changes what it computes fails here. A platform
// with no pinned value skips, printing the value to pin.
TEST(Trainer, FixedRunEndsWithThePinnedWeights) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.validate_every = 4;
  c.train.keep_last = 2;
  c.train.max_steps = 10;
  mtx::test::train_run(c, tmp / "run");
  c.train.max_steps = 20;
  mtx::test::train_run(c, tmp / "run", train::load_checkpoint(tmp / "run" / "last.pt"));
  const auto last = train::load_checkpoint(tmp / "run" / "last.pt");
  ASSERT_EQ(last.state.step, 20);

  // The BLAS picks its kernels by CPU vendor and instruction set too (MKL does both).
  const mtx::RuntimeInfo info = mtx::runtime_info();
  std::string vendor;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; vendor.empty() && std::getline(cpuinfo, line);) {
    if (line.rfind("vendor_id", 0) == 0) vendor = line.substr(line.find(':') + 2);
  }
  const std::string platform = info.torch_version + " " + info.blas.substr(0, info.blas.find(" (/")) + " " + vendor +
                               " " + mtx::cpu::name(mtx::cpu::detected());
  const auto pinned =
      nlohmann::json::parse(mtx::read_file(fs::path(MTX_SOURCE_DIR) / "tests" / "fixtures" / "trainer_weights.json"));
  if (!pinned.contains(platform)) {
    GTEST_SKIP() << "no pinned weights for '" << platform << "'; this run ended with " << last.weights_sha256;
  }
  EXPECT_EQ(last.weights_sha256, pinned[platform].get<std::string>()) << platform;
}

// A run's settings are resolved once: the config file with --set for a new run; for a resume, the run's own
// settings with the overrides on top, refusing what a resume may not change.
TEST(Settings, ResolveRunReadsTheFileOrTheRunAndRefusesWhatMayNotChange) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.max_steps = 3;
  mtx::config::write_resolved(c, tmp / "toy.json");
  train::RunRequest fresh{tmp / "toy.json", {"train.max_steps=2"}, tmp / "run", {}, {}};
  const train::RunSettings s = train::resolve_run(fresh);
  EXPECT_EQ(s.config.train.max_steps, 2);
  EXPECT_EQ(s.run_dir, tmp / "run");
  EXPECT_FALSE(s.resume);
  mtx::test::train_run(s.config, s.run_dir);
  EXPECT_NE(mtx::test::boundary_error<mtx::ConfigError>([&] { train::resolve_run(fresh); }).find("--resume"),
            std::string::npos)
      << "a directory holding a run is not started afresh";

  train::RunRequest resume{{}, {"train.max_steps=5"}, {}, tmp / "run", {}};
  const train::RunSettings r = train::resolve_run(resume);
  ASSERT_TRUE(r.resume);
  EXPECT_EQ(r.resume->state.step, 2);
  EXPECT_EQ(r.config.train.max_steps, 5);
  EXPECT_EQ(r.config.model.d_model, c.model.d_model);

  resume.overrides = {"model.d_model=64"};
  const std::string changed = mtx::test::boundary_error<mtx::ConfigError>([&] { train::resolve_run(resume); });
  EXPECT_NE(changed.find("model.d_model: 32 vs 64"), std::string::npos) << changed;
  resume.overrides = {};
  resume.config_file = tmp / "other.json";
  mtx::config::Config other = c;
  other.model.ffn_dim = 128;
  mtx::config::write_resolved(other, resume.config_file);
  const std::string file = mtx::test::boundary_error<mtx::ConfigError>([&] { train::resolve_run(resume); });
  EXPECT_NE(file.find("model.ffn_dim"), std::string::npos) << file;
  EXPECT_NE(mtx::test::boundary_error<mtx::DataError>([&] {
              train::resolve_run({{}, {}, {}, tmp / "nothing", {}});
            }).find("not a run directory"),
            std::string::npos);
}

// A resume keeps the learning-rate schedule: where the schedule decays over the budget (cosine, linear, a
// cool-down), a changed max_steps or max_minutes is refused with what to do instead; elsewhere it is a longer
// or shorter run of the same schedule.
TEST(Settings, AResumeMayNotChangeTheBudgetADecayingScheduleFollows) {
  mtx::test::TempDir tmp;
  mtx::config::Config c = toy_training(tmp);
  c.train.max_steps = 2;
  c.train.schedule = mtx::config::Schedule::cosine;
  c.train.lr = 1e-3;
  mtx::test::train_run(c, tmp / "cosine");
  auto longer = c;
  longer.train.max_steps = 4;
  const auto ckpt = [&](const char* run) { return train::load_checkpoint(tmp / run / "last.pt"); };
  const std::string msg =
      mtx::test::boundary_error<mtx::ConfigError>([&] { train::resume_run(ckpt("cosine"), longer, tmp / "cosine"); });
  EXPECT_NE(msg.find("cosine schedule"), std::string::npos) << msg;
  EXPECT_NE(msg.find("train.max_steps 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("new run"), std::string::npos) << msg;
  auto timed = c;
  timed.train.max_minutes = 5;
  EXPECT_FALSE(mtx::test::boundary_error<mtx::ConfigError>([&] {
                 train::resume_run(ckpt("cosine"), timed, tmp / "cosine");
               }).empty());
  auto epochs = c;
  epochs.train.max_epochs = 3;  // not a budget the schedule reads
  EXPECT_TRUE(train::resume_run(ckpt("cosine"), epochs, tmp / "cosine").resume.has_value());

  c.train.schedule = mtx::config::Schedule::noam;
  c.train.cooldown = 0.5;
  mtx::test::train_run(c, tmp / "cooldown");
  longer = c;
  longer.train.max_steps = 4;
  EXPECT_NE(mtx::test::boundary_error<mtx::ConfigError>([&] {
              train::resume_run(ckpt("cooldown"), longer, tmp / "cooldown");
            }).find("with a cool-down"),
            std::string::npos);
  c.train.cooldown = 0;
  mtx::test::train_run(c, tmp / "noam");
  longer = c;
  longer.train.max_steps = 4;
  train::RunSettings ok = train::resume_run(ckpt("noam"), longer, tmp / "noam");
  EXPECT_EQ(train::Trainer(std::move(ok)).run().steps, 4) << "Noam without a cool-down does not read the budget";
}
