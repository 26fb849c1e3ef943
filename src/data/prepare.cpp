#include "mtx/data/prepare.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <thread>

#include "mtx/data/batcher.h"
#include "mtx/data/corpus.h"
#include "mtx/data/stream.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/errors.h"
#include "mtx/util/hash.h"
#include "mtx/util/logging.h"
#include "mtx/util/system.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtx::data {
namespace {

// Training on nothing would loop over empty epochs: say which filter emptied the set, before any work.
void require_training_pairs(const FilterStats& f, const fs::path& src) {
  if (f.kept > 0) return;
  throw DataError(
      fmt::format("{}: no training pairs left after the length filters ({} read: {} too short, {} too "
                  "long, {} over the length ratio); loosen data.filter_min_tokens / "
                  "data.filter_max_tokens / data.filter_max_ratio",
                  src.string(), f.read, f.too_short, f.too_long, f.bad_ratio));
}

// Bump when the encoded format or the encoding rules change: old caches are then ignored.
constexpr int kCacheVersion = 1;

json file_identity(const SplitFiles& f) { return json{{"src", sha256_file(f.src)}, {"tgt", sha256_file(f.tgt)}}; }

fs::path temp_dir_beside(const fs::path& final_dir) {
  return final_dir.parent_path() / (final_dir.filename().string() + ".tmp-" + std::to_string(::getpid()));
}

// Moves a fully written temp directory into place; if another process won the race, keeps theirs.
void publish_dir(const fs::path& tmp, const fs::path& final_dir) {
  std::error_code ec;
  fs::rename(tmp, final_dir, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    if (!fs::exists(final_dir)) throw Error("cannot create cache directory '" + final_dir.string() + "'");
  }
}

tokenizer::Tokenizer obtain_tokenizer(const config::Config& cfg, const SplitFiles& train, const json& train_id,
                                      bool force, fs::path& dir, bool& reused) {
  if (!cfg.tokenizer.model_dir.empty()) {
    dir = cfg.tokenizer.model_dir;
    reused = true;
    log::info("using the tokenizer in {}", dir.string());
    return tokenizer::Tokenizer::load(dir);
  }
  json settings = config::to_json(cfg)["tokenizer"];
  settings.erase("model_dir");
  const json key_doc = {
      {"version", kCacheVersion},
      {"tokenizer", settings},
      {"train", train_id},
      {"src_lang", cfg.data.src_lang},
      {"tgt_lang", cfg.data.tgt_lang},
      {"filter", {cfg.data.filter_min_tokens, cfg.data.filter_max_tokens, cfg.data.filter_max_ratio}}};
  dir = fs::path(cfg.data.cache_dir) / ("tokenizer-" + sha256_hex(key_doc.dump()).substr(0, 16));
  if (!force && fs::exists(dir / "tokenizer.json")) {
    reused = true;
    log::info("reusing the cached tokenizer in {}", dir.string());
    return tokenizer::Tokenizer::load(dir);
  }
  reused = false;
  const LengthFilter filter{cfg.data.filter_min_tokens, cfg.data.filter_max_tokens, cfg.data.filter_max_ratio};
  const ParallelCorpus text = read_parallel(train.src, train.tgt, filter);
  require_training_pairs(text.stats, train.src);
  auto tok = tokenizer::Tokenizer::train(cfg.tokenizer, text.src, text.tgt);
  const fs::path tmp = temp_dir_beside(dir);
  fs::remove_all(tmp);
  try {
    tok.save(tmp);
    write_file_atomic(tmp / "key.json", key_doc.dump(2) + "\n");
    publish_dir(tmp, dir);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  log::info("tokenizer saved to {} (sha256 {})", dir.string(), tok.hash().substr(0, 16));
  return tok;
}

}  // namespace

SplitFiles find_split(const config::DataConfig& data, const std::string& prefix, const std::string& key) {
  SplitFiles out;
  std::vector<std::string> missing;
  for (const auto& [lang, target] : {std::pair{data.src_lang, &out.src}, std::pair{data.tgt_lang, &out.tgt}}) {
    const fs::path base = fs::path(data.dir) / (prefix + "." + lang);
    const fs::path gz = base.string() + ".gz";
    if (fs::is_regular_file(gz))
      *target = gz;
    else if (fs::is_regular_file(base))
      *target = base;
    else
      missing.push_back(gz.string());
  }
  if (!missing.empty()) {
    throw DataError(key + ": '" + missing.front() +
                    "' not found (nor without .gz); fetch Multi30k with "
                    "scripts/get_multi30k.sh " +
                    data.dir + " or set data.dir");
  }
  return out;
}

DataFiles find_data_files(const config::DataConfig& data) {
  if (!fs::is_directory(data.dir)) {
    throw DataError("data.dir: directory '" + data.dir + "' not found; fetch Multi30k with scripts/get_multi30k.sh " +
                    data.dir);
  }
  DataFiles f;
  f.train = find_split(data, data.train, "data.train");
  if (!data.valid.empty()) f.valid = find_split(data, data.valid, "data.valid");
  if (!data.test.empty()) f.test = find_split(data, data.test, "data.test");
  return f;
}

fs::path find_text_file(const config::DataConfig& data, const std::string& name, const std::string& key) {
  const fs::path plain = fs::path(data.dir) / name;
  const fs::path gz = plain.string() + ".gz";
  if (fs::is_regular_file(plain)) return plain;
  if (fs::is_regular_file(gz)) return gz;
  throw DataError(key + ": '" + plain.string() +
                  "' not found (nor with .gz); fetch WikiText-2 with "
                  "scripts/get_wikitext2.sh " +
                  data.dir + ", or point data.dir and " + key + " at any text file");
}

PreparedStreams prepare_streams(const config::Config& cfg, const PrepareOptions& options) {
  const auto& d = cfg.data;
  // Every file is looked for before any work starts.
  const fs::path train = find_text_file(d, d.train, "data.train");
  std::optional<fs::path> valid, test;
  if (!d.valid.empty()) valid = find_text_file(d, d.valid, "data.valid");
  if (!d.test.empty()) test = find_text_file(d, d.test, "data.test");
  const std::vector<std::string> train_lines = read_lines(train);
  std::optional<tokenizer::Tokenizer> tok = options.tokenizer;
  if (!tok && !cfg.tokenizer.model_dir.empty()) {
    log::info("using the tokenizer in {}", cfg.tokenizer.model_dir);
    tok = tokenizer::Tokenizer::load(cfg.tokenizer.model_dir);
  }
  if (!tok) tok = tokenizer::Tokenizer::train(cfg.tokenizer, {}, train_lines);
  PreparedStreams out{*tok, data::encode_stream(tok->tgt(), train_lines), std::nullopt, std::nullopt};
  if (valid) out.valid = data::encode_stream(tok->tgt(), read_lines(*valid));
  if (test) out.test = data::encode_stream(tok->tgt(), read_lines(*test));
  log::info("token streams: train {} ({}), valid {}, test {}", out.train.size(), train.string(),
            out.valid ? std::to_string(out.valid->size()) : "-", out.test ? std::to_string(out.test->size()) : "-");
  return out;
}

EncodedCorpus encode_corpus(const tokenizer::Tokenizer& tok, const ParallelCorpus& text, int max_len, int threads) {
  const size_t n = text.size();
  const size_t limit = size_t(std::max(1, max_len - 1));
  std::vector<std::vector<int32_t>> src(n), tgt(n);
  const size_t workers = std::min<size_t>(size_t(resolve_threads(threads)), std::max<size_t>(1, n / 256));
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(workers);
  for (size_t w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      try {
        for (size_t i = w; i < n; i += workers) {
          tok.src().encode(text.src[i], src[i]);
          tok.tgt().encode(text.tgt[i], tgt[i]);
        }
      } catch (...) {
        errors[w] = std::current_exception();
      }
    });
  }
  for (auto& t : pool) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  EncodedCorpus out;
  size_t s_tokens = 0, t_tokens = 0;
  for (size_t i = 0; i < n; ++i) {
    s_tokens += src[i].size();
    t_tokens += tgt[i].size();
  }
  out.src.reserve(n, s_tokens);
  out.tgt.reserve(n, t_tokens);
  for (size_t i = 0; i < n; ++i) {
    if (src[i].size() > limit || tgt[i].size() > limit) ++out.truncated;
    out.src.push_back(src[i].data(), std::min(src[i].size(), limit));
    out.tgt.push_back(tgt[i].data(), std::min(tgt[i].size(), limit));
  }
  return out;
}

PreparedData prepare_data(const config::Config& cfg, const PrepareOptions& options) {
  const int threads = resolve_threads(options.threads);
  const DataFiles files = find_data_files(cfg.data);
  const json train_id = file_identity(files.train);

  fs::path tok_dir;
  bool tok_reused = true;
  tokenizer::Tokenizer tok = options.tokenizer
                                 ? *options.tokenizer
                                 : obtain_tokenizer(cfg, files.train, train_id, options.force, tok_dir, tok_reused);

  const json key_doc = {{"version", kCacheVersion},
                        {"tokenizer", tok.hash()},
                        {"train", train_id},
                        {"valid", files.valid ? file_identity(*files.valid) : json()},
                        {"test", files.test ? file_identity(*files.test) : json()},
                        {"filter", {cfg.data.filter_min_tokens, cfg.data.filter_max_tokens, cfg.data.filter_max_ratio}},
                        {"max_len", cfg.model.max_len}};
  const fs::path dir = fs::path(cfg.data.cache_dir) / ("corpus-" + sha256_hex(key_doc.dump()).substr(0, 16));

  PreparedData out{tok, tok_dir, dir, {}, std::nullopt, std::nullopt, {}, tok_reused, false};
  if (!options.force && fs::exists(dir / "prepare.json")) {
    const json meta = json::parse(read_file(dir / "prepare.json"));
    out.train = load_corpus(dir / "train.bin");
    if (files.valid) out.valid = load_corpus(dir / "valid.bin");
    if (files.test) out.test = load_corpus(dir / "test.bin");
    const json& f = meta.at("filter");
    out.filter = {f.at("read"), f.at("kept"), f.at("too_short"), f.at("too_long"), f.at("bad_ratio")};
    out.corpus_reused = true;
    log::info("reusing the cached encoded corpus in {}", dir.string());
    return out;
  }

  const LengthFilter filter{cfg.data.filter_min_tokens, cfg.data.filter_max_tokens, cfg.data.filter_max_ratio};
  const fs::path tmp = temp_dir_beside(dir);
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    const ParallelCorpus train_text = read_parallel(files.train.src, files.train.tgt, filter);
    require_training_pairs(train_text.stats, files.train.src);
    out.filter = train_text.stats;
    out.train = encode_corpus(tok, train_text, cfg.model.max_len, threads);
    save_corpus(out.train, tmp / "train.bin");
    json counts = {{"train", out.train.size()}};
    if (files.valid) {
      out.valid = encode_corpus(tok, read_parallel(files.valid->src, files.valid->tgt), cfg.model.max_len, threads);
      save_corpus(*out.valid, tmp / "valid.bin");
      counts["valid"] = out.valid->size();
    }
    if (files.test) {
      out.test = encode_corpus(tok, read_parallel(files.test->src, files.test->tgt), cfg.model.max_len, threads);
      save_corpus(*out.test, tmp / "test.bin");
      counts["test"] = out.test->size();
    }
    const json meta = {{"key", key_doc},
                       {"counts", counts},
                       {"filter",
                        {{"read", out.filter.read},
                         {"kept", out.filter.kept},
                         {"too_short", out.filter.too_short},
                         {"too_long", out.filter.too_long},
                         {"bad_ratio", out.filter.bad_ratio}}},
                       {"tokenizer_dir", tok_dir.string()}};
    config::write_resolved(cfg, tmp / "config.json");
    write_file_atomic(tmp / "prepare.json", meta.dump(2) + "\n");  // last: marks the cache complete
    publish_dir(tmp, dir);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  log::info("encoded corpus saved to {}", dir.string());
  return out;
}

}  // namespace mtx::data
