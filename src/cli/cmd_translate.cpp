// mtx translate: German in, English out (or whatever the checkpoint was trained on). Reads stdin (or
// --input), writes stdout (or --output), streaming in chunks; the checkpoint carries its own tokenizer.
#include <fcntl.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "mtx/bundle/bundle.h"
#include "mtx/decode/stream.h"
#include "mtx/decode/text.h"
#include "mtx/decode/translator.h"
#include "mtx/doc/document.h"
#include "mtx/util/device.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"
#include "mtx/util/system.h"

namespace mtx::cli {

struct TranslateArgs {
  std::vector<std::string> ckpts;  // several: an ensemble
  DecodeFlags decode;              // unset: the checkpoint's decode section decides
  int workers = 0;
  bool scores = false;
  bool language_columns = false;
  std::string align;  // "" | "hard" | "soft"
  int align_layer = -1;
  std::string device = "auto";
  int threads = 0;
  int chunk_lines = 2000;
  std::string input, output;
  std::string format;  // lines (the default) | text | html | a document format (doc/document.h)
  std::shared_ptr<ControlFlags> controls = std::make_shared<ControlFlags>();  // --target-prefix, --constraints, ...
  QuantizeArgs quantize;
};

namespace {

// --format text or html: paragraphs (or an HTML document) through the text layer, read as bytes so that the
// output ends as the input does. Text is translated in chunks of about chunk_lines lines that end at a blank
// line, so memory stays bounded and a paragraph is never split; HTML is one document.
decode::StreamStats translate_text_stream(decode::Translator& translator, int fd, std::ostream& out,
                                          text::Format format, int chunk_lines, const std::string& src_lang,
                                          const decode::Glossary* glossary) {
  const text::Segmenter segmenter(src_lang);
  decode::StreamStats stats;
  const auto start = std::chrono::steady_clock::now();
  std::string buffer;
  auto translate = [&](size_t end) {
    if (end == 0) return;
    const std::string text = buffer.substr(0, end);
    buffer.erase(0, end);
    stats.lines += int64_t(std::count(text.begin(), text.end(), '\n'));
    out << decode::translate_texts(translator, {text}, format, segmenter, {}, glossary).front();
    out.flush();
  };
  std::vector<char> block(size_t(1) << 16);
  for (;;) {
    const ssize_t n = ::read(fd, block.data(), block.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw DataError(std::string("cannot read the input: ") + std::strerror(errno));
    if (n == 0) break;
    buffer.append(block.data(), size_t(n));
    while (format == text::Format::text) {  // whole paragraphs past chunk_lines lines
      size_t at = 0;
      for (int lines = 0; lines < chunk_lines && at != std::string::npos; ++lines) {
        at = buffer.find('\n', at == 0 ? 0 : at + 1);
      }
      const size_t blank = at == std::string::npos ? at : buffer.find("\n\n", at);
      if (blank == std::string::npos) break;
      translate(blank + 1);
    }
  }
  translate(buffer.size());
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

// The document format --format or --input's extension names, if any: an explicit lines, text or html, and an
// input without a document's extension (.txt included), are read as a stream.
std::optional<doc::Format> document_format(const TranslateArgs& args) {
  if (args.format == "lines" || args.format == "text" || args.format == "html") return std::nullopt;
  if (!args.format.empty()) return doc::parse_format(args.format, "--format");
  if (args.input.empty()) return std::nullopt;
  return doc::document_of_path(args.input);
}

// A document read whole, translated with its formatting, and written whole.
void translate_document_file(decode::Translator& translator, int fd, std::ostream& out, doc::Format format,
                             const std::string& name, const std::string& src_lang, const decode::Glossary* glossary) {
  std::string bytes;
  std::vector<char> block(size_t(1) << 16);
  for (;;) {
    const ssize_t n = ::read(fd, block.data(), block.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw DataError(name + ": cannot read: " + std::strerror(errno));
    if (n == 0) break;
    bytes.append(block.data(), size_t(n));
  }
  const text::Segmenter segmenter(src_lang);
  const auto start = std::chrono::steady_clock::now();
  const doc::Translate translate = [&](const std::vector<std::string>& texts, text::Format f) {
    return decode::translate_texts(translator, texts, f, segmenter, {}, glossary);
  };
  const doc::Progress progress = [&](size_t done, size_t total) {
    if (done < total || total > 1) log::info("{}: {} of {} paragraphs translated", name, done, total);
  };
  out << doc::translate_document(bytes, format, name, translate, {}, progress);
  out.flush();
  log::info("{} ({}) translated in {:.2f} s", name, doc::info(format).name,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

int run_translate(const TranslateArgs& args) {
  const std::optional<doc::Format> document = document_format(args);
  const std::string format = document ? doc::info(*document).name : args.format.empty() ? "lines" : args.format;
  if (document && (!args.align.empty() || args.scores || args.language_columns)) {
    throw ConfigError("a " + format + " document is written as it came in: --align, --scores and --language-columns " +
                      "need --format lines");
  }
  if (format != "lines" && args.controls->line_aligned()) {
    throw ConfigError("--target-prefix and --constraints steer one sentence a line: they need --format lines (" +
                      format + " is not read a sentence a line; --glossary works with every format)");
  }
  const torch::Device device = select_device(parse_device(inference_device(args.device, args.quantize)), "--device");

  // Check the files before loading anything.
  int input_fd = STDIN_FILENO;
  if (!args.input.empty()) {
    input_fd = ::open(args.input.c_str(), O_RDONLY | O_CLOEXEC);
    if (input_fd < 0) throw DataError("--input: cannot read '" + args.input + "': " + std::strerror(errno));
  }
  struct CloseFd {
    int fd;
    ~CloseFd() {
      if (fd != STDIN_FILENO) ::close(fd);
    }
  } close_input{input_fd};
  const TranslationModels loaded = load_translation_models(args.ckpts, device, args.quantize);
  const bundle::Bundle& first = loaded.bundles.front();
  set_threads(args.threads);  // after the input and the model are known good: an error there stays one line
  decode::TranslateOptions options = decode::options_from_config(args.decode.apply(first.config.decode));
  options.workers = args.workers;
  options.search.scores = decode::scores_wanted(args.scores, options.search);  // read in the n-best format
  options.search.return_attention = format != "lines" && format != "text";     // inline markup goes on aligned words
  decode::validate(options);
  std::string resolved;  // every decoding option as it applies, for the log: a run can be repeated from it
  for (const auto& o : config::decode_options())
    resolved += (resolved.empty() ? "" : ", ") + std::string("\"") + o.key + "\": " + o.text(options.search);
  log::info("decoding options: {{{}}}", resolved);

  std::ofstream output_file;
  if (!args.output.empty()) {
    output_file.open(args.output, std::ios::binary | std::ios::trunc);
    if (!output_file) throw DataError("--output: cannot write '" + args.output + "'");
  }
  std::ostream& out = args.output.empty() ? std::cout : output_file;
  std::unique_ptr<decode::LineSource> in = decode::fd_line_source(input_fd);
  std::string with;
  for (const auto& ckpt : loaded.bundles)
    with += (with.empty() ? "" : " + ") + ckpt.path.string() + " (weights " + ckpt.weights_sha256.substr(0, 12) + ")";
  log::info("translating with {}{}{}, beam {}, alpha {}, on {}{}", loaded.bundles.size() > 1 ? "an ensemble of " : "",
            with, first.model->is_int8() ? ", int8 on " + model::int8::engine() : "", options.search.beam,
            options.search.alpha, device.str(),
            options.workers == 1  ? ", one search on every thread"
            : options.workers > 1 ? ", " + std::to_string(options.workers) + " searches at once"
                                  : ", one search per thread");
  args.controls->apply(options);
  decode::Translator translator(loaded.models, *first.tokenizer, options);
  decode::StreamOptions stream;
  stream.chunk_lines = args.chunk_lines;
  stream.nbest_format = args.scores || options.search.nbest > 1;
  stream.align = args.align;
  stream.align_layer = args.align_layer;
  stream.language_columns = args.language_columns;
  args.controls->open(stream);
  // Developer aid, as in training: MTX_PROFILE=FILE records the run with torch's profiler.
  std::unique_ptr<torch::autograd::profiler::RecordProfile> profile;
  if (const char* p = std::getenv("MTX_PROFILE"); p && *p) {
    profile = std::make_unique<torch::autograd::profiler::RecordProfile>(std::string(p));
  }
  const std::string src_lang = options.source_lang.empty() ? first.config.data.src_lang : options.source_lang;
  if (document) {
    translate_document_file(translator, input_fd, out, *document, args.input.empty() ? "stdin" : args.input, src_lang,
                            stream.glossary);
    return 0;
  }
  const decode::StreamStats s =
      format == "lines" ? decode::translate_stream(translator, *in, out, stream)
                        : translate_text_stream(translator, input_fd, out, text::parse_format(format, "--format"),
                                                args.chunk_lines, src_lang, stream.glossary);
  profile.reset();

  if (format != "lines") {
    log::info("{} lines of {} in {:.2f} s", s.lines, format, s.seconds);
  } else {
    log::info("{} lines in {:.2f} s: {:.1f} sentences/s, {:.0f} generated tokens/s", s.lines, s.seconds,
              s.seconds > 0 ? double(s.translated) / s.seconds : 0.0,
              s.seconds > 0 ? double(s.generated_tokens) / s.seconds : 0.0);
  }
  if (s.chunk_seconds.size() >= 2) {
    std::vector<double> t = s.chunk_seconds;
    std::sort(t.begin(), t.end());
    auto pct = [&](double q) { return 1000 * t[std::min(t.size() - 1, size_t(q * double(t.size())))]; };
    log::info("per chunk of up to {} lines: p50 {:.1f} ms, p95 {:.1f} ms over {} chunks", args.chunk_lines, pct(0.5),
              pct(0.95), t.size());
  }
  if (s.truncated > 0) {
    log::warn("{} line(s) were longer than {} source tokens and were cut", s.truncated, translator.max_source_tokens());
  }
  if (s.invalid_utf8 > 0) {
    throw Error(std::to_string(s.invalid_utf8) +
                " input line(s) were not valid UTF-8 (see the line numbers above); "
                "their translations were left empty");
  }
  return 0;
}

}  // namespace

Command add_translate(CLI::App& app) {
  auto args = std::make_shared<TranslateArgs>();
  auto* cmd = app.add_subcommand("translate", "Translate lines (stdin or --input) with beam search, streaming");
  cmd->add_option("--ckpt", args->ckpts,
                  "Checkpoint to translate with (carries its tokenizer); repeat for an ensemble: the models' "
                  "log-probabilities averaged at each step (they must share one tokenizer)")
      ->required()
      ->check(CLI::ExistingFile);
  args->decode.add(*cmd);
  auto* align =
      cmd->add_option("--align", args->align,
                      "Word alignments after ` ||| `: hard (Pharaoh pairs src-tgt, the default for a bare --align) or "
                      "soft (per target word, its source probabilities)")
          ->expected(0, 1)
          ->check(CLI::IsMember({"hard", "soft"}));
  cmd->add_option("--align-layer", args->align_layer,
                  "Decoder layer the alignments come from (negative: from the last; default -1, the last)");
  cmd->add_flag("--scores", args->scores, "Write `index ||| hypothesis ||| score` lines even for one hypothesis");
  cmd->add_flag("--language-columns", args->language_columns,
                "Each input line is SOURCE_LANG<TAB>TARGET_LANG<TAB>text: a multilingual model's languages per line");
  cmd->add_option("--device", args->device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--threads", args->threads, "CPU threads (0 = one per core)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--workers", args->workers,
                  "Searches at once on the CPU, one thread each, like CTranslate2's inter_threads (0: one per thread; "
                  "1: one search on every thread); same translations")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--chunk-lines", args->chunk_lines, "Lines read and translated together (bounds memory)")
      ->check(CLI::PositiveNumber);
  add_quantize_flags(*cmd, args->quantize);
  args->controls->add(*cmd);
  std::vector<std::string> formats{"lines", "text", "html"};
  std::string documents;
  for (const doc::FormatInfo& f : doc::formats()) {
    if (std::find(formats.begin(), formats.end(), f.name) == formats.end()) formats.push_back(f.name);
    documents += (documents.empty() ? "" : ", ") + f.name;
  }
  cmd->add_option("--format", args->format,
                  "lines: one sentence per line, in and out (the default); text: paragraphs, split into sentences "
                  "and put back with their spaces, line breaks and blank lines; html: an HTML document or fragment, "
                  "its inline markup placed on the aligned words; a document (" +
                      documents +
                      "): the file translated with its formatting (the default for --input with one of their "
                      "extensions, .txt aside)")
      ->check(CLI::IsMember(formats));
  cmd->add_option("--input", args->input,
                  "Read this file instead of stdin; a document's extension (.docx, .pptx, .odt, .odp, .srt, .vtt, "
                  ".html) translates it as that document");
  cmd->add_option("--output", args->output, "Write this file instead of stdout");
  return {cmd, [args, align] {
            if (align->count() > 0 && args->align.empty()) args->align = "hard";  // a bare --align
            if (!args->format.empty() && args->format != "lines" &&
                (!args->align.empty() || args->scores || args->language_columns)) {
              throw ConfigError("--format " + args->format +
                                " writes text as it came in: --align, --scores and --language-columns need "
                                "--format lines");
            }
            return run_translate(*args);
          }};
}

}  // namespace mtx::cli
