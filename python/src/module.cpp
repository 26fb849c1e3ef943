// mtx._mtx: the library's translator, scorer, metrics and trainer for Python (pybind11). Thin: every call goes to
// the same library functions the CLI calls, with the GIL released while they run; mtx's errors arrive as Python
// exceptions with the CLI's one-line messages (mtx/util/errors.h: ConfigError -> ValueError, NotFoundError ->
// FileNotFoundError, CheckpointError -> mtx.CheckpointError, other errors -> mtx.Error).
#include <fcntl.h>
#include <malloc.h>
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/torch.h>
#include <torch/version.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "mtx/bundle/bundle.h"
#include "mtx/bundle/export.h"
#include "mtx/bundle/import.h"
#include "mtx/config/config.h"
#include "mtx/decode/align.h"
#include "mtx/decode/scoring.h"
#include "mtx/decode/stream.h"
#include "mtx/decode/text.h"
#include "mtx/decode/translator.h"
#include "mtx/doc/document.h"
#include "mtx/eval/metrics.h"
#include "mtx/train/average.h"
#include "mtx/train/checkpoint.h"
#include "mtx/train/settings.h"
#include "mtx/train/trainer.h"
#include "mtx/util/device.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"
#include "mtx/util/system.h"

namespace py = pybind11;
using namespace mtx;

namespace {

PyObject* g_error = nullptr;             // mtx.Error
PyObject* g_checkpoint_error = nullptr;  // mtx.CheckpointError

// ---- logging: mtx's messages go to Python's `logging` (logger "mtx") ------------------------------------
void forward_log(log::Level level, std::string_view message) {
  if (!Py_IsInitialized()) return;
  py::gil_scoped_acquire gil;
  try {
    static const int kLevels[] = {10, 20, 30, 40, 50};  // logging.DEBUG .. CRITICAL
    py::module_::import("logging").attr("getLogger")("mtx").attr("log")(kLevels[static_cast<int>(level)],
                                                                        std::string(message));
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("mtx logging");
  }
}

// ---- decoding options: Python keywords over the one option table (config::decode_options) ---------------
const config::DecodeOption* find_option(const std::string& key) {
  for (const auto& o : config::decode_options()) {
    if (key == o.key) return &o;
  }
  return nullptr;
}

std::string option_names() {
  std::string names;
  for (const auto& o : config::decode_options()) names += (names.empty() ? "" : ", ") + std::string(o.key);
  return names;
}

// Sets one option from a Python value; ValueError (ConfigError) naming it on a wrong type.
void set_option(config::DecodeConfig& d, const config::DecodeOption& o, const py::handle& value) {
  const std::string key = o.key;
  if (o.boolean) {
    if (!py::isinstance<py::bool_>(value)) throw ConfigError(key + ": expected True or False");
    d.*o.boolean = value.cast<bool>();
  } else if (o.phrases) {
    if (py::isinstance<py::str>(value) || !py::isinstance<py::sequence>(value)) {
      throw ConfigError(key + ": expected a list of strings");
    }
    std::vector<std::string> list;
    for (const py::handle item : value) {
      if (!py::isinstance<py::str>(item)) throw ConfigError(key + ": expected a list of strings");
      list.push_back(item.cast<std::string>());
    }
    d.*o.phrases = std::move(list);
  } else if (o.integer || o.integer64) {
    if (py::isinstance<py::bool_>(value) || !py::isinstance<py::int_>(value)) {
      throw ConfigError(key + ": expected an integer");
    }
    int64_t n = 0;
    try {
      n = value.cast<int64_t>();
    } catch (const py::cast_error&) {
      throw ConfigError(key + ": " + py::str(value).cast<std::string>() + " is out of range");
    }
    o.set_integer(d, n, key);
  } else if (o.number) {
    if (py::isinstance<py::bool_>(value) || !(py::isinstance<py::int_>(value) || py::isinstance<py::float_>(value))) {
      throw ConfigError(key + ": expected a number");
    }
    d.*o.number = value.cast<double>();
  }
}

// ---- results -------------------------------------------------------------------------------------------
struct Hypothesis {
  std::string text;
  double score = 0;
  double log_prob = 0;
  std::vector<std::string> tokens;
};

struct TranslationResult {
  std::string text;
  double score = 0;
  std::vector<Hypothesis> nbest;
  std::optional<std::string> alignment;  // Pharaoh pairs of the best hypothesis, when asked
  bool truncated = false;
};

struct ScoreResult {
  double log_prob = 0;
  std::vector<std::string> tokens;
  std::vector<double> token_log_probs;
};

// A source: text, or a list of pieces (mapped to their ids; an unknown piece is the unknown id).
struct Source {
  std::optional<std::string> text;
  std::vector<std::string> pieces;
};

std::vector<Source> read_sources(const py::handle& sources, const char* what) {
  if (py::isinstance<py::str>(sources)) {
    throw ConfigError(std::string(what) + ": expected a list of sentences, not one string (wrap it in a list)");
  }
  std::vector<Source> out;
  for (const py::handle item : sources) {
    Source s;
    if (py::isinstance<py::str>(item)) {
      s.text = item.cast<std::string>();
    } else if (py::isinstance<py::list>(item) || py::isinstance<py::tuple>(item)) {
      for (const py::handle p : item) {
        if (!py::isinstance<py::str>(p)) throw ConfigError(std::string(what) + ": a list of pieces holds strings only");
        s.pieces.push_back(p.cast<std::string>());
      }
    } else {
      throw ConfigError(std::string(what) + ": each item is a string or a list of pieces, not " +
                        std::string(py::str(py::type::of(item).attr("__name__"))));
    }
    out.push_back(std::move(s));
  }
  return out;
}

// glibc's malloc (the interpreter's, where the CLI links tcmalloc) hands freed memory at the top of its heap back to
// the kernel and serves large blocks from fresh mappings, so a search's per-step tensors would be paged in again at
// every step. Before the first model is loaded or trained, the process's trim and mmap thresholds are raised so that
// freed memory is kept for reuse (up to kKeptBytes), as tcmalloc keeps it. Nothing changes where GLIBC_TUNABLES sets
// malloc's own (the user's choice), nor under another allocator (mallopt is then not glibc's). docs/python.md.
void keep_freed_memory_for_reuse() {
#ifdef __GLIBC__
  static std::once_flag once;
  std::call_once(once, [] {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    if (tunables && std::strstr(tunables, "glibc.malloc.")) return;
    constexpr int kKeptBytes = 256 << 20;
    constexpr int kMappedFromBytes = 32 << 20;  // glibc's largest dynamic threshold on 64-bit systems
    mallopt(M_TRIM_THRESHOLD, kKeptBytes);
    mallopt(M_MMAP_THRESHOLD, kMappedFromBytes);
  });
#endif
}

// ---- long calls: Ctrl-C and fork ---------------------------------------------------------------------------
// Runs work(stop) on a thread of its own while the calling thread, taking the GIL every 50 ms, lets Python run its
// signal handlers: Ctrl-C (or a handler's exception) sets `stop` -- searches give up at their next step -- and the
// exception is raised as soon as the work has returned. A thread of its own also serves a process forked after a
// call (multiprocessing's fork, gunicorn's preload): the parent's OpenMP team is not in the child, and a new thread
// starts a team of its own where the calling thread would wait for the parent's forever.
template <class F>
auto interruptible(F work) {
  using R = decltype(work(std::declval<const std::atomic<bool>&>()));
  struct State {
    std::mutex mutex;
    std::condition_variable wake;
    bool done = false;
    std::optional<R> result;
    std::exception_ptr error;
  };
  State state;
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    std::optional<R> r;
    std::exception_ptr error;
    try {
      r.emplace(work(stop));
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(state.mutex);
    state.result = std::move(r);
    state.error = error;
    state.done = true;
    state.wake.notify_all();
  });
  bool interrupted = false;
  for (;;) {
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(state.mutex);
      if (state.wake.wait_for(lock, std::chrono::milliseconds(50), [&] { return state.done; })) break;
    }
    if (!interrupted && PyErr_CheckSignals() != 0) {  // the error stays set, to be raised below
      interrupted = true;
      stop = true;
    }
  }
  {
    py::gil_scoped_release release;
    worker.join();
  }
  if (interrupted) throw py::error_already_set();
  if (state.error) std::rethrow_exception(state.error);
  return std::move(*state.result);
}

// ---- Translator ----------------------------------------------------------------------------------------
class Translator {
 public:
  Translator(const py::object& path, const std::string& device, const std::optional<std::string>& quantize, int threads,
             int workers)
      : workers_(workers) {
    std::vector<std::filesystem::path> paths;
    if (py::isinstance<py::str>(path) || py::hasattr(path, "__fspath__")) {
      paths.emplace_back(py::str(path).cast<std::string>());
    } else {
      for (const py::handle p : path) paths.emplace_back(py::str(p).cast<std::string>());
    }
    if (threads < 0)
      throw ConfigError("threads: must be >= 0 (0 = leave LibTorch's setting), got " + std::to_string(threads));
    if (workers < 0) throw ConfigError("workers: must be >= 0 (0 = one per thread), got " + std::to_string(workers));
    if (device != "auto" && device != "cpu" && device != "cuda") {
      throw ConfigError("device: expected 'cpu', 'cuda' or 'auto', not '" + device + "'");
    }
    std::optional<bundle::Int8Options> int8;
    if (quantize && *quantize != "none") {
      if (*quantize == "int8") {
        int8 = bundle::Int8Options{true};
      } else if (*quantize == "int8_float_output") {
        int8 = bundle::Int8Options{false};
      } else {
        throw ConfigError("quantize: expected None, 'int8' or 'int8_float_output', not '" + *quantize + "'");
      }
    }
    keep_freed_memory_for_reuse();
    {
      py::gil_scoped_release release;
      const mtx::DeviceChoice where = device == "cpu"    ? mtx::DeviceChoice::cpu
                                      : device == "cuda" ? mtx::DeviceChoice::cuda
                                                         : mtx::DeviceChoice::auto_;
      device_ = select_device(int8 && where == mtx::DeviceChoice::auto_ ? mtx::DeviceChoice::cpu : where, "device");
      bundles_ = bundle::load_for_inference(paths, device_, int8);
      for (auto& b : bundles_) models_.push_back(b.model);
      if (threads > 0) set_threads(threads);
      defaults_ = bundles_.front().config.decode;
    }
    translator(py::kwargs());  // the default options' translator, checked now
  }

  std::vector<TranslationResult> translate(const py::handle& sources, const std::optional<std::string>& source_lang,
                                           const std::optional<std::string>& target_lang,
                                           const std::optional<py::handle>& target_prefix, bool alignment,
                                           const decode::Glossary* glossary, const py::kwargs& options) {
    const std::vector<Source> items = read_sources(sources, "sources");
    std::vector<std::string> prefixes;
    if (target_prefix && !target_prefix->is_none()) {
      for (const py::handle p : *target_prefix) prefixes.push_back(p.is_none() ? std::string() : p.cast<std::string>());
      if (prefixes.size() != items.size()) {
        throw ConfigError("target_prefix: " + std::to_string(prefixes.size()) + " prefixes for " +
                          std::to_string(items.size()) + " sources");
      }
    }
    auto t = translator(options, source_lang.value_or(""), target_lang.value_or(""));
    return interruptible([&](const std::atomic<bool>& stop) {
      return run_translate(*t, items, prefixes, glossary, source_lang || target_lang, alignment, stop);
    });
  }

  // `texts` (each a paragraph, a document's text or an HTML fragment) translated whole: split into sentences,
  // translated, put back with their whitespace and markup (decode/text.h, the CLI's --format text/html).
  std::vector<std::string> translate_text(const py::handle& texts, const std::string& format,
                                          const std::optional<std::string>& source_lang,
                                          const std::optional<std::string>& target_lang,
                                          const decode::Glossary* glossary, const py::kwargs& options) {
    if (py::isinstance<py::str>(texts)) {
      throw ConfigError("texts: expected a list of texts, not one string (wrap it in a list)");
    }
    std::vector<std::string> items;
    for (const py::handle item : texts) {
      if (!py::isinstance<py::str>(item)) throw ConfigError("texts: each item is a string");
      items.push_back(item.cast<std::string>());
    }
    const text::Format f = text::parse_format(format, "format");
    auto t = translator(options, source_lang.value_or(""), target_lang.value_or(""), f == text::Format::html);
    return interruptible([&](const std::atomic<bool>& stop) {
      const text::Segmenter segmenter = decode::segmenter_for(bundles_.front().config, source_lang.value_or(""));
      return decode::translate_texts(
          *t, items, f, segmenter, [&stop](int64_t) { return stop.load(); }, glossary);
    });
  }

 private:
  std::vector<TranslationResult> run_translate(decode::Translator& translator, const std::vector<Source>& items,
                                               const std::vector<std::string>& prefixes,
                                               const decode::Glossary* glossary, bool languages_named, bool alignment,
                                               const std::atomic<bool>& stop) {
    decode::Translator* t = &translator;
    const decode::Abandoned abandoned = [&stop](int64_t) { return stop.load(); };
    const tokenizer::Tokenizer& tok = t->tokenizer();
    std::vector<TranslationResult> out(items.size());
    std::vector<std::string> lines;
    std::vector<size_t> text_at;
    std::vector<std::vector<int32_t>> ids;
    std::vector<size_t> ids_at;
    std::vector<decode::LineControls> controls;
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].text) {
        lines.push_back(*items[i].text);
        text_at.push_back(i);
        if (!prefixes.empty() || glossary) {
          controls.push_back(decode::LineControls{prefixes.empty() ? std::string() : prefixes[i], {}});
          if (glossary) decode::add_glossary_terms(*glossary, lines.back(), controls.back());
        }
      } else {
        if (glossary) {
          throw ConfigError("glossary: source " + std::to_string(i) +
                            " is given as pieces, where a glossary cannot find its source terms; give it as text");
        }
        // Pieces are the model's input as given: no language code is added to them or forced after them.
        if (languages_named) {
          throw ConfigError("source_lang/target_lang: source " + std::to_string(i) +
                            " is given as pieces, which are translated as they are, without language codes; give "
                            "the sources as text to name the languages");
        }
        ids.push_back(piece_ids(tok, items[i].pieces));
        ids_at.push_back(i);
      }
    }
    if (!lines.empty()) {
      const auto done = t->translate(lines, controls, abandoned);
      for (size_t j = 0; j < done.size(); ++j) fill(*t, done[j], out[text_at[j]], alignment, &lines[j]);
    }
    if (!ids.empty()) {
      std::vector<decode::TargetControls> targets;
      if (!prefixes.empty()) {
        for (size_t j = 0; j < ids.size(); ++j)
          targets.push_back(t->target_controls(decode::LineControls{prefixes[ids_at[j]], {}}, 0));
      }
      const auto hyps = t->translate_ids(ids, {}, abandoned, targets);
      for (size_t j = 0; j < hyps.size(); ++j) {
        decode::Translation tr;
        tr.hypotheses = hyps[j];
        tr.truncated = int64_t(ids[j].size()) > t->max_source_tokens();  // (translate_ids cuts it, as text is cut)
        for (const auto& h : tr.hypotheses) tr.texts.push_back(tok.tgt().decode(h.tokens));
        fill(*t, tr, out[ids_at[j]], alignment, nullptr, &ids[j]);
      }
    }
    return out;
  }

 public:
  // mtx translate's output, byte for byte: `src` translated into `out` through the same stream.
  py::dict translate_file(const std::string& src, const std::string& out, const std::optional<std::string>& format,
                          const std::optional<std::string>& source_lang, const std::optional<std::string>& target_lang,
                          const decode::Glossary* glossary, const py::kwargs& options) {
    // A document (by `format`, else by src's extension): translated with its formatting, as mtx translate does.
    std::optional<doc::Format> document;
    if (format && *format != "lines") {
      document = doc::parse_format(*format, "format");
    } else if (!format) {
      document = doc::document_of_path(src);
    }
    if (document) return translate_document_file(src, out, *document, source_lang, target_lang, glossary, options);
    auto t = translator(options, source_lang.value_or(""), target_lang.value_or(""));
    const bool scores_asked = options.contains("scores") && options["scores"].cast<bool>();
    const int fd = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw NotFoundError("src: cannot read '" + src + "': " + std::strerror(errno));
    struct Close {
      int fd;
      ~Close() { ::close(fd); }
    } close{fd};
    const std::filesystem::path parent = std::filesystem::path(out).parent_path();
    if (!parent.empty() && !std::filesystem::is_directory(parent)) {
      throw NotFoundError("out: cannot write '" + out + "': the directory '" + parent.string() + "' does not exist");
    }
    std::ofstream file(out, std::ios::binary | std::ios::trunc);
    if (!file) throw Error("out: cannot write '" + out + "': " + std::strerror(errno));
    const decode::StreamStats s = interruptible([&](const std::atomic<bool>& stop) {
      std::unique_ptr<decode::LineSource> in = decode::fd_line_source(fd);
      decode::StreamOptions stream;
      stream.nbest_format = scores_asked || t->options().search.nbest > 1;  // mtx translate's rule
      stream.abandoned = [&stop](int64_t) { return stop.load(); };
      stream.glossary = glossary;
      decode::StreamStats stats = decode::translate_stream(*t, *in, file, stream);
      file.flush();
      if (!file) throw Error("out: cannot write '" + out + "' (disk full?)");
      return stats;
    });
    if (s.invalid_utf8 > 0) {
      throw DataError(std::to_string(s.invalid_utf8) + " line(s) of '" + src +
                      "' were not valid UTF-8; their translations were left empty");
    }
    py::dict d;
    d["lines"] = s.lines;
    d["seconds"] = s.seconds;
    d["generated_tokens"] = s.generated_tokens;
    d["truncated"] = s.truncated;
    return d;
  }

  py::dict translate_document_file(const std::string& src, const std::string& out, doc::Format format,
                                   const std::optional<std::string>& source_lang,
                                   const std::optional<std::string>& target_lang, const decode::Glossary* glossary,
                                   const py::kwargs& options) {
    std::ifstream in(src, std::ios::binary);
    if (!in) throw NotFoundError("src: cannot read '" + src + "': " + std::strerror(errno));
    std::stringstream bytes;
    bytes << in.rdbuf();
    const std::filesystem::path parent = std::filesystem::path(out).parent_path();
    if (!parent.empty() && !std::filesystem::is_directory(parent)) {
      throw NotFoundError("out: cannot write '" + out + "': the directory '" + parent.string() + "' does not exist");
    }
    auto t = translator(options, source_lang.value_or(""), target_lang.value_or(""), true);
    const auto start = std::chrono::steady_clock::now();
    size_t paragraphs = 0;
    const std::string translated = interruptible([&](const std::atomic<bool>& stop) {
      const text::Segmenter segmenter = decode::segmenter_for(bundles_.front().config, source_lang.value_or(""));
      return doc::translate_document(
          bytes.str(), format, src,
          [&](const std::vector<std::string>& texts, text::Format f) {
            return decode::translate_texts(
                *t, texts, f, segmenter, [&stop](int64_t) { return stop.load(); }, glossary);
          },
          {}, [&paragraphs](size_t done, size_t) { paragraphs = done; });
    });
    std::ofstream file(out, std::ios::binary | std::ios::trunc);
    file << translated;
    file.flush();
    if (!file) throw Error("out: cannot write '" + out + "' (disk full?)");
    py::dict d;
    d["format"] = doc::info(format).name;
    d["paragraphs"] = paragraphs;
    d["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return d;
  }

  std::vector<ScoreResult> score(const py::handle& sources, const py::handle& targets, int64_t batch_tokens) {
    const std::vector<Source> src = read_sources(sources, "sources");
    const std::vector<Source> tgt = read_sources(targets, "targets");
    if (src.size() != tgt.size()) {
      throw ConfigError("score: " + std::to_string(src.size()) + " sources but " + std::to_string(tgt.size()) +
                        " targets");
    }
    if (batch_tokens <= 0) throw ConfigError("batch_tokens: must be > 0");
    py::gil_scoped_release release;
    const tokenizer::Tokenizer& tok = *bundles_.front().tokenizer;
    std::vector<std::vector<int32_t>> s, t;
    for (size_t i = 0; i < src.size(); ++i) {
      s.push_back(src[i].text ? tok.src().encode(*src[i].text) : piece_ids(tok, src[i].pieces));
      t.push_back(tgt[i].text ? tok.tgt().encode(*tgt[i].text) : piece_ids(tok, tgt[i].pieces, /*target=*/true));
    }
    std::vector<model::Transformer> models = models_;
    const auto scores = decode::score_pairs(models, tok.special_ids(), s, t, batch_tokens);
    std::vector<ScoreResult> out;
    for (const auto& p : scores) {
      ScoreResult r;
      r.log_prob = p.log_prob;
      r.token_log_probs = p.token_log_probs;
      for (const int32_t id : p.tokens) r.tokens.push_back(tok.tgt().piece(id));
      out.push_back(std::move(r));
    }
    return out;
  }

  std::vector<std::vector<std::string>> tokenize(const std::vector<std::string>& lines) const {
    py::gil_scoped_release release;
    const tokenizer::Model& src = bundles_.front().tokenizer->src();
    std::vector<std::vector<std::string>> out;
    for (const auto& line : lines) {
      out.emplace_back();
      for (const int32_t id : src.encode(line)) out.back().push_back(src.piece(id));
    }
    return out;
  }

  std::vector<std::string> languages() const {
    std::vector<std::string> out;
    for (const auto& [code, id] : bundles_.front().tokenizer->languages()) out.push_back(code);
    return out;
  }
  std::string device() const { return device_.str(); }
  bool int8() const { return models_.front()->is_int8(); }
  py::dict defaults() const {
    py::dict d;
    for (const auto& o : config::decode_options()) {
      if (o.boolean) d[o.key] = defaults_.*o.boolean;
      if (o.integer) d[o.key] = defaults_.*o.integer;
      if (o.integer64) d[o.key] = defaults_.*o.integer64;
      if (o.number) d[o.key] = defaults_.*o.number;
      if (o.phrases) d[o.key] = defaults_.*o.phrases;
    }
    return d;
  }

 private:
  // The translator for these options, made once per distinct set and shared by every thread that asks.
  // attention: the hypotheses carry the search's attention (HTML's inline markup goes on aligned words).
  std::shared_ptr<decode::Translator> translator(const py::kwargs& kwargs, const std::string& source_lang = "",
                                                 const std::string& target_lang = "", bool attention = false) {
    config::DecodeConfig d = defaults_;
    bool nbest_given = false, scores = false;
    for (const auto& [k, v] : kwargs) {
      const std::string key = k.cast<std::string>();
      if (key == "scores") {
        if (!py::isinstance<py::bool_>(v)) throw ConfigError("scores: expected True or False");
        scores = v.cast<bool>();
        continue;
      }
      const config::DecodeOption* o = find_option(key);
      if (!o) throw ConfigError("unknown decoding option '" + key + "'; the options: " + option_names());
      nbest_given = nbest_given || o->integer == &config::DecodeConfig::nbest;
      set_option(d, *o, v);
    }
    config::fit_nbest_to_beam(d, nbest_given);
    config::validate(d);
    decode::TranslateOptions o = decode::options_from_config(d);
    o.workers = workers_;
    o.search.scores = decode::scores_wanted(scores, o.search);
    o.source_lang = source_lang;
    o.target_lang = target_lang;
    o.search.return_attention = attention;
    decode::validate(o);
    std::string key =
        source_lang + "\t" + target_lang + "\t" + std::to_string(scores) + "\t" + std::to_string(attention);
    for (const auto& opt : config::decode_options()) key += "\t" + opt.text(d);
    // The GIL is let go before the lock is taken: a thread holding it never waits for one holding the lock.
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    auto& slot = translators_[key];
    if (!slot) slot = std::make_shared<decode::Translator>(models_, *bundles_.front().tokenizer, o);
    return slot;
  }

  std::vector<int32_t> piece_ids(const tokenizer::Tokenizer& tok, const std::vector<std::string>& pieces,
                                 bool target = false) {
    const tokenizer::Model& side = target ? tok.tgt() : tok.src();
    std::call_once(target ? tgt_index_once_ : src_index_once_, [&] {
      auto& index = target ? tgt_index_ : src_index_;
      for (int32_t i = 0; i < side.vocab_size(); ++i) index.emplace(side.piece(i), i);
    });
    const auto& index = target ? tgt_index_ : src_index_;
    std::vector<int32_t> ids;
    for (const auto& p : pieces) {
      const auto it = index.find(p);
      ids.push_back(it == index.end() ? side.special_ids().unk : it->second);
    }
    return ids;
  }

  void fill(decode::Translator& t, const decode::Translation& tr, TranslationResult& r, bool alignment,
            const std::string* line, const std::vector<int32_t>* ids = nullptr) {
    r.truncated = tr.truncated;
    const tokenizer::Tokenizer& tok = t.tokenizer();
    for (size_t k = 0; k < tr.hypotheses.size(); ++k) {
      Hypothesis h;
      h.text = tr.texts[k];
      h.score = tr.hypotheses[k].score;
      h.log_prob = tr.hypotheses[k].log_prob;
      for (const int32_t id : tr.hypotheses[k].tokens) h.tokens.push_back(tok.tgt().piece(id));
      r.nbest.push_back(std::move(h));
    }
    if (!r.nbest.empty()) {
      r.text = r.nbest.front().text;
      r.score = r.nbest.front().score;
    }
    if (alignment && !tr.hypotheses.empty()) {
      const std::vector<int32_t> src = ids ? *ids : tok.src().encode(*line);
      std::lock_guard<std::mutex> lock(align_mutex_);  // (align_words runs the model's attention maps)
      r.alignment = decode::pharaoh(decode::align_words(t.model(), tok, src, tr.hypotheses.front().tokens));
    }
  }

  torch::Device device_{torch::kCPU};
  std::vector<bundle::Bundle> bundles_;
  std::vector<model::Transformer> models_;
  config::DecodeConfig defaults_;
  int workers_ = 0;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<decode::Translator>> translators_;
  std::once_flag src_index_once_, tgt_index_once_;
  std::unordered_map<std::string, int32_t> src_index_, tgt_index_;
  std::mutex align_mutex_;
};

// ---- metrics: sacreBLEU's functions and score objects --------------------------------------------------
struct MetricScore {
  eval::Score s;
  std::string str() const { return s.text; }
};

eval::References references_of(const py::handle& refs, size_t n, const char* what) {
  if (py::isinstance<py::str>(refs)) {
    throw ConfigError(std::string(what) + ": expected a list of reference sets (a list of lists of strings)");
  }
  eval::References out;
  for (const py::handle set : refs) {
    if (py::isinstance<py::str>(set)) {
      throw ConfigError(std::string(what) +
                        ": each reference set is a list of strings, one per hypothesis ([refs], not refs)");
    }
    out.push_back(set.cast<std::vector<std::string>>());
    if (out.back().size() != n) {
      throw ConfigError(std::string(what) + ": a reference set has " + std::to_string(out.back().size()) +
                        " lines for " + std::to_string(n) + " hypotheses");
    }
  }
  if (out.empty()) throw ConfigError(std::string(what) + ": no reference set");
  return out;
}

eval::BleuOptions bleu_options(const std::string& tokenize, bool lowercase, const std::string& smooth_method,
                               std::optional<double> smooth_value, bool effective_order, int max_ngram_order) {
  eval::BleuOptions o;
  o.tokenize = eval::parse_bleu_tokenizer(tokenize);
  o.lowercase = lowercase;
  if (smooth_method != "exp" && smooth_method != "floor" && smooth_method != "add-k" && smooth_method != "none") {
    throw ConfigError("smooth_method: expected exp, floor, add-k or none, not '" + smooth_method + "'");
  }
  o.smooth_method = smooth_method;
  o.smooth_value = smooth_value;
  o.effective_order = effective_order;
  if (max_ngram_order < 1 || max_ngram_order > 9) throw ConfigError("max_ngram_order: expected 1..9");
  o.max_order = max_ngram_order;
  return o;
}

MetricScore score_corpus(const eval::Metric& metric, const std::vector<std::string>& hyps,
                         const eval::References& refs) {
  py::gil_scoped_release release;
  return {eval::corpus_score(metric, hyps, refs)};
}

// ---- training: in a thread of its own; Ctrl-C (KeyboardInterrupt) stops it at an update boundary ---------
py::dict run_training(const std::optional<std::string>& config, const std::vector<std::string>& overrides,
                      const std::optional<std::string>& out, const std::optional<std::string>& resume,
                      const std::optional<std::string>& init, const std::optional<py::function>& callback) {
  train::RunRequest request;
  if (config) request.config_file = *config;
  request.overrides = overrides;
  if (out) request.out = *out;
  if (resume) request.resume = *resume;
  if (init) request.init = *init;
  if (request.config_file.empty() && request.resume.empty()) {
    throw ConfigError("train: give a config (a new run) or resume= (a run directory to continue)");
  }
  keep_freed_memory_for_reuse();
  // The trainer's messages, queued by its thread and handed to logging and the callback on this one.
  struct Shared {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<std::pair<log::Level, std::string>> messages;
    bool done = false;
    std::exception_ptr error;
    train::TrainSummary summary;
  };
  auto shared = std::make_shared<Shared>();
  log::set_sink([shared](log::Level level, std::string_view message) {
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->messages.emplace_back(level, std::string(message));
    shared->wake.notify_all();
  });
  std::thread worker([shared, request] {
    try {
      train::TrainSummary s = train::Trainer(train::resolve_run(request)).run();
      std::lock_guard<std::mutex> lock(shared->mutex);
      shared->summary = s;
    } catch (...) {
      std::lock_guard<std::mutex> lock(shared->mutex);
      shared->error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->done = true;
    shared->wake.notify_all();
  });
  bool interrupted = false;
  std::optional<py::error_already_set> callback_error;
  for (;;) {
    std::deque<std::pair<log::Level, std::string>> messages;
    bool done = false;
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(shared->mutex);
      shared->wake.wait_for(lock, std::chrono::milliseconds(100),
                            [&] { return shared->done || !shared->messages.empty(); });
      messages.swap(shared->messages);
      done = shared->done;
    }
    for (const auto& [level, text] : messages) {
      forward_log(level, text);
      if (callback && !callback_error) {
        try {
          (*callback)(py::dict(py::arg("level") = static_cast<int>(level) * 10 + 10, py::arg("message") = text));
        } catch (py::error_already_set& e) {  // stop the run as Ctrl-C does, then raise the callback's error
          callback_error = std::move(e);
          train::request_stop(SIGINT);
        }
      }
    }
    if (done) break;
    if (!interrupted && PyErr_CheckSignals() != 0) {  // KeyboardInterrupt (or another signal handler's error)
      PyErr_Clear();
      interrupted = true;
      train::request_stop(SIGINT);
    }
  }
  {
    py::gil_scoped_release release;
    worker.join();
  }
  log::set_sink(forward_log);
  if (shared->error) std::rethrow_exception(shared->error);
  if (callback_error) throw std::move(*callback_error);
  if (interrupted) {
    PyErr_SetString(PyExc_KeyboardInterrupt,
                    "training stopped at an update boundary; resume it with mtx.train(resume=run_dir)");
    throw py::error_already_set();
  }
  const train::TrainSummary& s = shared->summary;
  py::dict d;
  d["steps"] = s.steps;
  d["epoch"] = s.epoch;
  d["best_val_loss"] = s.best_val_loss;
  d["last_val_loss"] = s.last_val_loss;
  d["stop_reason"] = s.stop_reason;
  return d;
}

py::object from_json(const nlohmann::json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

}  // namespace

PYBIND11_MODULE(_mtx, m) {
  m.doc() = "mtx's C++ library (the package mtx wraps it; use that)";
  m.attr("__version__") = MTX_VERSION;
  m.attr("torch_version") = TORCH_VERSION;

  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  g_error = error.ptr();
  static py::exception<CheckpointError> checkpoint_error(m, "CheckpointError", error.ptr());
  g_checkpoint_error = checkpoint_error.ptr();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const NotFoundError& e) {
      PyErr_SetString(PyExc_FileNotFoundError, e.what());
    } catch (const CheckpointError& e) {
      PyErr_SetString(g_checkpoint_error, e.what());
    } catch (const ConfigError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const DataError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(g_error, e.what());
    } catch (const c10::Error& e) {
      PyErr_SetString(g_error, bundle::short_what(e).c_str());
    }
  });
  log::set_sink(forward_log);

  py::class_<Hypothesis>(m, "Hypothesis", "One hypothesis of a translation's n-best list.")
      .def_readonly("text", &Hypothesis::text, "the detokenized text")
      .def_readonly("score", &Hypothesis::score, "log-probability over the length penalty (the ranking score)")
      .def_readonly("log_prob", &Hypothesis::log_prob, "sum of the tokens' log-probabilities, end token included")
      .def_readonly("tokens", &Hypothesis::tokens, "the target pieces")
      .def("__repr__", [](const Hypothesis& h) {
        return "Hypothesis(text=" + std::string(py::repr(py::str(h.text))) + ", score=" + std::to_string(h.score) + ")";
      });
  py::class_<TranslationResult>(m, "TranslationResult", "A source's translation: the best hypothesis and the n-best.")
      .def_readonly("text", &TranslationResult::text, "the best hypothesis' text")
      .def_readonly("score", &TranslationResult::score, "the best hypothesis' score")
      .def_readonly("nbest", &TranslationResult::nbest, "every hypothesis kept (nbest), best first")
      .def_readonly("alignment", &TranslationResult::alignment,
                    "Pharaoh word alignment of the best hypothesis (translate(..., alignment=True)), else None")
      .def_readonly("truncated", &TranslationResult::truncated, "the source was cut to the model's maximum length")
      .def("__str__", [](const TranslationResult& r) { return r.text; })
      .def("__repr__", [](const TranslationResult& r) {
        return "TranslationResult(text=" + std::string(py::repr(py::str(r.text))) +
               ", score=" + std::to_string(r.score) + ")";
      });
  py::class_<ScoreResult>(m, "ScoreResult", "A pair's teacher-forced score (mtx score).")
      .def_readonly("log_prob", &ScoreResult::log_prob, "sum of the target tokens' log-probabilities")
      .def_readonly("tokens", &ScoreResult::tokens, "the target pieces scored, end token last")
      .def_readonly("token_log_probs", &ScoreResult::token_log_probs, "one per token")
      .def("__repr__", [](const ScoreResult& r) { return "ScoreResult(log_prob=" + std::to_string(r.log_prob) + ")"; });

  py::class_<decode::Glossary>(
      m, "Glossary",
      "A translator's glossary (mtx translate --glossary): where a sentence holds a source term "
      "as whole words, its target term takes the place of the model's words for it.")
      .def(py::init([](const py::object& entries, bool ignore_case, const std::optional<std::string>& stem) {
             const decode::Glossary::Matching matching{ignore_case, stem.value_or("")};
             if (py::isinstance<py::str>(entries) || py::hasattr(entries, "__fspath__")) {
               const std::string path = py::str(entries).cast<std::string>();
               py::gil_scoped_release release;
               return decode::Glossary::load(path, matching);
             }
             std::vector<std::pair<std::string, std::string>> pairs;
             const py::object items = py::hasattr(entries, "items") ? entries.attr("items")() : entries;
             for (const py::handle item : items) {
               const py::tuple pair = py::tuple(py::reinterpret_borrow<py::object>(item));
               if (pair.size() != 2 || !py::isinstance<py::str>(pair[0]) || !py::isinstance<py::str>(pair[1])) {
                 throw ConfigError(
                     "entries: expected a path, a dict of source -> target terms or (source, target) "
                     "pairs of strings");
               }
               pairs.emplace_back(pair[0].cast<std::string>(), pair[1].cast<std::string>());
             }
             return decode::Glossary::of(std::move(pairs), matching);
           }),
           py::arg("entries"), py::kw_only(), py::arg("ignore_case") = false, py::arg("stem") = py::none())
      .def("__len__", &decode::Glossary::size)
      .def("__repr__", [](const decode::Glossary& g) { return "Glossary(" + std::to_string(g.size()) + " entries)"; });

  py::class_<Translator>(m, "Translator")
      .def(py::init<const py::object&, const std::string&, const std::optional<std::string>&, int, int>(),
           py::arg("path"), py::arg("device") = "cpu", py::arg("quantize") = py::none(), py::arg("threads") = 0,
           py::arg("workers") = 0)
      .def("translate", &Translator::translate, py::arg("sources"), py::kw_only(), py::arg("source_lang") = py::none(),
           py::arg("target_lang") = py::none(), py::arg("target_prefix") = py::none(), py::arg("alignment") = false,
           py::arg("glossary") = py::none())
      .def("translate_text", &Translator::translate_text, py::arg("texts"), py::kw_only(), py::arg("format") = "text",
           py::arg("source_lang") = py::none(), py::arg("target_lang") = py::none(), py::arg("glossary") = py::none())
      .def(
          "translate_html",
          [](Translator& self, const py::handle& texts, const std::optional<std::string>& source_lang,
             const std::optional<std::string>& target_lang, const decode::Glossary* glossary,
             const py::kwargs& options) {
            return self.translate_text(texts, "html", source_lang, target_lang, glossary, options);
          },
          py::arg("texts"), py::kw_only(), py::arg("source_lang") = py::none(), py::arg("target_lang") = py::none(),
          py::arg("glossary") = py::none())
      .def("translate_file", &Translator::translate_file, py::arg("src"), py::arg("out"), py::kw_only(),
           py::arg("format") = py::none(), py::arg("source_lang") = py::none(), py::arg("target_lang") = py::none(),
           py::arg("glossary") = py::none())
      .def("score", &Translator::score, py::arg("sources"), py::arg("targets"), py::kw_only(),
           py::arg("batch_tokens") = 4096)
      .def("tokenize", &Translator::tokenize, py::arg("lines"))
      .def_property_readonly("languages", &Translator::languages)
      .def_property_readonly("device", &Translator::device)
      .def_property_readonly("int8", &Translator::int8)
      .def_property_readonly("defaults", &Translator::defaults);

  py::class_<MetricScore>(m, "Score", "A corpus or sentence score, as sacreBLEU's score objects.")
      .def_property_readonly("name", [](const MetricScore& s) { return s.s.name; })
      .def_property_readonly("score", [](const MetricScore& s) { return s.s.score; })
      .def_property_readonly("signature", [](const MetricScore& s) { return s.s.signature; })
      .def_property_readonly("details", [](const MetricScore& s) { return from_json(s.s.details); })
      .def("__str__", &MetricScore::str)
      .def("__repr__", &MetricScore::str)
      .def("__float__", [](const MetricScore& s) { return s.s.score; });

  m.def(
      "corpus_bleu",
      [](const std::vector<std::string>& hyps, const py::handle& refs, const std::string& tokenize, bool lowercase,
         const std::string& smooth_method, std::optional<double> smooth_value, bool use_effective_order,
         int max_ngram_order) -> MetricScore {
        const auto metric = eval::make_bleu(
            bleu_options(tokenize, lowercase, smooth_method, smooth_value, use_effective_order, max_ngram_order));
        return score_corpus(*metric, hyps, references_of(refs, hyps.size(), "references"));
      },
      py::arg("hypotheses"), py::arg("references"), py::kw_only(), py::arg("tokenize") = "13a",
      py::arg("lowercase") = false, py::arg("smooth_method") = "exp", py::arg("smooth_value") = py::none(),
      py::arg("use_effective_order") = false, py::arg("max_ngram_order") = 4);
  m.def(
      "sentence_bleu",
      [](const std::string& hyp, const std::vector<std::string>& refs, const std::string& tokenize, bool lowercase,
         const std::string& smooth_method, std::optional<double> smooth_value,
         bool use_effective_order) -> MetricScore {
        const auto metric =
            eval::make_bleu(bleu_options(tokenize, lowercase, smooth_method, smooth_value, use_effective_order, 4));
        eval::References sets;
        for (const auto& r : refs) sets.push_back({r});
        if (sets.empty()) throw ConfigError("references: no reference");
        return score_corpus(*metric, {hyp}, sets);
      },
      py::arg("hypothesis"), py::arg("references"), py::kw_only(), py::arg("tokenize") = "13a",
      py::arg("lowercase") = false, py::arg("smooth_method") = "exp", py::arg("smooth_value") = py::none(),
      py::arg("use_effective_order") = true);
  m.def(
      "corpus_chrf",
      [](const std::vector<std::string>& hyps, const py::handle& refs, int char_order, int word_order, int beta,
         bool lowercase, bool whitespace, bool eps_smoothing) -> MetricScore {
        eval::ChrfOptions o;
        o.char_order = char_order;
        o.word_order = word_order;
        o.beta = beta;
        o.lowercase = lowercase;
        o.whitespace = whitespace;
        o.eps_smoothing = eps_smoothing;
        if (char_order < 1 || word_order < 0 || beta < 1)
          throw ConfigError("chrF: char_order >= 1, word_order >= 0, beta >= 1");
        return score_corpus(*eval::make_chrf(o), hyps, references_of(refs, hyps.size(), "references"));
      },
      py::arg("hypotheses"), py::arg("references"), py::kw_only(), py::arg("char_order") = 6, py::arg("word_order") = 0,
      py::arg("beta") = 2, py::arg("lowercase") = false, py::arg("whitespace") = false,
      py::arg("eps_smoothing") = false);
  m.def(
      "corpus_ter",
      [](const std::vector<std::string>& hyps, const py::handle& refs, bool normalized, bool no_punct,
         bool asian_support, bool case_sensitive) -> MetricScore {
        eval::TerOptions o;
        o.normalized = normalized;
        o.no_punct = no_punct;
        o.asian_support = asian_support;
        o.case_sensitive = case_sensitive;
        return score_corpus(*eval::make_ter(o), hyps, references_of(refs, hyps.size(), "references"));
      },
      py::arg("hypotheses"), py::arg("references"), py::kw_only(), py::arg("normalized") = false,
      py::arg("no_punct") = false, py::arg("asian_support") = false, py::arg("case_sensitive") = false);

  m.def("train", &run_training, py::arg("config") = py::none(), py::kw_only(),
        py::arg("overrides") = std::vector<std::string>{}, py::arg("out") = py::none(), py::arg("resume") = py::none(),
        py::arg("init") = py::none(), py::arg("callback") = py::none());
  m.def(
      "load_info",
      [](const std::string& path) {
        nlohmann::json j;
        {
          py::gil_scoped_release release;
          j = train::describe_checkpoint(path);
        }
        return from_json(j);
      },
      py::arg("path"));
  // The model-file commands, as mtx import / quantize / export / average run them.
  m.def(
      "import_model",
      [](const std::string& input, const std::string& out, const std::string& source,
         const std::optional<std::string>& config, const std::string& python) {
        for (const bundle::ImportFormat& f : bundle::import_formats()) {
          if (source == f.name && f.config && !config) {
            throw ConfigError("import_model: source '" + source + "' needs config= (" + f.config + ")");
          }
        }
        py::gil_scoped_release release;
        bundle::ImportOptions options;
        options.python = python;
        if (config) options.config = *config;
        bundle::Imported imported = bundle::import_model(source, input, options);
        bundle::save_bundle(out, imported.bundle.config, *imported.bundle.tokenizer, imported.bundle.model);
        return imported.notes;
      },
      py::arg("input"), py::arg("out"), py::kw_only(), py::arg("source") = "hf", py::arg("config") = py::none(),
      py::arg("python") = "python3");
  m.def(
      "quantize",
      [](const std::string& path, const std::string& out, bool output) {
        py::gil_scoped_release release;
        bundle::Bundle b = bundle::load_bundle(path, torch::Device(torch::kCPU));
        bundle::Int8Options options;
        options.output = output;
        bundle::quantize_int8(b, options);
        bundle::save_bundle(out, b.config, *b.tokenizer, b.model);
      },
      py::arg("path"), py::arg("out"), py::kw_only(), py::arg("output") = true);
  m.def(
      "export_ct2",
      [](const std::string& path, const std::string& out, const std::optional<std::string>& quantization,
         const std::string& python, bool force) {
        py::gil_scoped_release release;
        bundle::Bundle b = bundle::load_bundle(path, torch::Device(torch::kCPU));
        bundle::Ct2ExportOptions options;
        options.python = python;
        options.quantization = quantization.value_or("");
        options.force = force;
        bundle::export_ct2(b, out, options);
      },
      py::arg("path"), py::arg("out"), py::kw_only(), py::arg("quantization") = py::none(),
      py::arg("python") = "python3", py::arg("force") = false);
  m.def(
      "average",
      [](const std::vector<std::string>& inputs, const std::string& out) {
        py::gil_scoped_release release;
        train::average_checkpoints({inputs.begin(), inputs.end()}, out);
      },
      py::arg("inputs"), py::arg("out"));
  m.def("decode_options", [] {
    py::list out;
    for (const auto& o : config::decode_options()) {
      py::dict d;
      d["name"] = o.key;
      d["type"] = o.boolean ? "bool" : o.phrases ? "list[str]" : (o.integer || o.integer64) ? "int" : "float";
      d["help"] = o.help;
      out.append(d);
    }
    return out;
  });
}
