#include "mtx/tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "mtx/util/atomic_file.h"
#include "mtx/util/errors.h"
#include "mtx/util/hash.h"
#include "mtx/util/logging.h"
#include "mtx/util/strings.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtx::tokenizer {
namespace {

constexpr const char* kMetaFile = "tokenizer.json";
constexpr int kFormatVersion = 1;

std::string lines_to_text(std::initializer_list<const std::vector<std::string>*> sides) {
  size_t bytes = 0;
  for (const auto* side : sides) {
    for (const auto& l : *side) bytes += l.size() + 1;
  }
  std::string text;
  text.reserve(bytes);
  for (const auto* side : sides) {
    for (const auto& l : *side) {
      text += l;
      text += '\n';
    }
  }
  return text;
}

std::shared_ptr<const SpmModel> train_one(const config::TokenizerConfig& s, const std::string& text) {
  const SpecialIds ids;
  std::vector<std::pair<std::string, std::string>> flags = {
      {"model_type", config::to_string(s.type)},
      {"vocab_size", std::to_string(s.vocab_size)},
      {"character_coverage", std::to_string(s.character_coverage)},
      {"byte_fallback", s.byte_fallback ? "true" : "false"},
      // Lossless round trip: no normalisation, keep every space as written.
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "true"},
      {"pad_id", std::to_string(ids.pad)},
      {"unk_id", std::to_string(ids.unk)},
      {"bos_id", std::to_string(ids.bos)},
      {"eos_id", std::to_string(ids.eos)},
      {"pad_piece", "<pad>"},
      {"unk_piece", "<unk>"},
      {"bos_piece", "<s>"},
      {"eos_piece", "</s>"},
      {"num_threads", std::to_string(s.train_threads)},
      {"minloglevel", "2"},
  };
  if (s.input_sentence_size > 0) {
    flags.emplace_back("input_sentence_size", std::to_string(s.input_sentence_size));
    flags.emplace_back("shuffle_input_sentence", "true");
  }
  return SpmModel::train(flags, text);
}

}  // namespace

Tokenizer::Tokenizer(std::shared_ptr<const Model> src, std::shared_ptr<const Model> tgt)
    : src_(std::move(src)), tgt_(std::move(tgt)) {
  // A trained model's ids are 0/1/2/3; an imported vocabulary's are its own (VocabModel). Either way one set
  // for both sides, four different ids inside each side's vocabulary.
  const SpecialIds ids = src_->special_ids();
  auto name = [](const SpecialIds& s) {
    return std::to_string(s.pad) + "/" + std::to_string(s.unk) + "/" + std::to_string(s.bos) + "/" +
           std::to_string(s.eos);
  };
  if (!(tgt_->special_ids() == ids)) {
    throw DataError("tokenizer: the source model's special ids pad/unk/bos/eos (" + name(ids) +
                    ") differ from the target model's (" + name(tgt_->special_ids()) + ")");
  }
  const std::set<int32_t> distinct = {ids.pad, ids.unk, ids.bos, ids.eos};
  for (const Model* m : {src_.get(), tgt_.get()}) {
    if (distinct.size() != 4 || *distinct.begin() < 0 || *distinct.rbegin() >= m->vocab_size()) {
      throw DataError("tokenizer: special ids pad/unk/bos/eos = " + name(ids) +
                      " must be four different ids inside a vocabulary of " + std::to_string(m->vocab_size()));
    }
  }
}

Tokenizer Tokenizer::train(const config::TokenizerConfig& settings, std::vector<std::string> src_lines,
                           std::vector<std::string> tgt_lines) {
  if (settings.type == config::SpmType::basic_english) {
    std::vector<std::string> lines = std::move(src_lines);
    lines.insert(lines.end(), tgt_lines.begin(), tgt_lines.end());
    auto model = WordModel::train(lines, settings.min_freq);
    log::info("basic_english vocabulary of {} words (seen at least {} times in {} lines)", model->vocab_size(),
              settings.min_freq, lines.size());
    return Tokenizer(model, model);
  }
  // Each side's lines are freed once joined into sentencepiece's input: its training needs the memory.
  auto release = [](std::vector<std::string>& lines) { std::vector<std::string>().swap(lines); };
  if (settings.joint) {
    log::info("training a joint {} tokenizer ({} pieces) on {} + {} sentences", config::to_string(settings.type),
              settings.vocab_size, src_lines.size(), tgt_lines.size());
    std::string text = lines_to_text({&src_lines, &tgt_lines});
    release(src_lines);
    release(tgt_lines);
    auto model = train_one(settings, text);
    return Tokenizer(model, model);
  }
  log::info("training separate {} tokenizers ({} pieces each)", config::to_string(settings.type), settings.vocab_size);
  std::string text = lines_to_text({&src_lines});
  release(src_lines);
  auto src = train_one(settings, text);
  text = lines_to_text({&tgt_lines});
  release(tgt_lines);
  auto tgt = train_one(settings, text);
  return Tokenizer(src, tgt);
}

Tokenizer Tokenizer::from_bytes(std::string src_bytes, std::string tgt_bytes) {
  auto load = [](std::string&& bytes) -> std::shared_ptr<const Model> {
    if (WordModel::is_word_model(bytes)) return WordModel::from_bytes(std::move(bytes));
    if (VocabModel::is_vocab_model(bytes)) return VocabModel::from_bytes(std::move(bytes));
    return SpmModel::from_bytes(std::move(bytes));
  };
  auto src = load(std::move(src_bytes));
  if (tgt_bytes.empty()) return Tokenizer(src, src);
  return Tokenizer(src, load(std::move(tgt_bytes)));
}

void Tokenizer::save(const fs::path& dir) const {
  json meta = describe();
  meta["format"] = "mtx-tokenizer";
  meta["format_version"] = kFormatVersion;
  if (joint()) {
    meta["src_model"] = meta["tgt_model"] = "joint.model";
    write_file_atomic(dir / "joint.model", src_->bytes());
  } else {
    meta["src_model"] = "src.model";
    meta["tgt_model"] = "tgt.model";
    write_file_atomic(dir / "src.model", src_->bytes());
    write_file_atomic(dir / "tgt.model", tgt_->bytes());
  }
  // Written last: its presence marks a complete tokenizer directory.
  write_file_atomic(dir / kMetaFile, meta.dump(2) + "\n");
}

Tokenizer Tokenizer::load(const fs::path& dir) {
  const fs::path meta_path = dir / kMetaFile;
  if (!fs::exists(meta_path)) throw DataError("no tokenizer at '" + dir.string() + "' (" + kMetaFile + " missing)");
  json meta;
  try {
    meta = json::parse(read_file(meta_path));
  } catch (const json::exception& e) {
    throw DataError(meta_path.string() + ": " + e.what());
  }
  if (meta.value("format", "") != "mtx-tokenizer" || meta.value("format_version", 0) != kFormatVersion) {
    throw DataError(meta_path.string() + ": not an mtx tokenizer of format version " + std::to_string(kFormatVersion));
  }
  const std::string src_file = meta.value("src_model", "");
  const std::string tgt_file = meta.value("tgt_model", "");
  Tokenizer tok = src_file == tgt_file ? from_bytes(read_file(dir / src_file), "")
                                       : from_bytes(read_file(dir / src_file), read_file(dir / tgt_file));
  if (meta.contains("sha256") && meta["sha256"] != tok.hash()) {
    throw DataError(meta_path.string() + ": model files do not match the recorded sha256 (modified?)");
  }
  return tok;
}

const Languages& Tokenizer::languages() const {
  static const Languages kNone;
  const auto* vocab = dynamic_cast<const VocabModel*>(src_.get());
  return vocab ? vocab->languages() : kNone;
}

int32_t language_id(const Languages& languages, const std::string& code, const std::string& flag) {
  for (const auto& [name, id] : languages) {
    if (name == code) return id;
  }
  std::vector<std::pair<size_t, std::string>> near;
  for (const auto& [name, id] : languages) near.emplace_back(edit_distance(code, name), name);
  std::sort(near.begin(), near.end());
  std::string closest;
  for (size_t i = 0; i < std::min<size_t>(3, near.size()); ++i) closest += (i ? ", " : "") + near[i].second;
  throw ConfigError(flag + " '" + code + "' is not one of this model's " + std::to_string(languages.size()) +
                    " languages; the closest: " + closest);
}

bool Tokenizer::code_after_eos() const {
  const auto* vocab = dynamic_cast<const VocabModel*>(src_.get());
  return vocab && vocab->code_after_eos();
}

std::vector<int32_t> Tokenizer::encode_source(std::string_view text, int32_t code) const {
  std::vector<int32_t> ids = src_->encode(text);
  if (!code_after_eos()) ids.insert(ids.begin(), code);
  ids.push_back(special_ids().eos);
  if (code_after_eos()) ids.push_back(code);
  return ids;
}

std::string Tokenizer::hash() const {
  const SpecialIds ids = special_ids();
  Sha256 h;
  h.update(joint() ? "joint\n" : "separate\n").update(src_->sha256()).update("\n").update(tgt_->sha256());
  h.update("\n" + std::to_string(ids.pad) + "," + std::to_string(ids.unk) + "," + std::to_string(ids.bos) + "," +
           std::to_string(ids.eos));
  return h.hex();
}

json Tokenizer::describe() const {
  const SpecialIds ids = special_ids();
  json out{{"kind", src_->kind()},
           {"joint", joint()},
           {"src_vocab_size", src_->vocab_size()},
           {"tgt_vocab_size", tgt_->vocab_size()},
           {"special_ids", {{"pad", ids.pad}, {"unk", ids.unk}, {"bos", ids.bos}, {"eos", ids.eos}}},
           {"sha256", hash()}};
  const Languages& langs = languages();
  if (!langs.empty()) {
    json codes = json::array();
    for (const auto& [code, id] : langs) codes.push_back(code);
    out["languages"] = codes;
  }
  return out;
}

}  // namespace mtx::tokenizer
