#include "mtx/data/prepare.h"

#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <future>
#include <numeric>
#include <thread>

#include "mtx/data/batch_sampler.h"
#include "mtx/data/corpus.h"
#include "mtx/data/lm_text.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/errors.h"
#include "mtx/util/hash.h"
#include "mtx/util/logging.h"
#include "mtx/util/random.h"
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
constexpr int kCacheVersion = 2;

// Pairs read and encoded at a time; kShardPairs is a whole number of them, so shards end on chunk boundaries.
constexpr size_t kChunkPairs = size_t(1) << 16;
static_assert(kShardPairs % kChunkPairs == 0, "a shard holds whole chunks");

// A sample of a file's bytes: 16 blocks of 4 KiB spread over it, hashed. With the size, the modification time and
// the inode it tells a file changed without reading it all.
std::string sampled_blocks(const fs::path& path, uint64_t size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot read '" + path.string() + "'");
  constexpr uint64_t kBlock = 4096, kBlocks = 16;
  Sha256 h;
  std::vector<char> buf(kBlock);
  for (uint64_t b = 0; b < kBlocks; ++b) {
    const uint64_t at = size > kBlock ? (size - kBlock) * b / (kBlocks - 1) : 0;
    in.seekg(std::streamoff(at));
    in.read(buf.data(), std::streamsize(kBlock));
    h.update(buf.data(), size_t(in.gcount()));
    in.clear();
  }
  return h.hex();
}

// A file's sha256, re-read only when it may have changed: the digest is stored under <cache>/digests with the
// file's size, modification time, inode and sampled blocks, and reused while they all match (force: re-hash).
std::string file_digest(const fs::path& path, const fs::path& cache_dir, bool force) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw DataError("cannot read '" + path.string() + "'");
  const std::string abs = fs::absolute(path).lexically_normal().string();
  const json stamp = {{"path", abs},
                      {"size", uint64_t(st.st_size)},
                      {"mtime_ns", int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec},
                      {"inode", uint64_t(st.st_ino)},
                      {"sampled", sampled_blocks(path, uint64_t(st.st_size))}};
  const fs::path record = cache_dir / "digests" / (sha256_hex(abs).substr(0, 16) + ".json");
  if (!force && fs::exists(record)) {
    try {
      json stored = json::parse(read_file(record));
      const std::string digest = stored.at("sha256");
      stored.erase("sha256");
      if (stored == stamp) return digest;
    } catch (const std::exception&) {
      // An unreadable record is re-done below.
    }
  }
  log::info("hashing {} ({:.1f} MB)", path.string(), double(st.st_size) / 1e6);
  json stored = stamp;
  stored["sha256"] = sha256_file(path);
  fs::create_directories(record.parent_path());
  write_file_atomic(record, stored.dump(2) + "\n");
  return stored["sha256"];
}

json file_identity(const SplitFiles& f, const fs::path& cache_dir, bool force) {
  return json{{"src", file_digest(f.src, cache_dir, force)}, {"tgt", file_digest(f.tgt, cache_dir, force)}};
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

ParallelCorpus sample_pairs(const SplitFiles& train, const LengthFilter& filter, int64_t k, int64_t seed,
                            int64_t max_bytes) {
  PairReader reader(train.src, train.tgt, filter);
  const uint64_t limit = k > 0 ? uint64_t(k) : UINT64_MAX;
  ParallelCorpus out;
  std::vector<uint64_t> at;  // each kept pair's place in the split
  Rng rng = Rng::from({uint64_t(seed), 0x73616d706c65ull});
  std::string s, t;
  for (uint64_t n = 0; reader.next(s, t); ++n) {
    if (n < limit) {
      out.src.push_back(std::move(s));
      out.tgt.push_back(std::move(t));
      at.push_back(n);
    } else if (const uint64_t j = rng.below(n + 1); j < limit) {
      out.src[j] = std::move(s);
      out.tgt[j] = std::move(t);
      at[j] = n;
    }
  }
  out.stats = reader.stats();
  // Which of the reservoir's pairs stay: all, or under a byte budget those first in a seeded shuffle while their
  // bytes fit (a uniform sample of the reservoir, bounded however long its sentences).
  std::vector<size_t> keep(at.size());
  std::iota(keep.begin(), keep.end(), size_t(0));
  uint64_t bytes = 0;
  for (size_t i = 0; i < keep.size(); ++i) bytes += out.src[i].size() + out.tgt[i].size();
  if (max_bytes > 0 && bytes > uint64_t(max_bytes)) {
    Rng order = Rng::from({uint64_t(seed), 0x6279746573ull});
    for (size_t i = keep.size(); i > 1; --i) std::swap(keep[i - 1], keep[order.below(i)]);
    size_t n = 0;
    for (bytes = 0; n < keep.size(); ++n) {
      const uint64_t b = out.src[keep[n]].size() + out.tgt[keep[n]].size();
      if (n > 0 && bytes + b > uint64_t(max_bytes)) break;  // one pair at least, however long
      bytes += b;
    }
    keep.resize(n);
  } else if (out.stats.kept <= limit) {
    return out;  // the whole split, in file order
  }
  std::sort(keep.begin(), keep.end(), [&](size_t a, size_t b) { return at[a] < at[b]; });
  ParallelCorpus sorted;
  sorted.src.reserve(keep.size());
  sorted.tgt.reserve(keep.size());
  for (size_t i : keep) {
    sorted.src.push_back(std::move(out.src[i]));
    sorted.tgt.push_back(std::move(out.tgt[i]));
  }
  sorted.stats = out.stats;
  return sorted;
}

namespace {

// A multilingual model's language-code tokens for the pair (data.src_code, data.tgt_code); -1 for none.
struct Codes {
  int32_t src = -1, tgt = -1;
};

Codes pair_codes(const config::DataConfig& d, const tokenizer::Tokenizer& tok) {
  const tokenizer::Languages& languages = tok.languages();
  if (languages.empty()) {
    if (!d.src_code.empty() || !d.tgt_code.empty()) {
      throw ConfigError(
          "data.src_code/data.tgt_code: this tokenizer has no language codes (its model translates one "
          "pair): leave them out");
    }
    return {};
  }
  if (d.src_code.empty() || d.tgt_code.empty()) {
    throw ConfigError("this tokenizer's model translates between " + std::to_string(languages.size()) +
                      " languages: name the pair's with data.src_code and data.tgt_code (e.g. --set data.src_code=" +
                      languages.front().first + "; mtx info --ckpt lists them)");
  }
  if (tok.code_after_eos()) {
    throw ConfigError(
        "this tokenizer puts the source's language code after </s> (NLLB's legacy layout), which mtx "
        "does not train: import the model with legacy_behaviour false in its tokenizer_config.json");
  }
  return {tokenizer::language_id(languages, d.src_code, "data.src_code"),
          tokenizer::language_id(languages, d.tgt_code, "data.tgt_code")};
}

// Encodes pairs [0, n) of src/tgt with `threads` workers (contiguous ranges) and appends them to `out` in order,
// each sequence cut to `limit` ids; a pair's language codes (if any) go first on each side.
void encode_into(const tokenizer::Tokenizer& tok, const Codes& codes, const std::vector<std::string>& src,
                 const std::vector<std::string>& tgt, size_t n, size_t limit, int threads, EncodedCorpus& out) {
  const size_t workers = std::min<size_t>(size_t(std::max(1, threads)), std::max<size_t>(1, n / 256));
  std::vector<EncodedCorpus> parts(workers);
  std::vector<std::exception_ptr> errors(workers);
  auto encode_range = [&](size_t w) {
    try {
      EncodedCorpus& part = parts[w];
      std::vector<int32_t> s, t;
      for (size_t i = n * w / workers; i < n * (w + 1) / workers; ++i) {
        tok.src().encode(src[i], s);
        tok.tgt().encode(tgt[i], t);
        if (codes.src >= 0) s.insert(s.begin(), codes.src);
        if (codes.tgt >= 0) t.insert(t.begin(), codes.tgt);
        if (s.size() > limit || t.size() > limit) ++part.truncated;
        part.src.push_back(s.data(), std::min(s.size(), limit));
        part.tgt.push_back(t.data(), std::min(t.size(), limit));
      }
    } catch (...) {
      errors[w] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (size_t w = 1; w < workers; ++w) pool.emplace_back(encode_range, w);
  encode_range(0);
  for (auto& th : pool) th.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  for (const EncodedCorpus& part : parts) {
    out.src.append(part.src);
    out.tgt.append(part.tgt);
    out.truncated += part.truncated;
  }
}

struct EncodedSplit {
  std::vector<std::string> shards;  // file names in the directory, in order
  FilterStats stats;
  size_t pairs = 0;
};

// Streams one split through the filter and the tokenizer into shard files <dir>/<name>.<k>.bin: a chunk is read
// while the one before it is encoded, and memory holds one shard at most, however long the split.
EncodedSplit encode_split(const tokenizer::Tokenizer& tok, const Codes& codes, const SplitFiles& files,
                          const LengthFilter& filter, int max_len, int threads, const fs::path& dir,
                          const std::string& name) {
  PairReader reader(files.src, files.tgt, filter);
  const size_t limit = size_t(std::max(1, max_len - 1));
  auto read_chunk = [&reader](std::vector<std::string>& s, std::vector<std::string>& t) {
    size_t n = 0;
    s.resize(kChunkPairs);
    t.resize(kChunkPairs);
    while (n < kChunkPairs && reader.next(s[n], t[n])) ++n;
    return n;
  };
  EncodedSplit out;
  EncodedCorpus shard;
  auto flush = [&] {
    const std::string file = fmt::format("{}.{:05d}.bin", name, out.shards.size());
    save_corpus(shard, dir / file);
    out.shards.push_back(file);
    shard = EncodedCorpus();
  };
  std::vector<std::string> src[2], tgt[2];
  size_t n = read_chunk(src[0], tgt[0]);
  for (int cur = 0; n > 0; cur ^= 1) {
    std::future<size_t> ahead =
        std::async(std::launch::async, read_chunk, std::ref(src[cur ^ 1]), std::ref(tgt[cur ^ 1]));
    try {
      encode_into(tok, codes, src[cur], tgt[cur], n, limit, threads, shard);
    } catch (...) {
      ahead.wait();
      throw;
    }
    out.pairs += n;
    if (shard.size() == kShardPairs) flush();
    n = ahead.get();
  }
  if (shard.size() > 0 || out.shards.empty()) flush();
  out.stats = reader.stats();
  return out;
}

EncodedCorpus load_split(const fs::path& dir, const json& names) {
  std::vector<fs::path> paths;
  for (const auto& n : names) paths.push_back(dir / n.get<std::string>());
  return load_corpus(paths);
}

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
  const auto start = std::chrono::steady_clock::now();
  const LengthFilter filter{cfg.data.filter_min_tokens, cfg.data.filter_max_tokens, cfg.data.filter_max_ratio};
  const auto& t = cfg.tokenizer;
  // Both bounds are per model: a joint model reads both sentences of a pair, a separate one each side's.
  const int64_t pairs = t.joint ? (t.sample_sentences + 1) / 2 : t.sample_sentences;
  const int64_t bytes = t.sample_mb * 1000000 * (t.joint ? 1 : 2);
  ParallelCorpus text = sample_pairs(train, filter, pairs, t.sample_seed, bytes);
  require_training_pairs(text.stats, train.src);
  const char* bound = ", bounded by sample_sentences";
  if (text.size() == text.stats.kept) {
    bound = ": all of them";
  } else if (pairs <= 0 || int64_t(text.size()) < pairs) {
    bound = ", bounded by sample_mb";
  }
  log::info("tokenizer sample: {} of {} training pairs{} (tokenizer.sample_sentences {}, sample_mb {}, seed {})",
            text.size(), text.stats.kept, bound, t.sample_sentences, t.sample_mb, t.sample_seed);
  auto tok = tokenizer::Tokenizer::train(cfg.tokenizer, std::move(text.src), std::move(text.tgt));
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
  log::info("tokenizer saved to {} (sha256 {}; sampled and trained in {:.1f} s, peak RSS {:.0f} MB)", dir.string(),
            tok.hash().substr(0, 16), seconds_since(start), double(peak_rss_bytes()) / 1e6);
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

PreparedLmText prepare_lm_text(const config::Config& cfg, const PrepareOptions& options) {
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
  PreparedLmText out{*tok, data::encode_lm_text(tok->tgt(), train_lines), std::nullopt, std::nullopt};
  if (valid) out.valid = data::encode_lm_text(tok->tgt(), read_lines(*valid));
  if (test) out.test = data::encode_lm_text(tok->tgt(), read_lines(*test));
  log::info("token sequences: train {} ({}), valid {}, test {}", out.train.size(), train.string(),
            out.valid ? std::to_string(out.valid->size()) : "-", out.test ? std::to_string(out.test->size()) : "-");
  return out;
}

EncodedCorpus encode_corpus(const tokenizer::Tokenizer& tok, const ParallelCorpus& text, int max_len, int threads) {
  EncodedCorpus out;
  encode_into(tok, Codes{}, text.src, text.tgt, text.size(), size_t(std::max(1, max_len - 1)), resolve_threads(threads),
              out);
  return out;
}

PreparedData prepare_data(const config::Config& cfg, const PrepareOptions& options) {
  const int threads = resolve_threads(options.threads);
  const DataFiles files = find_data_files(cfg.data);
  const fs::path cache_dir = cfg.data.cache_dir;
  const json train_id = file_identity(files.train, cache_dir, options.force);

  fs::path tok_dir;
  bool tok_reused = true;
  tokenizer::Tokenizer tok = options.tokenizer
                                 ? *options.tokenizer
                                 : obtain_tokenizer(cfg, files.train, train_id, options.force, tok_dir, tok_reused);

  json key_doc = {{"version", kCacheVersion},
                  {"tokenizer", tok.hash()},
                  {"train", train_id},
                  {"valid", files.valid ? file_identity(*files.valid, cache_dir, options.force) : json()},
                  {"test", files.test ? file_identity(*files.test, cache_dir, options.force) : json()},
                  {"filter", {cfg.data.filter_min_tokens, cfg.data.filter_max_tokens, cfg.data.filter_max_ratio}},
                  {"max_len", cfg.model.max_len}};
  const Codes codes = pair_codes(cfg.data, tok);
  if (codes.src >= 0) key_doc["codes"] = {codes.src, codes.tgt};  // (absent otherwise: older caches stay valid)
  const fs::path dir = cache_dir / ("corpus-" + sha256_hex(key_doc.dump()).substr(0, 16));

  PreparedData out{tok, tok_dir, dir, {}, std::nullopt, std::nullopt, {}, tok_reused, false};
  auto load = [&](const json& meta) {
    const json& shards = meta.at("shards");
    out.train = load_split(dir, shards.at("train"));
    if (files.valid) out.valid = load_split(dir, shards.at("valid"));
    if (files.test) out.test = load_split(dir, shards.at("test"));
    const json& f = meta.at("filter");
    out.filter = {f.at("read"), f.at("kept"), f.at("too_short"), f.at("too_long"), f.at("bad_ratio")};
  };
  if (!options.force && fs::exists(dir / "prepare.json")) {
    json meta;
    try {
      meta = json::parse(read_file(dir / "prepare.json"));
    } catch (const json::exception& e) {
      throw DataError((dir / "prepare.json").string() + ": " + e.what() +
                      "; delete the directory or run `mtx prepare --force`");
    }
    load(meta);
    out.corpus_reused = true;
    log::info("reusing the cached encoded corpus in {}", dir.string());
    return out;
  }

  const auto start = std::chrono::steady_clock::now();
  const LengthFilter filter{cfg.data.filter_min_tokens, cfg.data.filter_max_tokens, cfg.data.filter_max_ratio};
  const fs::path tmp = temp_dir_beside(dir);
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  json meta;
  try {
    const EncodedSplit train = encode_split(tok, codes, files.train, filter, cfg.model.max_len, threads, tmp, "train");
    require_training_pairs(train.stats, files.train.src);
    json counts = {{"train", train.pairs}}, shards = {{"train", train.shards}};
    if (files.valid) {
      const EncodedSplit valid = encode_split(tok, codes, *files.valid, {}, cfg.model.max_len, threads, tmp, "valid");
      counts["valid"] = valid.pairs;
      shards["valid"] = valid.shards;
    }
    if (files.test) {
      const EncodedSplit test = encode_split(tok, codes, *files.test, {}, cfg.model.max_len, threads, tmp, "test");
      counts["test"] = test.pairs;
      shards["test"] = test.shards;
    }
    const FilterStats& f = train.stats;
    meta = {{"key", key_doc},
            {"counts", counts},
            {"shards", shards},
            {"filter",
             {{"read", f.read},
              {"kept", f.kept},
              {"too_short", f.too_short},
              {"too_long", f.too_long},
              {"bad_ratio", f.bad_ratio}}},
            {"tokenizer_dir", tok_dir.string()}};
    config::write_resolved(cfg, tmp / "config.json");
    write_file_atomic(tmp / "prepare.json", meta.dump(2) + "\n");  // last: marks the cache complete
    publish_dir(tmp, dir);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  // The published directory (ours, or an identical one another process published first) is mapped.
  load(json::parse(read_file(dir / "prepare.json")));
  log::info("encoded corpus saved to {} ({} training pairs in {} shards; encoded in {:.1f} s, peak RSS {:.0f} MB)",
            dir.string(), out.train.size(), meta.at("shards").at("train").size(), seconds_since(start),
            double(peak_rss_bytes()) / 1e6);
  return out;
}

}  // namespace mtx::data
