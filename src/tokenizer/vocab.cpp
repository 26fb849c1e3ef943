// VocabModel: a sentencepiece model whose ids come from a vocabulary of its own (tokenizer.h).
#include <nlohmann/json.hpp>

#include <unordered_map>

#include "mtx/tokenizer/tokenizer.h"
#include "mtx/util/errors.h"

namespace mtx::tokenizer {
namespace {

constexpr std::string_view kMagic = "mtx-spm-vocab 1\n";
constexpr int32_t kNoText = -1;  // to_spm_ of a language token: it decodes to nothing

}  // namespace

bool VocabModel::is_vocab_model(std::string_view bytes) { return bytes.substr(0, kMagic.size()) == kMagic; }

std::shared_ptr<const VocabModel> VocabModel::create(std::shared_ptr<const SpmModel> spm,
                                                     std::vector<std::string> pieces, SpecialIds special,
                                                     Languages languages, bool code_after_eos) {
  const auto n = int32_t(pieces.size());
  for (const auto& [name, id] : {std::pair<const char*, int32_t>{"pad", special.pad},
                                 {"unk", special.unk},
                                 {"bos", special.bos},
                                 {"eos", special.eos}}) {
    if (id < 0 || id >= n) {
      throw DataError(std::string("vocabulary: the ") + name + " id " + std::to_string(id) + " is outside its " +
                      std::to_string(n) + " pieces");
    }
  }
  for (const auto& [code, id] : languages) {
    if (id < 0 || id >= n) {
      throw DataError("vocabulary: the language " + code + "'s id " + std::to_string(id) + " is outside its " +
                      std::to_string(n) + " pieces");
    }
  }
  nlohmann::json header = {
      {"pieces", pieces},
      {"special", {{"pad", special.pad}, {"unk", special.unk}, {"bos", special.bos}, {"eos", special.eos}}}};
  if (!languages.empty()) header["languages"] = languages;     // absent otherwise: older models' bytes stay the same
  if (code_after_eos) header["source_code_after_eos"] = true;  // likewise
  std::string bytes = std::string(kMagic) + header.dump() + "\n" + spm->bytes();
  return std::shared_ptr<const VocabModel>(new VocabModel(std::move(spm), std::move(pieces), special,
                                                          std::move(languages), code_after_eos, std::move(bytes)));
}

std::shared_ptr<const VocabModel> VocabModel::from_bytes(std::string bytes) {
  if (!is_vocab_model(bytes)) throw DataError("not an mtx vocabulary model (no 'mtx-spm-vocab 1' header)");
  const size_t end = bytes.find('\n', kMagic.size());
  if (end == std::string::npos) throw DataError("vocabulary model: truncated header");
  std::vector<std::string> pieces;
  SpecialIds special;
  Languages languages;
  bool code_after_eos = false;
  try {
    const nlohmann::json header = nlohmann::json::parse(bytes.substr(kMagic.size(), end - kMagic.size()));
    const auto& s = header.at("special");
    special = {s.at("pad").get<int32_t>(), s.at("unk").get<int32_t>(), s.at("bos").get<int32_t>(),
               s.at("eos").get<int32_t>()};
    pieces = header.at("pieces").get<std::vector<std::string>>();
    if (header.contains("languages")) languages = header.at("languages").get<Languages>();
    code_after_eos = header.value("source_code_after_eos", false);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("vocabulary model: bad header: ") + e.what());
  }
  auto model = create(SpmModel::from_bytes(bytes.substr(end + 1)), std::move(pieces), special, std::move(languages),
                      code_after_eos);
  if (model->bytes() != bytes) throw DataError("vocabulary model: not in its canonical form");
  return model;
}

VocabModel::VocabModel(std::shared_ptr<const SpmModel> spm, std::vector<std::string> pieces, SpecialIds special,
                       Languages languages, bool code_after_eos, std::string bytes)
    : Model(std::move(bytes)),
      languages_(std::move(languages)),
      code_after_eos_(code_after_eos),
      spm_(std::move(spm)),
      pieces_(std::move(pieces)) {
  vocab_size_ = int32_t(pieces_.size());
  special_ = special;
  std::unordered_map<std::string, int32_t> index;
  for (int32_t i = 0; i < vocab_size_; ++i) {
    if (!index.emplace(pieces_[size_t(i)], i).second) {
      throw DataError("vocabulary: the piece '" + pieces_[size_t(i)] + "' appears twice (ids " +
                      std::to_string(index[pieces_[size_t(i)]]) + " and " + std::to_string(i) + ")");
    }
  }
  from_spm_.resize(size_t(spm_->vocab_size()));
  std::unordered_map<std::string, int32_t> spm_index;
  for (int32_t id = 0; id < spm_->vocab_size(); ++id) {
    const std::string p = spm_->piece(id);
    spm_index.emplace(p, id);
    const auto it = index.find(p);
    from_spm_[size_t(id)] = it == index.end() ? special_.unk : it->second;
  }
  to_spm_.resize(pieces_.size());
  const int32_t spm_unk = spm_->special_ids().unk;
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const auto it = spm_index.find(pieces_[i]);
    to_spm_[i] = it == spm_index.end() ? spm_unk : it->second;
  }
  for (const auto& [code, id] : languages_) to_spm_[size_t(id)] = kNoText;
}

void VocabModel::encode(std::string_view text, std::vector<int32_t>& ids) const {
  spm_->encode(text, ids);
  for (auto& id : ids) id = from_spm_[size_t(id)];
}

std::string VocabModel::decode(const int32_t* ids, size_t n) const {
  std::vector<int32_t> spm_ids;
  spm_ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size_)
      throw Error("vocabulary id " + std::to_string(ids[i]) + " is out of range");
    if (to_spm_[size_t(ids[i])] != kNoText) spm_ids.push_back(to_spm_[size_t(ids[i])]);
  }
  return spm_->decode(spm_ids);
}

std::string VocabModel::piece(int32_t id) const {
  if (id < 0 || id >= vocab_size_) throw Error("piece id " + std::to_string(id) + " is out of range");
  return pieces_[size_t(id)];
}

}  // namespace mtx::tokenizer
