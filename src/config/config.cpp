#include "mtx/config/config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "mtx/util/atomic_file.h"
#include "mtx/util/errors.h"
#include "mtx/util/strings.h"
#include "mtx/util/utf8.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtx::config {
namespace {

// ---- enum names ------------------------------------------------------------------------------
template <class E>
struct EnumNames;
template <>
struct EnumNames<SpmType> {
  static constexpr std::pair<SpmType, const char*> list[] = {
      {SpmType::unigram, "unigram"}, {SpmType::bpe, "bpe"}, {SpmType::basic_english, "basic_english"}};
};
template <>
struct EnumNames<DeviceChoice> {
  static constexpr std::pair<DeviceChoice, const char*> list[] = {
      {DeviceChoice::auto_, "auto"}, {DeviceChoice::cpu, "cpu"}, {DeviceChoice::cuda, "cuda"}};
};
template <>
struct EnumNames<Optimizer> {
  static constexpr std::pair<Optimizer, const char*> list[] = {
      {Optimizer::adam, "adam"}, {Optimizer::adamw, "adamw"}, {Optimizer::sgd, "sgd"}};
};
template <>
struct EnumNames<Schedule> {
  static constexpr std::pair<Schedule, const char*> list[] = {
      {Schedule::noam, "noam"},    {Schedule::inverse_sqrt, "inverse_sqrt"}, {Schedule::plateau, "plateau"},
      {Schedule::step, "step"},    {Schedule::constant, "constant"},         {Schedule::cosine, "cosine"},
      {Schedule::linear, "linear"}};
};

template <>
struct EnumNames<BestMetric> {
  static constexpr std::pair<BestMetric, const char*> list[] = {{BestMetric::loss, "loss"}, {BestMetric::bleu, "bleu"}};
};
template <>
struct EnumNames<Norm> {
  static constexpr std::pair<Norm, const char*> list[] = {{Norm::post, "post"}, {Norm::pre, "pre"}};
};
template <>
struct EnumNames<Positions> {
  static constexpr std::pair<Positions, const char*> list[] = {{Positions::sinusoidal, "sinusoidal"},
                                                               {Positions::learned, "learned"},
                                                               {Positions::sinusoidal_halves, "sinusoidal_halves"},
                                                               {Positions::sinusoidal_marian, "sinusoidal_marian"}};
};
template <>
struct EnumNames<DecoderAutoreg> {
  static constexpr std::pair<DecoderAutoreg, const char*> list[] = {{DecoderAutoreg::self_attention, "self_attention"},
                                                                    {DecoderAutoreg::ssru, "ssru"}};
};
template <>
struct EnumNames<Activation> {
  static constexpr std::pair<Activation, const char*> list[] = {{Activation::relu, "relu"},
                                                                {Activation::gelu, "gelu"},
                                                                {Activation::swish, "swish"},
                                                                {Activation::gelu_sigmoid, "gelu_sigmoid"}};
};
template <>
struct EnumNames<Init> {
  static constexpr std::pair<Init, const char*> list[] = {
      {Init::xavier, "xavier"}, {Init::kaiming, "kaiming"}, {Init::uniform, "uniform"}};
};
template <>
struct EnumNames<Task> {
  static constexpr std::pair<Task, const char*> list[] = {{Task::translation, "translation"}, {Task::lm, "lm"}};
};

template <class E>
std::string enum_name(E v) {
  for (const auto& [value, name] : EnumNames<E>::list) {
    if (value == v) return name;
  }
  return "?";
}

template <class E>
std::vector<std::string> enum_choices() {
  std::vector<std::string> out;
  for (const auto& entry : EnumNames<E>::list) out.emplace_back(entry.second);
  return out;
}

// ---- the field list of every section: the single place that names the keys --------------------
template <class V>
void visit(DataConfig& c, V&& v) {
  v("dir", c.dir);
  v("src_lang", c.src_lang);
  v("tgt_lang", c.tgt_lang);
  v("src_code", c.src_code);
  v("tgt_code", c.tgt_code);
  v("train", c.train);
  v("valid", c.valid);
  v("test", c.test);
  v("cache_dir", c.cache_dir);
  v("filter_min_tokens", c.filter_min_tokens);
  v("filter_max_tokens", c.filter_max_tokens);
  v("filter_max_ratio", c.filter_max_ratio);
}

template <class V>
void visit(TokenizerConfig& c, V&& v) {
  v("type", c.type);
  v("vocab_size", c.vocab_size);
  v("joint", c.joint);
  v("character_coverage", c.character_coverage);
  v("byte_fallback", c.byte_fallback);
  v("sample_sentences", c.sample_sentences);
  v("sample_mb", c.sample_mb);
  v("sample_seed", c.sample_seed);
  v("input_sentence_size", c.input_sentence_size);
  v("train_threads", c.train_threads);
  v("model_dir", c.model_dir);
  v("min_freq", c.min_freq);
}

template <class V>
void visit(ModelConfig& c, V&& v) {
  v("d_model", c.d_model);
  v("heads", c.heads);
  v("encoder_layers", c.encoder_layers);
  v("decoder_layers", c.decoder_layers);
  v("ffn_dim", c.ffn_dim);
  v("dropout", c.dropout);
  v("attention_dropout", c.attention_dropout);
  v("activation_dropout", c.activation_dropout);
  v("max_len", c.max_len);
  v("norm", c.norm);
  v("positions", c.positions);
  v("activation", c.activation);
  v("init", c.init);
  v("tie_output", c.tie_output);
  v("output_bias", c.output_bias);
  v("share_embeddings", c.share_embeddings);
  v("layer_norm_eps", c.layer_norm_eps);
  v("scale_embeddings", c.scale_embeddings);
  v("embedding_norm", c.embedding_norm);
  v("decoder_autoreg", c.decoder_autoreg);
  v("share_positions", c.share_positions);
  v("position_offset", c.position_offset);
}

template <class V>
void visit(TrainConfig& c, V&& v) {
  v("device", c.device);
  v("threads", c.threads);
  v("seed", c.seed);
  v("max_tokens", c.max_tokens);
  v("batch_size", c.batch_size);
  v("bptt", c.bptt);
  v("eval_batch_size", c.eval_batch_size);
  v("sort_window", c.sort_window);
  v("max_steps", c.max_steps);
  v("max_epochs", c.max_epochs);
  v("max_minutes", c.max_minutes);
  v("optimizer", c.optimizer);
  v("adam_beta1", c.adam_beta1);
  v("adam_beta2", c.adam_beta2);
  v("adam_eps", c.adam_eps);
  v("weight_decay", c.weight_decay);
  v("schedule", c.schedule);
  v("lr", c.lr);
  v("min_lr", c.min_lr);
  v("cooldown", c.cooldown);
  v("lr_factor", c.lr_factor);
  v("warmup_steps", c.warmup_steps);
  v("clip_norm", c.clip_norm);
  v("label_smoothing", c.label_smoothing);
  v("momentum", c.momentum);
  v("decay_factor", c.decay_factor);
  v("decay_steps", c.decay_steps);
  v("plateau_patience", c.plateau_patience);
  v("accum_steps", c.accum_steps);
  v("validate_every", c.validate_every);
  v("log_every", c.log_every);
  v("translate_every", c.translate_every);
  v("translate_log_lines", c.translate_log_lines);
  v("keep_last", c.keep_last);
  v("patience", c.patience);
  v("best_metric", c.best_metric);
  v("val_bleu", c.val_bleu);
  v("val_bleu_beam", c.val_bleu_beam);
  v("average_last", c.average_last);
  v("average_choose", c.average_choose);
  v("max_bad_steps", c.max_bad_steps);
  v("bf16", c.bf16);
  v("dist_timeout_s", c.dist_timeout_s);
  v("dist_bucket_mb", c.dist_bucket_mb);
  v("dist_ordered", c.dist_ordered);
}

template <class V>
void visit(DecodeConfig& c, V&& v) {
  for (const DecodeOption& o : decode_options()) {
    if (o.integer) v(o.key, c.*o.integer);
    if (o.integer64) v(o.key, c.*o.integer64);
    if (o.number) v(o.key, c.*o.number);
    if (o.boolean) v(o.key, c.*o.boolean);
    if (o.phrases) v(o.key, c.*o.phrases);
  }
}

template <class V>
void visit(Config& c, V&& v) {
  v("task", c.task);
  v("data", c.data);
  v("tokenizer", c.tokenizer);
  v("model", c.model);
  v("train", c.train);
  v("decode", c.decode);
}

// ---- reading -----------------------------------------------------------------------------------
std::string describe(const json& j) {
  std::string dumped = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (dumped.size() > 40) dumped = dumped.substr(0, 37) + "...";
  return std::string(j.type_name()) + " " + dumped;
}

void read_value(const json& j, bool& out, const std::string& key) {
  if (!j.is_boolean()) throw ConfigError(key + ": expected true or false, got " + describe(j));
  out = j.get<bool>();
}

void read_value(const json& j, std::string& out, const std::string& key) {
  if (!j.is_string()) throw ConfigError(key + ": expected a string, got " + describe(j));
  out = j.get<std::string>();
}

template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
void read_value(const json& j, T& out, const std::string& key) {
  static_assert(sizeof(T) <= sizeof(int64_t));
  const auto out_of_range = [&] { return ConfigError(key + ": " + j.dump() + " does not fit in the integer range"); };
  using L = std::numeric_limits<T>;
  if (j.is_number_float()) {
    // 2.0 is accepted as 2, 2.5 is not; the range is checked in double before any conversion (a float
    // outside the target type's range converts to an undefined value: fuzz_config found 1.3e30).
    const double d = j.get<double>();
    if (!std::isfinite(d) || d != std::trunc(d)) throw ConfigError(key + ": expected an integer, got " + describe(j));
    const double hi = std::ldexp(1.0, L::digits);  // 2^63 for int64_t: exact, unlike double(L::max())
    if (d < (L::is_signed ? -hi : 0.0) || d >= hi) throw out_of_range();
    out = T(d);
  } else if (j.is_number_unsigned()) {
    if (j.get<uint64_t>() > uint64_t(L::max())) throw out_of_range();
    out = T(j.get<uint64_t>());
  } else if (j.is_number_integer()) {
    const int64_t i = j.get<int64_t>();
    if (i < int64_t(L::min()) || (i > 0 && uint64_t(i) > uint64_t(L::max()))) throw out_of_range();
    out = T(i);
  } else {
    throw ConfigError(key + ": expected an integer, got " + describe(j));
  }
}

// A list of phrases: non-empty strings.
void read_value(const json& j, std::vector<std::string>& out, const std::string& key) {
  if (!j.is_array()) throw ConfigError(key + ": expected a list of strings, got " + describe(j));
  out.clear();
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_string() || j[i].get<std::string>().empty()) {
      throw ConfigError(key + "[" + std::to_string(i) + "]: expected a non-empty string, got " + describe(j[i]));
    }
    out.push_back(j[i].get<std::string>());
  }
}

void read_value(const json& j, double& out, const std::string& key) {
  if (!j.is_number()) throw ConfigError(key + ": expected a number, got " + describe(j));
  out = j.get<double>();
}

template <class E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
void read_value(const json& j, E& out, const std::string& key) {
  const auto choices = enum_choices<E>();
  if (!j.is_string()) {
    throw ConfigError(key + ": expected one of " + join(choices, "|") + ", got " + describe(j));
  }
  const auto name = j.get<std::string>();
  for (const auto& [value, n] : EnumNames<E>::list) {
    if (name == n) {
      out = value;
      return;
    }
  }
  throw ConfigError(key + ": '" + name + "' is not one of " + join(choices, "|") + did_you_mean(name, choices));
}

class Reader {
 public:
  Reader(const json& object, std::string prefix) : object_(object), prefix_(std::move(prefix)) {}

  template <class T>
  void operator()(const char* key, T& field) {
    known_.emplace_back(key);
    const auto it = object_.find(key);
    if (it == object_.end()) return;
    const std::string path = prefix_.empty() ? key : prefix_ + "." + key;
    if constexpr (std::is_class_v<T> && !std::is_same_v<T, std::string> &&
                  !std::is_same_v<T, std::vector<std::string>>) {
      if (!it->is_object()) throw ConfigError(path + ": expected an object, got " + describe(*it));
      Reader nested(*it, path);
      visit(field, nested);
      nested.reject_unknown();
    } else {
      read_value(*it, field, path);
    }
  }

  void reject_unknown() const {
    for (const auto& item : object_.items()) {
      if (std::find(known_.begin(), known_.end(), item.key()) != known_.end()) continue;
      const std::string path = prefix_.empty() ? item.key() : prefix_ + "." + item.key();
      std::string hint = did_you_mean(item.key(), known_);
      if (!hint.empty() && !prefix_.empty()) {
        hint = " (did you mean '" + prefix_ + "." + closest_match(item.key(), known_) + "'?)";
      }
      throw ConfigError(std::string("unknown ") + (prefix_.empty() ? "section '" : "key '") + path + "'" + hint);
    }
  }

 private:
  const json& object_;
  std::string prefix_;
  std::vector<std::string> known_;
};

// ---- writing -----------------------------------------------------------------------------------
class Writer {
 public:
  explicit Writer(json& out) : out_(out) {}
  template <class T>
  void operator()(const char* key, T& field) {
    if constexpr (std::is_enum_v<T>) {
      out_[key] = enum_name(field);
    } else if constexpr (std::is_class_v<T> && !std::is_same_v<T, std::string> &&
                         !std::is_same_v<T, std::vector<std::string>>) {
      json nested = json::object();
      Writer w(nested);
      visit(field, w);
      out_[key] = std::move(nested);
    } else {
      out_[key] = field;
    }
  }

 private:
  json& out_;
};

// ---- validation helpers --------------------------------------------------------------------------
template <class T>
void check_range(const std::string& key, T value, T lo, T hi) {
  if (value < lo || value > hi) {
    std::ostringstream s;
    s << key << ": " << value << " is out of range [" << lo << ", " << hi << "]";
    throw ConfigError(s.str());
  }
}

void check(bool ok, const std::string& message) {
  if (!ok) throw ConfigError(message);
}

std::pair<size_t, size_t> line_and_column(const std::string& text, size_t byte) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

}  // namespace

std::string to_string(SpmType v) { return enum_name(v); }
std::string to_string(DeviceChoice v) { return enum_name(v); }
std::string to_string(Optimizer v) { return enum_name(v); }
std::string to_string(Schedule v) { return enum_name(v); }
std::string to_string(BestMetric v) { return enum_name(v); }
std::string to_string(Norm v) { return enum_name(v); }
std::string to_string(DecoderAutoreg v) { return enum_name(v); }
std::string to_string(Positions v) { return enum_name(v); }
std::string to_string(Activation v) { return enum_name(v); }
std::string to_string(Init v) { return enum_name(v); }
std::string to_string(Task v) { return enum_name(v); }

// ---- decoding options: the one table -----------------------------------------------------------
namespace {
constexpr double kMaxInt = 1 << 30;
// An entry's fields but the one it sets and its range.
DecodeOption option(const char* key, const char* flags, bool request, const char* help) {
  DecodeOption o;
  o.key = key;
  o.flags = flags;
  o.request = request;
  o.help = help;
  return o;
}
DecodeOption integer(const char* key, const char* flags, int DecodeConfig::*f, double lo, double hi, bool request,
                     const char* help) {
  DecodeOption o = option(key, flags, request, help);
  o.integer = f;
  o.min = lo;
  o.max = hi;
  return o;
}
DecodeOption integer64(const char* key, const char* flags, int64_t DecodeConfig::*f, double lo, double hi, bool request,
                       const char* help) {
  DecodeOption o = option(key, flags, request, help);
  o.integer64 = f;
  o.min = lo;
  o.max = hi;
  return o;
}
DecodeOption number(const char* key, const char* flags, double DecodeConfig::*f, double lo, bool lo_open, double hi,
                    bool request, const char* help) {
  DecodeOption o = option(key, flags, request, help);
  o.number = f;
  o.min = lo;
  o.min_open = lo_open;
  o.max = hi;
  return o;
}
DecodeOption phrases(const char* key, const char* flags, std::vector<std::string> DecodeConfig::*f, bool request,
                     const char* help) {
  DecodeOption o = option(key, flags, request, help);
  o.phrases = f;
  o.max = std::numeric_limits<double>::infinity();
  return o;
}
DecodeOption boolean(const char* key, const char* flags, bool DecodeConfig::*f, bool request, const char* help) {
  DecodeOption o = option(key, flags, request, help);
  o.boolean = f;
  o.max = 1;
  return o;
}
}  // namespace

const std::vector<DecodeOption>& decode_options() {
  using D = DecodeConfig;
  static const std::vector<DecodeOption> table = {
      integer("beam", "--beam", &D::beam, 1, 1024, true, "Beam size; 1 = greedy (and sampling)"),
      number("alpha", "--alpha", &D::alpha, 0, false, 100, true,
             "GNMT length normalisation exponent; 0 = raw log-probability"),
      number("normalize", "--normalize", &D::normalize, 0, false, 100, true,
             "Length normalisation score / length^N instead of GNMT's (Marian's --normalize, CTranslate2's "
             "length_penalty); 0: GNMT's, with --alpha"),
      number("word_penalty", "--word-penalty", &D::word_penalty, -1e4, false, 1e4, true,
             "Subtracted from a hypothesis's log-probability per token, EOS included, before the length "
             "normalisation (Marian's --word-penalty)"),
      integer("nbest", "--nbest", &D::nbest, 1, 1024, true,
              "Hypotheses per sentence (at most the beam), or samples when sampling"),
      number("max_len_a", "--max-len-a", &D::max_len_a, 0, false, 1000, true, "Output limit a * source_length + b: a"),
      integer("max_len_b", "--max-len-b", &D::max_len_b, 0, 1 << 16, true, "Output limit a * source_length + b: b"),
      number("max_length_factor", "--max-length-factor", &D::max_length_factor, 0, false, 1000, true,
             "Marian's output limit, instead of --max-len-a/b: F x source tokens (EOS included), rounded up; "
             "hypotheses still open there end without EOS (0: off)"),
      integer("min_len", "--min-len", &D::min_len, 0, 1 << 16, true,
              "Tokens generated before EOS may be chosen (the length limit wins)"),
      boolean("exact_stop", "--exact-stop{true},--first-k-stop{false}", &D::exact_stop, false,
              "Search a sentence until no live hypothesis can still win (otherwise it ends once `beam` "
              "hypotheses finished)"),
      boolean("shrink_beam", "--shrink-beam{true},--fixed-beam{false}", &D::shrink_beam, true,
              "Each hypothesis that ends leaves the beam narrower, and the search goes on until every one ended "
              "(Marian's; otherwise the beam keeps its width)"),
      boolean("allow_unk", "--allow-unk{true},--ban-unk{false}", &D::allow_unk, false,
              "Whether <unk> may be generated (Marian's models ban it)"),
      integer("batch_tokens", "--batch-tokens", &D::batch_tokens, 1, kMaxInt, false,
              "Sentences x longest source per batch"),
      integer("max_input_length", "--max-input-length", &D::max_input_length, 0, kMaxInt, true,
              "Source tokens kept; a longer source is cut, with a warning naming its line (0: what the model "
              "takes)"),
      integer("sampling_topk", "--sampling-topk", &D::sampling_topk, 0, kMaxInt, true,
              "Sample each token from the K likeliest (0: from all); 1: no sampling, search"),
      number("sampling_topp", "--sampling-topp", &D::sampling_topp, 0, true, 1, true,
             "Sampling: from the fewest likeliest tokens whose probability reaches P (nucleus; 1: all)"),
      number("sampling_temperature", "--sampling-temperature", &D::sampling_temperature, 0, true, 1e4, true,
             "Sampling: the scores are divided by T before the softmax"),
      integer64("sampling_seed", "--sampling-seed", &D::sampling_seed, 0, 9007199254740991.0,  // 2^53 - 1
                true, "Sampling: the seed of each sentence's stream (a sample depends on the seed and its sentence)"),
      number("repetition_penalty", "--repetition-penalty", &D::repetition_penalty, 1e-3, false, 1e3, true,
             "Scores of tokens already generated: divided by P where positive, multiplied where negative "
             "(CTRL's; 1: off)"),
      integer("no_repeat_ngram_size", "--no-repeat-ngram-size", &D::no_repeat_ngram_size, 0, 1024, true,
              "No N-gram of tokens occurs twice in a hypothesis (0: off)"),
      phrases("suppress", "--suppress", &D::suppress, true,
              "Target phrases never generated (negative constraints; on the command line a file, one a line)"),
  };
  return table;
}

void DecodeOption::set_integer(DecodeConfig& c, int64_t v, const std::string& name) const {
  if (integer64) {
    c.*integer64 = v;
    return;
  }
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    throw ConfigError(name + ": " + std::to_string(v) + " is out of range");
  c.*integer = int(v);
}

void fit_nbest_to_beam(DecodeConfig& d, bool nbest_given) {
  if (!nbest_given && !sampling(d)) d.nbest = std::min(d.nbest, d.beam);
}

std::string DecodeOption::text(const DecodeConfig& c) const {
  if (phrases) return json(c.*phrases).dump();
  if (integer) return std::to_string(c.*integer);
  if (integer64) return std::to_string(c.*integer64);
  if (boolean) return c.*boolean ? "true" : "false";
  json j = c.*number;
  return j.dump();
}

double DecodeOption::value(const DecodeConfig& c) const {
  if (phrases) return double((c.*phrases).size());
  if (integer) return double(c.*integer);
  if (integer64) return double(c.*integer64);
  if (boolean) return c.*boolean ? 1 : 0;
  return c.*number;
}

bool operator==(const DecodeConfig& a, const DecodeConfig& b) {
  for (const DecodeOption& o : decode_options()) {
    if (o.phrases     ? a.*o.phrases != b.*o.phrases
        : o.integer64 ? a.*o.integer64 != b.*o.integer64
                      : o.value(a) != o.value(b)) {
      return false;
    }
  }
  return true;
}

void validate(const DecodeConfig& d, bool as_fields) {
  const auto name = [as_fields](const DecodeOption& o) {
    if (as_fields) return "\"" + std::string(o.key) + "\"";
    std::string flag = o.flags;
    flag = flag.substr(0, flag.find_first_of("{,"));
    return std::string("decode.") + o.key + " (" + flag + ")";
  };
  const auto find = [](const std::string& key) -> const DecodeOption& {
    for (const DecodeOption& o : decode_options()) {
      if (key == o.key) return o;
    }
    throw std::logic_error("no decoding option " + key);
  };
  for (const DecodeOption& o : decode_options()) {
    if (o.boolean) continue;
    if (o.phrases) {
      for (const std::string& p : d.*o.phrases) {
        check(!p.empty() && p.find_first_not_of(" \t") != std::string::npos, name(o) + ": an empty phrase");
      }
      continue;
    }
    const double v = o.value(d);
    const bool below = o.min_open ? !(v > o.min) : !(v >= o.min);
    if (below || !(v <= o.max)) {
      std::ostringstream s;
      s << name(o) << ": " << o.text(d) << " is out of range " << (o.min_open ? "(" : "[") << o.min << ", " << o.max
        << "]";
      throw ConfigError(s.str());
    }
  }
  if (!sampling(d)) {
    check(d.nbest <= d.beam, name(find("nbest")) + ": " + std::to_string(d.nbest) + " is out of range [1, " +
                                 std::to_string(d.beam) + "] (at most the beam)");
  } else {
    check(d.beam == 1, name(find("beam")) + ": sampling (" + name(find("sampling_topk")) + " " +
                           std::to_string(d.sampling_topk) +
                           ") draws each hypothesis on its own: use beam 1; nbest "
                           "N gives N samples");
  }
  check(d.max_len_a > 0 || d.max_len_b > 0 || d.max_length_factor > 0,
        std::string(as_fields ? "\"max_len_a\" and \"max_len_b\""
                              : "decode.max_len_a and decode.max_len_b (--max-len-a, --max-len-b)") +
            " are both 0: nothing may be generated");
}

void validate(const Config& c) {
  constexpr int kBig = 1 << 30;
  const auto& d = c.data;
  check(!d.dir.empty(), "data.dir: must not be empty");
  check(!d.src_lang.empty() && !d.tgt_lang.empty(), "data.src_lang/data.tgt_lang: must not be empty");
  check(d.src_lang != d.tgt_lang, "data.src_lang and data.tgt_lang are both '" + d.src_lang + "'");
  check(!d.train.empty(), "data.train: must not be empty");
  check(!d.cache_dir.empty(), "data.cache_dir: must not be empty");
  check_range("data.filter_min_tokens", d.filter_min_tokens, 0, kBig);
  check_range("data.filter_max_tokens", d.filter_max_tokens, 0, kBig);
  check(d.filter_max_tokens == 0 || d.filter_max_tokens >= d.filter_min_tokens,
        "data.filter_max_tokens: " + std::to_string(d.filter_max_tokens) + " is below data.filter_min_tokens " +
            std::to_string(d.filter_min_tokens));
  check(d.filter_max_ratio == 0 || d.filter_max_ratio >= 1,
        "data.filter_max_ratio: must be 0 (off) or >= 1, got " + std::to_string(d.filter_max_ratio));

  const auto& t = c.tokenizer;
  check_range("tokenizer.vocab_size", t.vocab_size, t.byte_fallback ? 300 : 50, 1000000);
  check_range("tokenizer.min_freq", t.min_freq, 1, kBig);
  check(t.type != SpmType::basic_english || c.task == Task::lm,
        "tokenizer.type: basic_english is the language-model tutorial's tokenizer (task: lm); translation needs "
        "unigram or bpe");
  check(t.character_coverage > 0 && t.character_coverage <= 1,
        "tokenizer.character_coverage: must be in (0, 1], got " + std::to_string(t.character_coverage));
  check_range("tokenizer.input_sentence_size", t.input_sentence_size, 0, kBig);
  check(t.sample_sentences >= 0,
        "tokenizer.sample_sentences: must be >= 0 (0 = all pairs), got " + std::to_string(t.sample_sentences));
  check(t.sample_mb >= 0, "tokenizer.sample_mb: must be >= 0 (0 = no bound), got " + std::to_string(t.sample_mb));
  check_range("tokenizer.train_threads", t.train_threads, 1, 1024);
  if (!t.model_dir.empty()) {
    check(fs::is_directory(t.model_dir), "tokenizer.model_dir: directory '" + t.model_dir + "' not found");
  }

  const auto& m = c.model;
  check_range("model.d_model", m.d_model, 1, 65536);
  check_range("model.heads", m.heads, 1, 1024);
  check(m.d_model % m.heads == 0,
        "model.heads: " + std::to_string(m.heads) + " does not divide model.d_model " + std::to_string(m.d_model));
  check_range("model.encoder_layers", m.encoder_layers, 1, 128);
  check_range("model.decoder_layers", m.decoder_layers, 1, 128);
  check_range("model.ffn_dim", m.ffn_dim, 1, 1 << 20);
  check(m.dropout >= 0 && m.dropout < 1, "model.dropout: must be in [0, 1), got " + std::to_string(m.dropout));
  check_range("model.max_len", m.max_len, 8, 1 << 16);
  check(m.attention_dropout >= 0 && m.attention_dropout < 1, "model.attention_dropout: must be in [0, 1)");
  check(m.activation_dropout >= 0 && m.activation_dropout < 1, "model.activation_dropout: must be in [0, 1)");
  check(m.layer_norm_eps > 0 && m.layer_norm_eps < 1, "model.layer_norm_eps: must be in (0, 1)");
  check(m.position_offset >= 0 && m.position_offset <= 1024, "model.position_offset: must be in [0, 1024]");
  check(m.decoder_autoreg == DecoderAutoreg::self_attention || c.task == Task::translation,
        "model.decoder_autoreg: ssru is a translation model's decoder; task lm's layers use self-attention");

  const auto& tr = c.train;
  check_range("train.threads", tr.threads, 0, 1024);
  check_range<int64_t>("train.seed", tr.seed, 0, std::numeric_limits<int64_t>::max());
  check_range("train.max_tokens", tr.max_tokens, 16, kBig);
  check_range("train.sort_window", tr.sort_window, 0, kBig);
  check_range<int64_t>("train.max_steps", tr.max_steps, 0, std::numeric_limits<int64_t>::max());
  check_range("train.max_epochs", tr.max_epochs, 0, 1000000);
  check(tr.max_minutes >= 0, "train.max_minutes: must be >= 0, got " + std::to_string(tr.max_minutes));
  check(tr.adam_beta1 >= 0 && tr.adam_beta1 < 1, "train.adam_beta1: must be in [0, 1)");
  check(tr.adam_beta2 >= 0 && tr.adam_beta2 < 1, "train.adam_beta2: must be in [0, 1)");
  check(tr.adam_eps > 0, "train.adam_eps: must be > 0");
  check(tr.weight_decay >= 0, "train.weight_decay: must be >= 0");
  check(tr.lr > 0, "train.lr: must be > 0");
  check(tr.lr_factor > 0, "train.lr_factor: must be > 0");
  check(tr.min_lr >= 0 && tr.min_lr <= tr.lr, "train.min_lr: must be in [0, train.lr]");
  check(!(tr.schedule == Schedule::cosine || tr.schedule == Schedule::linear) || tr.max_steps > 0 || tr.max_minutes > 0,
        "train.schedule: " + to_string(tr.schedule) +
            " decays to train.min_lr at the end of the budget; set train.max_steps or train.max_minutes");
  check_range("train.warmup_steps", tr.warmup_steps, 0, kBig);
  check(tr.cooldown >= 0 && tr.cooldown < 1, "train.cooldown: a share of the budget in [0, 1), e.g. 0.2");
  check(tr.cooldown == 0 || tr.max_steps > 0 || tr.max_minutes > 0,
        "train.cooldown: the cool-down takes the last share of the budget; set train.max_steps or train.max_minutes");
  check(tr.schedule != Schedule::noam || tr.warmup_steps > 0, "train.warmup_steps: the noam schedule needs > 0");
  check(tr.clip_norm >= 0, "train.clip_norm: must be >= 0 (0 = off)");
  check(tr.label_smoothing >= 0 && tr.label_smoothing < 1, "train.label_smoothing: must be in [0, 1)");
  check(tr.momentum >= 0 && tr.momentum < 1, "train.momentum: must be in [0, 1)");
  check(tr.decay_factor > 0 && tr.decay_factor <= 1, "train.decay_factor: must be in (0, 1]");
  check_range("train.decay_steps", tr.decay_steps, tr.schedule == Schedule::step ? 0 : 1, kBig);
  check_range("train.batch_size", tr.batch_size, 1, kBig);
  check_range("train.bptt", tr.bptt, 1, 1 << 16);
  check_range("train.eval_batch_size", tr.eval_batch_size, 1, kBig);
  if (c.task == Task::lm) {
    check(tr.bptt <= m.max_len, "train.bptt: " + std::to_string(tr.bptt) + " is longer than model.max_len " +
                                    std::to_string(m.max_len) + " (the positions the model has)");
    check(tr.best_metric != BestMetric::bleu && !tr.val_bleu && tr.translate_every == 0,
          "train.best_metric/val_bleu/translate_every: BLEU and validation translations are for task "
          "translation; a language model is validated by loss and perplexity");
  }
  check_range("train.plateau_patience", tr.plateau_patience, 0, kBig);
  check_range("train.accum_steps", tr.accum_steps, 1, 4096);
  check_range("train.validate_every", tr.validate_every, 0, kBig);
  check_range("train.log_every", tr.log_every, 1, kBig);
  check_range("train.translate_every", tr.translate_every, 0, kBig);
  check_range("train.val_bleu_beam", tr.val_bleu_beam, 1, 64);
  check_range("train.average_last", tr.average_last, 0, 1000);
  check(tr.average_last <= tr.keep_last, "train.average_last: " + std::to_string(tr.average_last) +
                                             " is more than the step checkpoints kept (train.keep_last " +
                                             std::to_string(tr.keep_last) + ")");
  check_range("train.translate_log_lines", tr.translate_log_lines, 0, kBig);
  check_range("train.keep_last", tr.keep_last, 0, 1000);
  check(!tr.average_choose || tr.average_last > 1,
        "train.average_choose chooses among the averages of the last 1 .. train.average_last checkpoints: set "
        "train.average_last to 2 or more");
  check_range("train.patience", tr.patience, 0, kBig);
  check_range("train.max_bad_steps", tr.max_bad_steps, 1, kBig);
  check(tr.dist_timeout_s >= 1 && tr.dist_timeout_s <= 86400, "train.dist_timeout_s: must be in [1, 86400] seconds");
  check_range("train.dist_bucket_mb", tr.dist_bucket_mb, 1, 4096);

  validate(c.decode);
}

Config from_json(const json& document) {
  if (!document.is_object()) throw ConfigError("config: expected a JSON object at the top level");
  Config c;
  Reader reader(document, "");
  visit(c, reader);
  reader.reject_unknown();
  if (c.task == Task::lm) {
    // The LM tutorial's model unless the config says otherwise: no tying, U(-0.1, 0.1) embedding and output.
    const auto model = document.find("model");
    const bool given = model != document.end() && model->is_object();
    if (!given || !model->contains("tie_output")) c.model.tie_output = false;
    if (!given || !model->contains("init")) c.model.init = Init::uniform;
  }
  validate(c);
  return c;
}

json to_json(const Config& config) {
  json out = json::object();
  Config copy = config;
  Writer w(out);
  visit(copy, w);
  return out;
}

void apply_override(json& document, const std::string& assignment) {
  // The JSON reader checks a file's strings; a bare word from the command line is checked here, so every
  // string in a Config is valid UTF-8 (it is written back out as JSON).
  if (const size_t bad = utf8::find_invalid(assignment); bad != utf8::kValid) {
    throw ConfigError("--set '" + assignment.substr(0, bad) + "...': invalid UTF-8 at byte " + std::to_string(bad));
  }
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError("--set '" + assignment + "': expected section.key=value");
  }
  const std::string path = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  const auto parts = split(path, '.');
  if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
    throw ConfigError("--set '" + assignment + "': the key must be section.key, e.g. model.d_model=256");
  }
  json value;
  try {
    value = json::parse(text);
  } catch (const json::parse_error&) {
    value = text;                        // a bare word: a string
  } catch (const json::out_of_range&) {  // fuzz_config: 0.888...e99999 overflows a double
    throw ConfigError("--set '" + assignment + "': the number is out of range");
  }
  // (load() checks this first, naming the file; for any other caller of apply_override:)
  if (!document.is_object()) throw ConfigError("--set '" + assignment + "': the config is not a JSON object");
  json& section = document[parts[0]];
  if (section.is_null()) section = json::object();
  if (!section.is_object()) throw ConfigError("--set '" + assignment + "': '" + parts[0] + "' is not a section");
  section[parts[1]] = std::move(value);
}

Config load(const fs::path& file, const std::vector<std::string>& overrides) {
  if (!fs::exists(file)) throw ConfigError("config file '" + file.string() + "' not found");
  const std::string text = read_file(file);
  json document;
  try {
    document = json::parse(text, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json::parse_error& e) {
    const auto [line, col] = line_and_column(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string what = e.what();
    const size_t colon = what.rfind(": ");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    throw ConfigError(file.string() + ":" + std::to_string(line) + ":" + std::to_string(col) +
                      ": invalid JSON: " + what);
  } catch (const json::exception& e) {  // out_of_range 406 (fuzz_config: a number too large for a double)
    std::string what = e.what();
    const size_t bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    throw ConfigError(file.string() + ": invalid JSON: " + what);
  }
  // fuzz_config: a file holding `0` or `[]` plus a --set made nlohmann throw type_error from operator[].
  if (!document.is_object()) throw ConfigError(file.string() + ": expected a JSON object at the top level");
  for (const auto& o : overrides) apply_override(document, o);
  try {
    return from_json(document);
  } catch (const ConfigError& e) {
    throw ConfigError(file.string() + ": " + e.what());
  }
}

std::vector<std::string> differences(const Config& a, const Config& b) {
  const json ja = to_json(a), jb = to_json(b);
  std::vector<std::string> out;
  for (const auto& section : ja.items()) {
    if (!section.value().is_object()) {  // a top-level setting (task)
      const json& other = jb.at(section.key());
      if (section.value() != other)
        out.push_back(section.key() + ": " + section.value().dump() + " vs " + other.dump());
      continue;
    }
    for (const auto& item : section.value().items()) {
      const json& other = jb.at(section.key()).at(item.key());
      if (item.value() != other) {
        out.push_back(section.key() + "." + item.key() + ": " + item.value().dump() + " vs " + other.dump());
      }
    }
  }
  return out;
}

void write_resolved(const Config& config, const fs::path& path) {
  write_file_atomic(path, to_json(config).dump(2) + "\n");
}

}  // namespace mtx::config
