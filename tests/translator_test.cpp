#include "mtx/decode/translator.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>

#include <map>
#include <sstream>
#include <thread>

#include "mtx/data/prepare.h"
#include "mtx/decode/stream.h"
#include "mtx/model/fp32_gemm.h"
#include "mtx/train/checkpoint.h"
#include "mtx/util/errors.h"
#include "test_utils.h"

using namespace mtx;

namespace {

// A tokenizer trained on the toy corpus and a small random model: its outputs are arbitrary but
// deterministic, which is all these properties need.
struct Toy {
  test::TempDir tmp;
  config::Config config;
  std::optional<tokenizer::Tokenizer> tok;
  model::Transformer model{nullptr};

  // ssru: the decoder's layers have Marian's SSRU in place of self-attention (model.decoder_autoreg).
  explicit Toy(bool ssru = false) {
    config = test::toy_setup(tmp);
    config.model.dropout = 0.1;  // must not matter: translation runs in eval mode
    if (ssru) config.model.decoder_autoreg = config::DecoderAutoreg::ssru;
    tok = data::prepare_data(config).tokenizer;
    torch::manual_seed(11);
    model = train::build_model(config, *tok);
  }

  decode::Translator translator(int beam, int batch_tokens = 4096, int nbest = 1, int workers = 1) {
    decode::TranslateOptions o;
    o.search.beam = beam;
    o.search.nbest = nbest;
    o.search.batch_tokens = batch_tokens;
    o.workers = workers;
    return decode::Translator(model, *tok, o);
  }
};

const std::vector<std::string> kLines = {"ein Hund läuft", "zwei Männer spielen Fußball im Park heute", "Kinder",
                                         "eine Frau liest ein Buch", "ein Mann fährt Fahrrad und ein Hund läuft"};

// Plain greedy decoding by re-running the whole decoder each step (no cache, no search component).
std::vector<int32_t> naive_greedy(model::Transformer& m, const std::vector<int32_t>& src_ids, int64_t max_len,
                                  const tokenizer::SpecialIds& ids) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> src(src_ids.begin(), src_ids.end());
  src.push_back(ids.eos);
  const torch::Tensor s = torch::tensor(src, torch::kLong).unsqueeze(0);
  std::vector<int64_t> tgt = {ids.bos};
  std::vector<int32_t> out;
  for (int64_t t = 0; t < max_len; ++t) {
    torch::Tensor logits = m->forward(s, torch::tensor(tgt, torch::kLong).unsqueeze(0))[0][-1];  // [V]
    logits[ids.bos] = -INFINITY;  // never generated, as in the search
    logits[ids.pad] = -INFINITY;
    int64_t next = logits.argmax().item<int64_t>();
    if (t + 1 >= max_len) next = ids.eos;
    if (next == ids.eos) break;
    out.push_back(int32_t(next));
    tgt.push_back(next);
  }
  return out;
}

}  // namespace

// The translation options are the config section's (one struct): every option of the table reaches them.
TEST(Translator, EveryDecodeSettingReachesTheOptions) {
  EXPECT_TRUE(decode::options_from_config(config::DecodeConfig{}).search == config::DecodeConfig{});
  for (const auto& o : config::decode_options()) {
    config::DecodeConfig d;
    if (o.boolean) d.*o.boolean = !(d.*o.boolean);
    if (o.integer) d.*o.integer += 1;
    if (o.integer64) d.*o.integer64 += 1;
    if (o.number) {
      const double mid = o.max < 1e300 ? o.min + (o.max - o.min) / 2 : d.*o.number + 0.5;
      d.*o.number = mid != d.*o.number ? mid : o.max;  // a range centred on the default: its top
    }
    if (o.phrases) d.*o.phrases = {"dog"};
    ASSERT_FALSE(d == config::DecodeConfig{}) << o.key;
    EXPECT_TRUE(decode::options_from_config(d).search == d) << o.key;
  }
}

// The incremental decoder (a self-attention cache, or an SSRU's state) against the whole decoder rerun each step.
TEST(Translator, GreedyIsBeamOneAndMatchesNaiveDecoding) {
  for (const bool ssru : {false, true}) {
    Toy toy(ssru);
    auto tr = toy.translator(1);
    toy.model->eval();
    for (const auto& line : kLines) {
      const auto src = toy.tok->src().encode(line);
      const auto hyps = tr.translate_ids({src});
      const int64_t limit = int64_t(std::floor(1.2 * double(src.size()) + 10));
      EXPECT_EQ(hyps[0][0].tokens, naive_greedy(toy.model, src, limit, toy.tok->special_ids()))
          << (ssru ? "SSRU: " : "") << line;
    }
  }
}

TEST(Translator, OutputDoesNotDependOnTheBatch) {
  for (const bool ssru : {false, true}) {
    Toy toy(ssru);
    for (const int beam : {1, 5}) {
      auto together = toy.translator(beam).translate(kLines);
      auto tiny_batches = toy.translator(beam, 12).translate(kLines);  // a sentence or two per batch
      ASSERT_EQ(together.size(), kLines.size());
      for (size_t i = 0; i < kLines.size(); ++i) {
        const auto alone = toy.translator(beam).translate({kLines[i]});
        ASSERT_EQ(alone[0].hypotheses.size(), 1u);
        EXPECT_EQ(together[i].hypotheses[0].tokens, alone[0].hypotheses[0].tokens)
            << "beam " << beam << ": " << kLines[i];
        EXPECT_NEAR(together[i].hypotheses[0].score, alone[0].hypotheses[0].score, 1e-4);
        EXPECT_EQ(tiny_batches[i].hypotheses[0].tokens, alone[0].hypotheses[0].tokens);
        EXPECT_EQ(together[i].texts[0], alone[0].texts[0]) << "outputs come back in input order";
      }
    }
  }
}

// Continuous batching (the server's): sentences admitted into a running search -- after different steps, several at
// once, a repeat, and one after all others ended -- get exactly the translations and scores they get alone, for
// beam 1 and 5, in float and int8.
TEST(Translator, SentencesJoiningARunningSearchTranslateExactlyAsAlone) {
  if (!model::fp32::PackedLinear::available()) GTEST_SKIP() << "mtx's float kernel (row-independent Linear) needs AVX2";
  for (const bool ssru : {false, true}) {  // an SSRU decoder: a row that joins starts from a zero state
    Toy toy(ssru);
    std::vector<std::vector<int32_t>> sources;
    for (const auto& line : kLines) sources.push_back(toy.tok->src().encode(line));
    // Admitted after call n of admit (n counts from 1): sentence indices into kLines.
    const std::map<int, std::vector<size_t>> plan = {{1, {1, 2}}, {3, {3}}, {4, {1}}};
    const std::vector<size_t> order = {0, 1, 2, 3, 1, 4};  // kLines index of each admitted sentence, 4 admitted last
    for (const bool int8 : {false, true}) {
      if (int8) {
        toy.model->eval();
        toy.model->quantize_int8(true);
      }
      for (const int beam : {1, 5}) {
        auto tr = toy.translator(beam);
        int calls = 0;
        bool last = false;
        std::vector<int64_t> told;
        const auto all = tr.translate_continuously(
            {sources[0]},
            [&](int64_t searching) {
              ++calls;
              std::vector<std::vector<int32_t>> admitted;
              const auto it = plan.find(calls);
              if (it != plan.end()) {
                for (const size_t i : it->second) admitted.push_back(sources[i]);
              } else if (searching == 0 && !last && calls > 4) {
                last = true;
                admitted.push_back(sources[4]);
              }
              return admitted;
            },
            [&](int64_t i, const std::vector<decode::Hypothesis>&) { told.push_back(i); });
        ASSERT_EQ(all.size(), order.size()) << "beam " << beam;
        EXPECT_EQ(told.size(), order.size());
        for (size_t j = 0; j < order.size(); ++j) {
          const auto alone = tr.translate_ids({sources[order[j]]});
          const std::string where = (ssru ? "SSRU " : "") + std::string(int8 ? "int8" : "float") + " beam " +
                                    std::to_string(beam) + ": admitted sentence " + std::to_string(j);
          ASSERT_EQ(all[j].size(), 1u) << where;
          EXPECT_EQ(all[j][0].tokens, alone[0][0].tokens) << where;
          EXPECT_EQ(all[j][0].score, alone[0][0].score) << where;
        }
      }
    }
  }
}

// Several searches at once (one thread each, every batch dealt out among them) give what one search gives,
// in input order, with as many or more workers than threads or sentences, or one per thread (0, the default).
TEST(Translator, SearchesAtOnceGiveTheSameTranslations) {
  Toy toy;
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  for (const int beam : {1, 4}) {
    const int nbest = std::min(beam, 2);
    const auto one = toy.translator(beam, 4096, nbest).translate(kLines);
    for (const int workers : {0, 2, 3, 64}) {  // 0: one per thread
      for (const int batch_tokens : {4096, 20}) {
        const auto many = toy.translator(beam, batch_tokens, nbest, workers).translate(kLines);
        ASSERT_EQ(many.size(), one.size());
        for (size_t i = 0; i < kLines.size(); ++i) {
          ASSERT_EQ(many[i].hypotheses.size(), one[i].hypotheses.size()) << kLines[i];
          for (size_t h = 0; h < one[i].hypotheses.size(); ++h) {
            EXPECT_EQ(many[i].hypotheses[h].tokens, one[i].hypotheses[h].tokens)
                << "beam " << beam << ", " << workers << " workers, batch " << batch_tokens << ": " << kLines[i];
            EXPECT_NEAR(many[i].hypotheses[h].score, one[i].hypotheses[h].score, 1e-4);
          }
          EXPECT_EQ(many[i].texts, one[i].texts);
        }
      }
    }
  }
  decode::TranslateOptions bad;
  bad.workers = -1;
  EXPECT_THROW(decode::validate(bad), mtx::ConfigError);
  at::set_num_threads(threads);
}

// Every n-best entry is a distinct hypothesis, the list is sorted, and each score is what the model gives
// that output by teacher forcing (log-probability over the length penalty), not a search artefact.
TEST(Translator, NbestGivesSortedDistinctHypothesesWithTheirTrueScores) {
  Toy toy;
  const double alpha = 0.6;
  const int n = 5;
  auto tr = toy.translator(8, 4096, n);
  const auto out = tr.translate({kLines[1]});
  ASSERT_EQ(out[0].hypotheses.size(), size_t(n));
  ASSERT_EQ(out[0].texts.size(), size_t(n));
  const auto ids = toy.tok->special_ids();
  std::vector<int64_t> src;
  for (const int32_t t : toy.tok->src().encode(kLines[1])) src.push_back(t);
  src.push_back(ids.eos);
  toy.model->eval();
  torch::NoGradGuard no_grad;
  for (int i = 0; i < n; ++i) {
    const auto& h = out[0].hypotheses[size_t(i)];
    if (i > 0) {
      EXPECT_GE(out[0].hypotheses[size_t(i - 1)].score, h.score) << "sorted, entry " << i;
    }
    for (int j = 0; j < i; ++j) EXPECT_NE(out[0].hypotheses[size_t(j)].tokens, h.tokens) << j << " and " << i;
    std::vector<int64_t> in = {ids.bos}, want;
    for (const int32_t t : h.tokens) {
      in.push_back(t);
      want.push_back(t);
    }
    want.push_back(ids.eos);
    const torch::Tensor logits = toy.model->forward(torch::tensor(src).unsqueeze(0), torch::tensor(in).unsqueeze(0));
    const torch::Tensor logp = logits[0].log_softmax(-1).gather(1, torch::tensor(want).unsqueeze(1));  // [len, 1]
    const double log_prob = logp.sum().item<double>();
    EXPECT_NEAR(h.log_prob, log_prob, 1e-3) << "entry " << i;
    EXPECT_NEAR(h.score, log_prob / decode::length_penalty(int64_t(want.size()), alpha), 1e-3) << "entry " << i;
  }
}

TEST(TranslateStream, OneLineOutPerLineInWhateverTheInput) {
  Toy toy;
  auto tr = toy.translator(2);
  std::string overlong;
  for (int i = 0; i < 100; ++i) overlong += "ein Hund läuft ";  // ~300 tokens; the model allows 63
  const std::string input = kLines[0] + "\n\n" + "bad \xff\xfe line\n" + overlong + "\n" + kLines[3];  // no final \n
  std::istringstream in(input);
  std::ostringstream out;
  auto source = decode::istream_line_source(in);
  decode::StreamOptions so;
  so.chunk_lines = 2;  // several chunks
  const auto stats = decode::translate_stream(tr, *source, out, so);
  std::vector<std::string> lines;
  std::istringstream read(out.str());
  for (std::string l; std::getline(read, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 5u) << out.str();
  EXPECT_EQ(stats.lines, 5);
  EXPECT_EQ(stats.invalid_utf8, 1);
  EXPECT_EQ(stats.truncated, 1);
  EXPECT_EQ(stats.translated, 3);
  EXPECT_EQ(lines[1], "") << "empty in, empty out";
  EXPECT_EQ(lines[2], "") << "invalid UTF-8: empty out";
  EXPECT_EQ(lines[0], tr.translate({kLines[0]})[0].texts[0]);
  EXPECT_EQ(lines[4], tr.translate({kLines[3]})[0].texts[0]);
}

TEST(TranslateStream, NbestFormatIsParseable) {
  Toy toy;
  auto tr = toy.translator(4, 4096, 2);
  std::istringstream in(kLines[0] + "\n\n" + kLines[2] + "\n");
  std::ostringstream out;
  auto source = decode::istream_line_source(in);
  decode::StreamOptions so;
  so.nbest_format = true;
  decode::translate_stream(tr, *source, out, so);
  std::istringstream read(out.str());
  std::vector<int> indices;
  for (std::string l; std::getline(read, l);) {
    const size_t a = l.find(" ||| "), b = l.rfind(" ||| ");
    ASSERT_NE(a, std::string::npos) << l;
    ASSERT_NE(a, b) << l;
    indices.push_back(std::stoi(l.substr(0, a)));
    EXPECT_NO_THROW(std::stod(l.substr(b + 5))) << l;
  }
  EXPECT_EQ(indices, (std::vector<int>{0, 0, 1, 2, 2})) << "two per line; one empty entry for the empty line";
}

// Defect 7 of issue #12: search never yields pad or BOS, even from a model that prefers them.
TEST(Translator, NeverGeneratesPadOrBos) {
  Toy toy;
  toy.config.model.tie_output = false;
  toy.model = train::build_model(toy.config, *toy.tok);
  const auto ids = toy.tok->special_ids();
  {
    torch::NoGradGuard g;
    auto bias = toy.model->named_parameters()["output.bias"];
    bias[ids.pad].fill_(50);
    bias[ids.bos].fill_(49);
  }
  for (const int beam : {1, 4}) {
    const auto hyps = toy.translator(beam).translate_ids({toy.tok->src().encode(kLines[0])});
    ASSERT_FALSE(hyps[0].empty());
    EXPECT_FALSE(hyps[0][0].tokens.empty());
    for (const int32_t t : hyps[0][0].tokens) {
      EXPECT_NE(t, ids.pad) << "beam " << beam;
      EXPECT_NE(t, ids.bos) << "beam " << beam;
    }
  }
}

// Defect 6 of issue #12: input that never ends a line is read in bounded memory: an over-long line is
// cut to its first kMaxLineBytes (at a character boundary) and the next line is read as usual.
TEST(TranslateStream, AnEndlessLineIsCutNotBuffered) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::thread writer([fd = fds[1]] {
    const std::string block(1 << 16, 'a');
    std::string big;
    for (int i = 0; i < 48; ++i) big += block;  // 3 MiB without a newline
    big += "\xc3\xa4 tail\nnext line\nlast";
    for (size_t off = 0; off < big.size();) {
      const ssize_t n = ::write(fd, big.data() + off, big.size() - off);
      if (n <= 0) break;
      off += size_t(n);
    }
    ::close(fd);
  });
  auto in = decode::fd_line_source(fds[0]);
  std::string line;
  ASSERT_TRUE(in->next(line));
  EXPECT_LE(line.size(), size_t(1) << 20) << "the over-long line was buffered whole";
  EXPECT_GT(line.size(), size_t(1) << 19);
  ASSERT_TRUE(in->next(line));
  EXPECT_EQ(line, "next line");
  ASSERT_TRUE(in->next(line));
  EXPECT_EQ(line, "last");
  EXPECT_FALSE(in->next(line));
  writer.join();
  ::close(fds[0]);
}

namespace {

// An ensemble of two toy models (either with an SSRU decoder) against its rule and its models alone.
void expect_ensemble_of(bool first_ssru, bool second_ssru) {
  Toy toy(first_ssru);
  config::Config second = toy.config;
  second.model.decoder_autoreg = second_ssru ? config::DecoderAutoreg::ssru : config::DecoderAutoreg::self_attention;
  torch::manual_seed(12);
  model::Transformer other = train::build_model(second, *toy.tok);
  decode::TranslateOptions o;
  o.search.beam = 6;
  o.search.nbest = 4;
  o.workers = 1;
  decode::Translator ensemble(std::vector<model::Transformer>{toy.model, other}, *toy.tok, o);
  const auto ids = toy.tok->special_ids();
  torch::NoGradGuard no_grad;
  int differ_a = 0, differ_b = 0;
  for (const auto& line : kLines) {
    const auto out = ensemble.translate({line});
    ASSERT_EQ(out[0].hypotheses.size(), size_t(o.search.nbest)) << line;
    std::vector<int64_t> src;
    for (const int32_t t : toy.tok->src().encode(line)) src.push_back(t);
    src.push_back(ids.eos);
    for (const auto& h : out[0].hypotheses) {
      std::vector<int64_t> in = {ids.bos}, want;
      for (const int32_t t : h.tokens) {
        in.push_back(t);
        want.push_back(t);
      }
      want.push_back(ids.eos);
      const torch::Tensor s = torch::tensor(src).unsqueeze(0), t = torch::tensor(in).unsqueeze(0);
      const torch::Tensor mean =
          (toy.model->forward(s, t)[0].log_softmax(-1) + other->forward(s, t)[0].log_softmax(-1)) / 2;
      const torch::Tensor logp = mean.log_softmax(-1).gather(1, torch::tensor(want).unsqueeze(1));  // [len, 1]
      EXPECT_NEAR(h.log_prob, logp.sum().item<double>(), 1e-3) << line;
    }
    const auto best = out[0].hypotheses[0].tokens;
    differ_a += toy.translator(6).translate({line})[0].hypotheses[0].tokens != best;
    differ_b += decode::Translator(other, *toy.tok, o).translate({line})[0].hypotheses[0].tokens != best;
  }
  EXPECT_GT(differ_a, 0) << "the ensemble translated every line as its first model alone";
  EXPECT_GT(differ_b, 0) << "the ensemble translated every line as its second model alone";
  // The models must agree on the vocabulary.
  model::TransformerOptions wider = other->options;
  wider.tgt_vocab(other->options.tgt_vocab() + 1).share_embeddings(false);
  EXPECT_THROW(decode::Translator(std::vector<model::Transformer>{toy.model, model::Transformer(wider)}, *toy.tok, o),
               ConfigError);
}

}  // namespace

// An ensemble scores each next token by the mean of its models' log-probabilities (renormalised): every
// n-best hypothesis's log-probability is that rule applied to the models' teacher-forced outputs, and the
// ensemble translates unlike either model alone. Its models may have SSRU decoders, and an SSRU student may join a
// transformer: each keeps its own state.
TEST(Translator, EnsembleScoresTheMeanOfItsModelsLogProbabilities) {
  for (const auto& [first_ssru, second_ssru] :
       std::vector<std::pair<bool, bool>>{{false, false}, {true, true}, {false, true}}) {
    SCOPED_TRACE(std::string(first_ssru ? "SSRU" : "self-attention") + " + " +
                 (second_ssru ? "SSRU" : "self-attention"));
    expect_ensemble_of(first_ssru, second_ssru);
  }
}

// Every decoding control keeps a translation what it is alone: alone, among the others in one batch, in small
// batches over two searches, with int8 weights and in an ensemble -- each control alone and all together.
// Prefixes stay at the start of their outputs, constraints are in them; samples are their sentence's own.
TEST(Translator, EveryControlTranslatesTheSameAloneAndInAnyBatch) {
  Toy toy;
  model::Transformer other = train::build_model(toy.config, *toy.tok);
  const std::vector<std::string> lines = kLines;
  const std::vector<std::string> prefixes = {"a dog", "", "the", "", "two"};
  const std::vector<std::vector<std::string>> terms = {{"dog"}, {}, {"a man", "red"}, {"street"}, {}};
  struct Control {
    std::string name;
    std::function<void(decode::SearchOptions&)> set;
    bool prefix = false;
    bool constraints = false;
  };
  const std::vector<Control> controls = {
      {"prefix", [](decode::SearchOptions&) {}, true},
      {"sampling",
       [](decode::SearchOptions& o) {
         o.beam = 1;
         o.nbest = 2;
         o.sampling_topk = 20;
         o.sampling_topp = 0.9;
         o.sampling_temperature = 1.3;
         o.sampling_seed = 7;
       }},
      {"min length", [](decode::SearchOptions& o) { o.min_len = 4; }},
      {"repetition penalty", [](decode::SearchOptions& o) { o.repetition_penalty = 1.4; }},
      {"no repeat 2-grams", [](decode::SearchOptions& o) { o.no_repeat_ngram_size = 2; }},
      {"max input length", [](decode::SearchOptions& o) { o.max_input_length = 3; }},
      {"all",
       [](decode::SearchOptions& o) {
         o.beam = 1;
         o.sampling_topk = 0;
         o.sampling_seed = 3;
         o.repetition_penalty = 1.2;
         o.no_repeat_ngram_size = 3;
         o.max_input_length = 4;
       },
       true},
      {"constraints", [](decode::SearchOptions&) {}, false, true},
      {"greedy constraints", [](decode::SearchOptions& o) { o.beam = 1; }, false, true},
      {"all with beam search",
       [](decode::SearchOptions& o) {
         o.min_len = 2;
         o.repetition_penalty = 1.2;
         o.no_repeat_ngram_size = 3;
         o.nbest = 2;
       },
       true, true},
  };
  const auto texts = [](const std::vector<decode::Translation>& ts) {
    std::vector<std::vector<std::string>> out;
    for (const auto& t : ts) out.push_back(t.texts);
    return out;
  };
  for (const bool int8 : {false, true}) {
    if (int8) {
      toy.model->eval();
      toy.model->quantize_int8(true);
    }
    for (const bool ensemble : {false, true}) {
      if (ensemble && int8) continue;
      for (const Control& c : controls) {
        decode::TranslateOptions o;
        o.search.beam = 3;
        c.set(o.search);
        o.workers = 1;
        const std::vector<model::Transformer> models =
            ensemble ? std::vector<model::Transformer>{toy.model, other} : std::vector<model::Transformer>{toy.model};
        std::vector<decode::LineControls> pre;
        for (size_t i = 0; (c.prefix || c.constraints) && i < lines.size(); ++i) {
          pre.push_back({c.prefix ? prefixes[i] : "", c.constraints ? terms[i] : std::vector<std::string>{}});
        }
        decode::Translator together(models, *toy.tok, o);
        const auto all = texts(together.translate(lines, pre));
        o.search.batch_tokens = 12;
        o.workers = 2;
        decode::Translator split(models, *toy.tok, o);
        const std::string where = c.name + (int8 ? " int8" : "") + (ensemble ? " ensemble" : "");
        EXPECT_EQ(texts(split.translate(lines, pre)), all) << where << ": small batches, two searches";
        for (size_t i = 0; i < lines.size(); ++i) {
          const auto one =
              texts(together.translate({lines[i]}, pre.empty() ? std::vector<decode::LineControls>{}
                                                               : std::vector<decode::LineControls>{pre[i]}));
          EXPECT_EQ(one[0], all[i]) << where << ": line " << i << " alone";
          if (c.prefix && !prefixes[i].empty()) {
            for (const auto& t : all[i]) EXPECT_EQ(t.rfind(prefixes[i], 0), 0u) << where << ": '" << t << "'";
          }
          for (size_t j = 0; c.constraints && j < terms[i].size(); ++j) {  // the best one holds them
            EXPECT_NE(all[i][0].find(terms[i][j]), std::string::npos) << where << ": '" << all[i][0] << "'";
          }
        }
        if (c.name == "sampling") {
          for (const auto& t : all) EXPECT_EQ(t.size(), 2u) << "nbest 2: two samples";
        }
      }
    }
  }
}
