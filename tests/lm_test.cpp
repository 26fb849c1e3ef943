// The language-model task (PyTorch's Transformer tutorial): basic_english and its vocabulary, the
// batchified token sequence, the decoder-only model and its cache, perplexity, sampling, and training
// with checkpoints and exact resume.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "mtx/data/lm_text.h"
#include "mtx/decode/lm.h"
#include "mtx/model/transformer.h"
#include "mtx/tokenizer/tokenizer.h"
#include "mtx/train/checkpoint.h"
#include "mtx/train/schedule.h"
#include "mtx/train/trainer.h"
#include "mtx/util/errors.h"
#include "test_utils.h"

namespace fs = std::filesystem;
using namespace mtx;

namespace {

using Words = std::vector<std::string>;

model::Transformer tiny_lm(int64_t vocab, int64_t max_len = 32) {
  torch::manual_seed(3);
  return model::Transformer(model::TransformerOptions(vocab, vocab)
                                .d_model(16)
                                .heads(2)
                                .encoder_layers(2)
                                .ffn_dim(24)
                                .dropout(0.0)
                                .max_len(max_len)
                                .tie_output(false)
                                .uniform_embeddings(true)
                                .decoder_only(true));
}

// A text whose next word is mostly predictable, written as train/valid/test files for a tiny LM run.
config::Config lm_setup(const test::TempDir& tmp) {
  std::string train, valid;
  const char* animals[] = {"dog", "cat", "horse", "bird"};
  const char* verbs[] = {"runs", "sleeps", "jumps", "sings"};
  for (int i = 0; i < 400; ++i) {
    const std::string line =
        fmt::format("The {} {} in the {} park.\n", animals[i % 4], verbs[(i / 4) % 4], i % 3 ? "green" : "old");
    (i % 10 == 9 ? valid : train) += line;
  }
  fs::create_directories(tmp / "data");
  test::write_gzip(tmp / "data" / "train.txt.gz", train);
  test::write_text(tmp / "data" / "valid.txt", valid);
  test::write_text(tmp / "data" / "test.txt", valid);
  config::Config c;
  c.task = config::Task::lm;
  c.data.dir = (tmp / "data").string();
  c.data.train = "train.txt";  // found with .gz added
  c.data.valid = "valid.txt";
  c.data.test = "test.txt";
  c.data.cache_dir = (tmp / "cache").string();
  c.tokenizer.type = config::SpmType::basic_english;
  c.model.d_model = 16;
  c.model.heads = 2;
  c.model.encoder_layers = 1;
  c.model.ffn_dim = 32;
  c.model.max_len = 16;
  c.model.init = config::Init::uniform;
  c.model.tie_output = false;
  c.train.device = mtx::DeviceChoice::cpu;
  c.train.threads = 1;
  c.train.batch_size = 4;
  c.train.bptt = 12;
  c.train.eval_batch_size = 2;
  c.train.max_epochs = 2;
  c.train.optimizer = config::Optimizer::sgd;
  c.train.momentum = 0;
  c.train.lr = 1.0;
  c.train.schedule = config::Schedule::step;
  c.train.decay_steps = 0;
  c.train.decay_factor = 0.95;
  c.train.warmup_steps = 0;
  c.train.clip_norm = 0.5;
  c.train.label_smoothing = 0;
  c.train.log_every = 5;
  c.train.validate_every = 10;
  c.train.keep_last = 2;
  config::validate(c);
  return c;
}

}  // namespace

TEST(BasicEnglish, SplitsAsTorchtext) {
  // torchtext.data.utils.get_tokenizer("basic_english") on these lines.
  EXPECT_EQ(
      tokenizer::basic_english("Hello, World! It's \"fine\" (ok).<br />Yes; no: maybe?"),
      (Words{"hello", ",", "world", "!", "it", "'", "s", "fine", "(", "ok", ")", ".", "yes", "no", "maybe", "?"}));
  EXPECT_EQ(tokenizer::basic_english(" = Valkyria Chronicles III = \n"),
            (Words{"=", "valkyria", "chronicles", "iii", "="}));
  EXPECT_EQ(tokenizer::basic_english("3 @,@ 000 <unk> ÄRGER Straße"),
            (Words{"3", "@", ",", "@", "000", "<unk>", "ärger", "straße"}));
  EXPECT_EQ(tokenizer::basic_english("a<br \"/>b"), (Words{"a", "b"})) << "quotes go before <br />";
  EXPECT_TRUE(tokenizer::basic_english(" \t ").empty());
}

TEST(BasicEnglish, AgreesWithTorchtextOnMulti30kAndEdgeCases) {
  // scripts/make_basic_english_fixture.py: torchtext 0.18's rules run by Python on 600 Multi30k lines
  // (English and German) and Unicode edge cases (U+0130, final sigma, U+2028, U+3000, zero-width space).
  std::ifstream in(fs::path(MTX_SOURCE_DIR) / "tests/fixtures/lm/basic_english.jsonl");
  ASSERT_TRUE(in) << "fixture missing";
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    const auto row = nlohmann::json::parse(line);
    ASSERT_EQ(tokenizer::basic_english(row["line"].get<std::string>()), row["tokens"].get<Words>())
        << row["line"].get<std::string>();
    ++n;
  }
  EXPECT_EQ(n, 609);
}

TEST(WordModel, VocabularyByFrequencyThenCodePointAndUnknownsBelowMinFreq) {
  const auto m = tokenizer::WordModel::train({"b a c a", "c a d <unk>", "é"}, 1);
  // a:3, c:2, then b, d, é (1 each, code-point order); <unk> in the text is the special, not a word.
  EXPECT_EQ(m->vocab_size(), 9);
  const Words expected = {"<pad>", "<unk>", "<s>", "<eos>", "a", "c", "b", "d", "é"};
  for (int32_t i = 0; i < m->vocab_size(); ++i) EXPECT_EQ(m->piece(i), expected[size_t(i)]) << i;
  EXPECT_EQ(m->encode("A, b z <unk>"), (std::vector<int32_t>{4, 1, 6, 1, 1}));
  EXPECT_EQ(m->decode(std::vector<int32_t>{2, 4, 6, 3, 0}), "a b <eos>");

  const auto rare = tokenizer::WordModel::train({"b a c a", "c a d"}, 2);
  EXPECT_EQ(rare->vocab_size(), 6) << "b and d are seen once";
  EXPECT_EQ(rare->encode("b a"), (std::vector<int32_t>{1, 4}));

  const auto again = tokenizer::WordModel::from_bytes(m->bytes());
  EXPECT_EQ(again->sha256(), m->sha256());
  EXPECT_EQ(again->encode("d é a"), m->encode("d é a"));
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_bytes(m->bytes(), "");
  EXPECT_EQ(tok.tgt().kind(), "basic_english");
}

TEST(WordModel, MalformedBytesAreDataErrors) {
  const std::string good = tokenizer::WordModel::train({"x y"}, 1)->bytes();
  for (const std::string& bad : {std::string("mtx-words 1\n<pad>\n<unk>\n<s>\n"),               // no <eos>
                                 std::string("mtx-words 1\n<pad>\n<unk>\n<s>\n<eos>\nx\nx\n"),  // repeated
                                 std::string("mtx-words 1\n<pad>\n<unk>\n<s>\n<eos>\na b\n"),   // whitespace
                                 good.substr(0, good.size() - 1)}) {                            // truncated
    EXPECT_FALSE(test::boundary_error<DataError>([&] { tokenizer::WordModel::from_bytes(bad); }).empty()) << bad;
  }
}

TEST(BpttBatches, BatchifyAndWindowsAreTheTutorials) {
  std::vector<int32_t> ids(23);
  for (int32_t i = 0; i < 23; ++i) ids[size_t(i)] = 100 + i;
  // batchify(data, 3): 7 tokens per row (2 dropped); row j is tokens 7j..7j+6. bptt 4: windows at 0 and
  // 4 of lengths 4 and 2 (the last input has no next token).
  data::BpttBatches b(ids, 3, 4, "test");
  EXPECT_EQ(b.epoch_batches(), 2);
  EXPECT_EQ(b.tokens(), 21);
  data::Batch w;
  ASSERT_TRUE(b.next(w));
  EXPECT_TRUE(torch::equal(
      w.tgt_in,
      torch::tensor({100, 101, 102, 103, 107, 108, 109, 110, 114, 115, 116, 117}, torch::kLong).view({3, 4})));
  EXPECT_TRUE(torch::equal(w.tgt_out, w.tgt_in + 1)) << "targets are the next tokens";
  EXPECT_EQ(w.tgt_tokens, 12);
  ASSERT_TRUE(b.next(w));
  EXPECT_TRUE(torch::equal(w.tgt_in, torch::tensor({104, 105, 111, 112, 118, 119}, torch::kLong).view({3, 2})));
  EXPECT_TRUE(torch::equal(w.tgt_out.select(1, 1), torch::tensor({106, 113, 120}, torch::kLong)));
  EXPECT_FALSE(b.next(w)) << "the epoch ends";
  EXPECT_EQ(b.position(), (data::BatchPosition{2, 0}));
  b.restore({5, 1});
  ASSERT_TRUE(b.next(w));
  EXPECT_EQ(w.tgt_in.size(1), 2);

  EXPECT_FALSE(test::boundary_error<DataError>([&] { data::BpttBatches(ids, 12, 4, "data.valid"); }).empty())
      << "23 tokens in 12 rows leave one token each";

  const auto words = tokenizer::WordModel::train({"a b", "b"}, 1);
  EXPECT_EQ(data::encode_lm_text(*words, {"a b", "", "  ", "b"}), (std::vector<int32_t>{5, 4, 3, 4, 3}))
      << "<eos> after each line; empty lines skipped";
}

TEST(LanguageModel, IsCausalAndItsIncrementalStepMatchesTheFullPass) {
  model::Transformer m = tiny_lm(40);
  m->eval();
  EXPECT_EQ(m->decoder->size(), 0u);
  EXPECT_FALSE(m->src_embed);
  const torch::Tensor tokens = torch::randint(4, 40, {2, 9}, torch::kLong);  // [2, 9]
  const torch::Tensor full = m->project(m->lm_hidden(tokens));               // [2, 9, 40]
  // A later token never changes an earlier position's logits.
  torch::Tensor changed = tokens.clone();
  changed.index_put_({torch::indexing::Slice(), 6}, 5);
  const torch::Tensor other = m->project(m->lm_hidden(changed));
  EXPECT_TRUE(torch::allclose(full.narrow(1, 0, 6), other.narrow(1, 0, 6), 1e-6, 1e-6));
  EXPECT_FALSE(torch::allclose(full.narrow(1, 6, 1), other.narrow(1, 6, 1), 1e-6, 1e-6));
  // The cache gives what the full pass gives, position by position.
  model::DecoderCache cache = m->start_generation();
  for (int64_t t = 0; t < 9; ++t) {
    const torch::Tensor step = m->decode_step(tokens.select(1, t), cache);  // [2, 40]
    EXPECT_TRUE(torch::allclose(step, full.select(1, t), 1e-5, 1e-5)) << "position " << t;
  }
  // The tutorial's init: embedding and output within +-0.1, output bias 0.
  EXPECT_LE(m->tgt_embed->weight.abs().max().item<double>(), 0.1);
  EXPECT_LE(m->output->weight.abs().max().item<double>(), 0.1);
  EXPECT_EQ(m->output->bias.abs().max().item<double>(), 0.0);
}

TEST(LanguageModel, TextLossIsTheMeanNextTokenNll) {
  model::Transformer m = tiny_lm(30);
  std::vector<int32_t> ids;
  for (int i = 0; i < 41; ++i) ids.push_back(4 + (i * 7) % 26);
  // Two rows of 20, windows of 8: the nll of tokens 1..19 of each given 0..k of its window.
  const decode::TextLoss got = decode::text_loss(m, ids, 2, 8, torch::kCPU);
  torch::NoGradGuard no_grad;
  m->eval();
  const torch::Tensor rows = torch::tensor(std::vector<int64_t>(ids.begin(), ids.begin() + 40)).view({2, 20});
  double nll = 0;
  for (int64_t start = 0; start < 19; start += 8) {
    const int64_t len = std::min<int64_t>(8, 19 - start);
    const torch::Tensor logp = torch::log_softmax(m->project(m->lm_hidden(rows.narrow(1, start, len))), -1);
    nll -= logp.gather(-1, rows.narrow(1, start + 1, len).unsqueeze(-1)).sum().item<double>();
  }
  EXPECT_EQ(got.tokens, 38);
  EXPECT_NEAR(got.loss, nll / 38, 1e-6);
  EXPECT_NEAR(got.ppl, std::exp(nll / 38), 1e-4);
}

TEST(LanguageModel, GreedyGenerationFollowsTheFullPassAndSamplingTheSeed) {
  model::Transformer m = tiny_lm(30, 12);
  decode::GenerateOptions o;
  o.max_tokens = 20;  // past the context of 8: the cache restarts from the last 4 tokens
  o.temperature = 0;
  o.context = 8;
  const std::vector<int32_t> prompt = {5, 9, 11};
  const auto greedy = decode::generate(m, prompt, 3, o);
  ASSERT_EQ(greedy.size(), 20u);
  // Reference: the full pass over the window the model sees, no cache.
  torch::NoGradGuard no_grad;
  m->eval();
  std::vector<int32_t> window = prompt;
  for (size_t i = 0; i < greedy.size(); ++i) {
    const torch::Tensor ids = torch::tensor(std::vector<int64_t>(window.begin(), window.end())).unsqueeze(0);
    const int64_t next = m->project(m->lm_hidden(ids))[0][-1].argmax().item<int64_t>();
    ASSERT_EQ(greedy[i], next) << "token " << i;
    window.push_back(int32_t(next));
    if (window.size() > 8) window.erase(window.begin(), window.end() - 4);
  }
  o.temperature = 1.0;
  o.seed = 7;
  const auto a = decode::generate(m, prompt, 3, o);
  EXPECT_EQ(a, decode::generate(m, prompt, 3, o)) << "a seed gives one continuation";
  o.seed = 8;
  EXPECT_NE(a, decode::generate(m, prompt, 3, o));
  o.top_k = 1;
  EXPECT_EQ(decode::generate(m, prompt, 3, o), greedy) << "top-1 sampling is greedy";
  o.top_k = -1;
  EXPECT_FALSE(test::boundary_error<ConfigError>([&] { decode::generate(m, prompt, 3, o); }).empty());
}

TEST(LanguageModel, StepLrDecaysOncePerEpoch) {
  config::TrainConfig c;
  c.schedule = config::Schedule::step;
  c.lr = 5.0;
  c.decay_factor = 0.95;
  c.decay_steps = 0;
  c.warmup_steps = 0;
  const train::LrSchedule s(c, 200);
  EXPECT_DOUBLE_EQ(s.lr(1, 1), 5.0);
  EXPECT_DOUBLE_EQ(s.lr(2981, 1), 5.0);
  EXPECT_DOUBLE_EQ(s.lr(2982, 2), 4.75);
  EXPECT_NEAR(s.lr(9000, 3), 5.0 * 0.95 * 0.95, 1e-12);
}

TEST(LanguageModel, ConfigDefaultsAreTheTutorialsModel) {
  const config::Config lm = config::from_json(nlohmann::json{{"task", "lm"}});
  EXPECT_FALSE(lm.model.tie_output);
  EXPECT_EQ(lm.model.init, config::Init::uniform);
  const config::Config tied = config::from_json(nlohmann::json{{"task", "lm"}, {"model", {{"tie_output", true}}}});
  EXPECT_TRUE(tied.model.tie_output) << "a given setting stands";
  EXPECT_EQ(tied.model.init, config::Init::uniform);
  const config::Config mt = config::from_json(nlohmann::json::object());
  EXPECT_TRUE(mt.model.tie_output) << "translation keeps its defaults";
  EXPECT_EQ(mt.model.init, config::Init::xavier);
}

TEST(LanguageModel, ConfigRejectsTranslationOnlySettings) {
  config::Config c;
  c.tokenizer.type = config::SpmType::basic_english;
  EXPECT_NE(test::boundary_error<ConfigError>([&] { config::validate(c); }).find("task: lm"), std::string::npos);
  c.task = config::Task::lm;
  c.train.val_bleu = true;
  EXPECT_NE(test::boundary_error<ConfigError>([&] { config::validate(c); }).find("val_bleu"), std::string::npos);
  c.train.val_bleu = false;
  EXPECT_EQ(config::differences(config::Config{}, c),
            (std::vector<std::string>{"task: \"translation\" vs \"lm\"",
                                      "tokenizer.type: \"unigram\" vs \"basic_english\""}));
  c.train.bptt = 300;
  EXPECT_NE(test::boundary_error<ConfigError>([&] { config::validate(c); }).find("train.bptt"), std::string::npos);
}

TEST(LanguageModel, TrainsWithCheckpointsMetricsAndExactResume) {
  test::TempDir tmp;
  config::Config c = lm_setup(tmp);
  const train::TrainSummary whole = mtx::test::train_run(c, tmp / "one");
  EXPECT_EQ(whole.stop_reason, "max_epochs");
  for (const char* f : {"best.pt", "last.pt", "config.json", "metrics.jsonl", "curve.svg"}) {
    EXPECT_TRUE(fs::exists(tmp / "one" / f)) << f;
  }
  EXPECT_TRUE(std::isfinite(whole.test_loss));
  // The loss falls: the first training row against the best validation.
  std::ifstream in(tmp / "one" / "metrics.jsonl");
  std::string line;
  double first = -1;
  bool test_row = false;
  while (std::getline(in, line)) {
    const auto row = nlohmann::json::parse(line);
    if (row["type"] == "train" && first < 0) first = row["nll"].get<double>();
    test_row = test_row || row["type"] == "test";
  }
  EXPECT_TRUE(test_row);
  EXPECT_LT(whole.best_val_loss, first - 1.0) << "validation nll " << whole.best_val_loss << " vs first " << first;

  // One epoch, then resumed to two: the same weights as two in one run.
  c.train.max_epochs = 1;
  mtx::test::train_run(c, tmp / "two");
  c.train.max_epochs = 2;
  const auto resumed = mtx::test::train_run(c, tmp / "two", train::load_checkpoint(tmp / "two" / "last.pt"));
  EXPECT_EQ(resumed.steps, whole.steps);
  const auto a = train::load_checkpoint(tmp / "one" / "last.pt");
  const auto b = train::load_checkpoint(tmp / "two" / "last.pt");
  EXPECT_EQ(a.weights_sha256, b.weights_sha256);
  EXPECT_EQ(a.state.position, b.state.position);
  EXPECT_EQ(b.tokenizer->tgt().kind(), "basic_english");
  EXPECT_TRUE(b.model->options.decoder_only());
}
