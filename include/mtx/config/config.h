// Typed run settings (data, tokenizer, model, train, decode) read from JSON in one place,
// with `--set section.key=value` overrides, validated once before any work starts.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "mtx/util/device_choice.h"

namespace mtx::config {

enum class SpmType { unigram, bpe, basic_english };

enum class Optimizer { adam, adamw, sgd };
enum class Schedule { noam, inverse_sqrt, plateau, step, constant, cosine, linear };
enum class BestMetric { loss, bleu };
enum class Norm { post, pre };
enum class Positions { sinusoidal, learned, sinusoidal_halves, sinusoidal_marian };
enum class Activation { relu, gelu, swish, gelu_sigmoid };
enum class DecoderAutoreg { self_attention, ssru };
enum class Init { xavier, kaiming, uniform };
enum class Task { translation, lm };

struct DataConfig {
  std::string dir = "data/multi30k";  // holds <prefix>.<lang>.gz (or plain) for every split
  std::string src_lang = "de";        // source side; swap the two for en->de
  std::string tgt_lang = "en";        // target side
  // A multilingual model's language codes for this pair (NLLB's deu_Latn/eng_Latn, M2M100's de/en, mBART-50's
  // de_DE/en_XX): each training source starts with src_code's token and each target with tgt_code's, as the model
  // was trained (fine-tuning an imported model with mtx train --init). Empty for a model without languages.
  std::string src_code;
  std::string tgt_code;
  std::string train = "train";            // file prefix of the training split
  std::string valid = "val";              // file prefix of the validation split
  std::string test = "test_2016_flickr";  // file prefix of the test split
  std::string cache_dir = "data/cache";   // tokenizers and encoded corpora, keyed by content hash
  int filter_min_tokens = 1;              // drop training pairs with fewer whitespace tokens on a side
  int filter_max_tokens = 200;            // drop training pairs with more whitespace tokens on a side (0 = off)
  double filter_max_ratio = 0;            // drop training pairs whose token-count ratio exceeds this (0 = off)
};

struct TokenizerConfig {
  SpmType type = SpmType::unigram;     // unigram | bpe (sentencepiece) | basic_english (LM tutorial: words)
  int vocab_size = 8000;               // pieces per model (pad/unk/bos/eos and 256 byte pieces included)
  bool joint = true;                   // one model over source+target text; false: one per side
  double character_coverage = 1.0;     // share of characters covered by pieces; the rest fall back to bytes
  bool byte_fallback = true;           // unseen characters become byte pieces: decode(encode(x)) == x
  int64_t sample_sentences = 2000000;  // sentences per model drawn from the training split (reservoir, seeded; 0 = all)
  int64_t sample_mb = 48;              // at most this many MB (10^6 bytes) of sampled text per model (0 = no bound)
  int64_t sample_seed = 1;             // the sample's seed
  int input_sentence_size = 0;         // sentencepiece's own subsample of what it is given (0 = all of it)
  int train_threads = 1;               // sentencepiece training threads; the model depends on this count
  std::string model_dir;               // use the tokenizer saved in this directory instead of training one
  int min_freq = 1;                    // basic_english: words seen fewer times become <unk> (vocab_size unused)
};

struct ModelConfig {
  int d_model = 512;  // embedding and hidden width
  int heads = 8;      // attention heads; must divide d_model
  int encoder_layers = 6;
  int decoder_layers = 6;
  int ffn_dim = 2048;                           // inner width of the feed-forward blocks
  double dropout = 0.1;                         // on embeddings and every residual branch
  double attention_dropout = 0.0;               // on attention weights
  double activation_dropout = 0.0;              // after the feed-forward activation
  int max_len = 256;                            // longest subword sequence (longer ones are truncated)
  Norm norm = Norm::post;                       // post (Vaswani, PyTorch tutorial) | pre (Annotated Transformer)
  Positions positions = Positions::sinusoidal;  // sinusoidal (sin, cos interleaved) | learned | sinusoidal_halves
                                                // (the same waves, sines in the first half: Hugging Face's MarianMT)
                                                // | sinusoidal_marian (Marian's: sines first, wave i of d/2 at
                                                // 10000^(-i / (d/2 - 1)), computed in float)
  Activation activation = Activation::relu;     // relu | gelu (erf) | swish (x sigmoid(x)) | gelu_sigmoid
                                                // (x sigmoid(1.702 x), Marian's gelu)
  Init init = Init::xavier;                     // xavier | kaiming (uniform) | uniform (the LM tutorial: embedding and
                                                // output U(-0.1, 0.1), output bias 0, the other matrices xavier;
                                                // task lm's default)
  bool tie_output = true;        // output projection shares the target embedding (task lm's default: false)
  bool output_bias = false;      // a bias on the tied output projection (MarianMT's final_logits_bias); an untied
                                 // projection always has one
  bool share_embeddings = true;  // one source/target embedding when the vocabulary is joint
  double layer_norm_eps = 1e-5;  // every LayerNorm's epsilon (LibTorch's and Hugging Face's 1e-5; Marian's 1e-6)
  bool scale_embeddings = true;  // token embeddings times sqrt(d_model) (Vaswani; M2M100's and NLLB's
                                 // scale_embedding); false: as they are (mBART-50's)
  bool embedding_norm = false;   // a LayerNorm over embeddings plus positions, before dropout, in each stack
                                 // (mBART's layernorm_embedding)
  bool share_positions = true;   // one position table for both stacks; false: the decoder has its own (mBART's
                                 // learned tables)
  int position_offset = 0;       // position p reads row p + offset of the position table, which has max_len + offset
                                 // rows (fairseq's: M2M100's and NLLB's sinusoid count from pad id + 1, mBART's
                                 // learned table from row 2)
  // The decoder layers' autoregressive block: self_attention, or ssru (Marian's simpler simple recurrent unit,
  // the decoder of its student models: one state per layer and row instead of a growing cache).
  DecoderAutoreg decoder_autoreg = DecoderAutoreg::self_attention;
};

struct TrainConfig {
  DeviceChoice device = DeviceChoice::auto_;  // auto | cpu | cuda
  int threads = 0;                            // torch intra-op threads (0 = all cores)
  int64_t seed = 1;                           // model init, dropout and batch order
  int max_tokens = 4096;                      // token budget per batch, padding included (batch * longest side)
  int batch_size = 20;                        // task lm: columns the token stream is cut into (the tutorial's batchify)
  int bptt = 35;                              // task lm: tokens per training window (and the longest context)
  int eval_batch_size = 10;                   // task lm: columns of the validation and test streams
  int sort_window = 0;                        // examples read ahead, sorted by length and cut into batches (0 = all)
  int64_t max_steps = 0;                      // stop after this many updates (0 = no limit)
  int max_epochs = 20;                        // stop after this many epochs (0 = no limit)
  double max_minutes = 0;                     // stop after this much wall-clock time (0 = no limit)
  Optimizer optimizer = Optimizer::adam;      // adam | adamw | sgd
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.98;
  double adam_eps = 1e-9;
  double weight_decay = 0;
  Schedule schedule = Schedule::noam;  // noam | inverse_sqrt | plateau | step | constant | cosine | linear
                                       // (cosine, linear: warm up to lr, then decay to min_lr at the end of the
                                       // budget -- max_steps or max_minutes, whichever is reached first)
  double lr = 5e-4;                    // peak (inverse_sqrt, cosine, linear) or base (plateau/step/constant) rate
  double min_lr = 0;                   // cosine, linear: the learning rate the decay ends at
  double lr_factor = 1.0;              // Noam: lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
  double cooldown = 0;                 // any schedule: over the last `cooldown` share of the budget (max_steps or
                                       // max_minutes) the rate falls linearly to zero, whatever the budget buys
                                       // (0 = off; e.g. 0.2 = the last 12 minutes of an hour)
  int warmup_steps = 4000;             // linear warm-up updates
  double clip_norm = 1.0;              // clip the gradient's global L2 norm (0 = off)
  double label_smoothing = 0.1;
  double momentum = 0.9;        // sgd only
  double decay_factor = 0.5;    // plateau/step: multiply the learning rate by this at each decay
  int decay_steps = 10000;      // step: updates between decays (0 = at each epoch's end, as torch's StepLR
                                // stepped once per epoch in the LM tutorial)
  int plateau_patience = 0;     // plateau: validations without improvement before a decay
  int accum_steps = 1;          // batches per update (gradient accumulation)
  int validate_every = 0;       // also validate (and checkpoint) every N updates (0 = per epoch only)
  int log_every = 50;           // a metrics.jsonl row (and a log line off-terminal) every N updates
  int translate_every = 0;      // greedy-translate the validation set every N updates (0 = never); the
                                // output goes to translations/val-step-N.txt in the run directory
  int translate_log_lines = 3;  // how many of those translations to log next to their references
  BestMetric best_metric = BestMetric::loss;  // loss | bleu: what picks best.pt and drives early stopping
  bool val_bleu = false;                      // also report validation BLEU (always on when best_metric is bleu)
  int val_bleu_beam = 1;                      // beam for validation BLEU (1 = greedy)
  int average_last = 0;         // at the end, average the last K step-N.pt into avg.pt (0 = off; <= keep_last)
  bool average_choose = false;  // average_last > 1: avg.pt is the best on the validation set (best_metric) of
                                // the averages of the last 1, 2, .., average_last checkpoints
  int keep_last = 3;            // keep the last K step-<N>.pt checkpoints (0 = only last.pt/best.pt)
  int patience = 0;             // early stopping: validations without improvement (0 = off)
  int max_bad_steps = 10;       // stop after this many non-finite losses in a row
  bool bf16 = false;            // CUDA only: bf16 autocast for the forward pass
  // Several processes (torchrun's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, or mtx train --nproc N): each
  // update takes accum_steps batches per rank; docs/distributed.md.
  double dist_timeout_s = 300;  // rendezvous and every collective: a rank that died or hangs fails the
                                // others within this (rank 0's validations must fit in it)
  int dist_bucket_mb = 25;      // gradient bytes per collective (one per bucket, not per parameter)
  bool dist_ordered = true;     // sum the ranks' gradients in rank order (all-gather): weights bit-identical
                                // to one process with accum_steps x world size; false: ring all-reduce
};

// Decoding: the values of the options that decode_options() declares (one entry each, below); a new option is a
// field here with its default and an entry there.
struct DecodeConfig {
  int beam = 5;             // beam size (1 = greedy)
  double alpha = 0.6;       // GNMT length normalisation (0 = raw log-probability)
  double normalize = 0;     // > 0: score / length^normalize instead of GNMT's (Marian's --normalize)
  double word_penalty = 0;  // subtracted per token (EOS included) before the length normalisation (Marian's)
  double max_len_a = 1.2;   // output limit: a * source_length + b
  int max_len_b = 10;
  int batch_tokens = 4096;       // source tokens per decoding batch
  int nbest = 1;                 // hypotheses written per input line (<= beam; samples when sampling)
  int min_len = 0;               // tokens generated before EOS may be chosen (the length limit wins)
  bool exact_stop = false;       // end a sentence's search only when no live hypothesis can still win
                                 // (false: once `beam` hypotheses finished, as fairseq and CTranslate2 do)
  bool shrink_beam = false;      // each hypothesis that ends takes its place in the beam with it, and the search
                                 // goes on until every one ended (Marian's); exact_stop then changes nothing
  double max_length_factor = 0;  // > 0: Marian's limit, factor x source tokens (EOS included), rounded up,
                                 // instead of max_len_a/b; hypotheses open there end without EOS
  bool allow_unk = true;         // false: <unk> is never generated (Marian's default, kept by models imported from it)
  int max_input_length = 0;      // source tokens kept (0: as many as the model takes); longer sources are cut
  int sampling_topk = 1;         // 1: no sampling (search); 0: sample from the whole vocabulary; K: the K best
  double sampling_topp = 1.0;    // nucleus: the fewest best tokens whose probability reaches P (1: all)
  double sampling_temperature = 1.0;
  int64_t sampling_seed = 0;          // each sentence samples from its own stream, seeded by this and the sentence
  double repetition_penalty = 1.0;    // > 1: tokens already generated become less likely (CTRL's, as transformers)
  int no_repeat_ngram_size = 0;       // N > 0: no N-gram occurs twice in a hypothesis
  std::vector<std::string> suppress;  // target phrases never generated (negative constraints)
};

// One decoding option, declared once: its key in a config's `decode` section and in a server request, its
// command-line flag, the field it sets (one of the five pointers: its type), range, help and whether a request may
// set it. The config reader, the flags of mtx translate/eval/serve, the server's request fields, the Python keywords
// and the docs' tables all walk this table. A `phrases` option is a list of target phrases: a JSON array of strings
// in a config, a request and Python, and on the command line a file of one phrase a line.
struct DecodeOption {
  const char* key = nullptr;    // "beam": decode.beam in a config, "beam" in a request body
  const char* flags = nullptr;  // CLI11's names: "--beam", or for a switch "--exact-stop{true},--first-k-stop{false}"
  int DecodeConfig::*integer = nullptr;  // the field, by type
  int64_t DecodeConfig::*integer64 = nullptr;
  double DecodeConfig::*number = nullptr;
  bool DecodeConfig::*boolean = nullptr;
  std::vector<std::string> DecodeConfig::*phrases = nullptr;
  double min = 0, max = 0;  // inclusive; numbers: min_open excludes min
  bool min_open = false;
  const char* help = "";
  bool request = false;  // a server request may set it ("key": value)
  // The value as JSON text ("5", "0.6", "true", "[\"dog\"]") and as a double (booleans 0/1; phrases: their count).
  std::string text(const DecodeConfig& c) const;
  double value(const DecodeConfig& c) const;
  // Sets an integer option; ConfigError "<name>: N is out of range" where the field is an int and N is not.
  void set_integer(DecodeConfig& c, int64_t v, const std::string& name) const;
};
const std::vector<DecodeOption>& decode_options();
// After options are set over a decode section (flags, a request, keywords): unless nbest was given, as many
// hypotheses as the beam has where the beam is below the section's nbest (sampling aside).
void fit_nbest_to_beam(DecodeConfig& d, bool nbest_given);
// Each option's range, then the rules between options (nbest within the beam, sampling with beam 1, ...).
// Throws ConfigError naming the option as "decode.KEY (--FLAG)", or as "\"KEY\"" (a request's field) when
// `as_fields`.
void validate(const DecodeConfig& decode, bool as_fields = false);
bool operator==(const DecodeConfig& a, const DecodeConfig& b);
inline bool operator!=(const DecodeConfig& a, const DecodeConfig& b) { return !(a == b); }
// Sampling is on: sampling_topk other than 1 (CTranslate2's rule).
inline bool sampling(const DecodeConfig& d) { return d.sampling_topk != 1; }

struct Config {
  Task task = Task::translation;  // translation | lm (decoder-only language model over one text stream; its
                                  // data.train/valid/test name text files in data.dir, plain or .gz)
  DataConfig data;
  TokenizerConfig tokenizer;
  ModelConfig model;
  TrainConfig train;
  DecodeConfig decode;
};

// Reads `file` (JSON, // comments allowed), applies `overrides` ("section.key=value"), fills defaults
// and validates. Throws ConfigError with a one-line message naming the file, key or value.
Config load(const std::filesystem::path& file, const std::vector<std::string>& overrides = {});
// Same from an already parsed document (validated).
Config from_json(const nlohmann::json& document);
// Every setting, defaults included: the "resolved" config.
nlohmann::json to_json(const Config& config);
// Range and consistency checks; throws ConfigError naming the key.
void validate(const Config& config);
// Applies one "section.key=value" to a document; value is JSON (3, 0.1, true, "x") or a bare string.
void apply_override(nlohmann::json& document, const std::string& assignment);
// Settings that differ between two configs, as "section.key: A vs B", in key order.
std::vector<std::string> differences(const Config& a, const Config& b);
// Writes to_json(config) to `path` atomically, pretty-printed.
void write_resolved(const Config& config, const std::filesystem::path& path);

std::string to_string(SpmType v);
std::string to_string(DeviceChoice v);
std::string to_string(Optimizer v);
std::string to_string(Schedule v);
std::string to_string(BestMetric v);
std::string to_string(Norm v);
std::string to_string(Positions v);
std::string to_string(Activation v);
std::string to_string(DecoderAutoreg v);
std::string to_string(Init v);
std::string to_string(Task v);

}  // namespace mtx::config
