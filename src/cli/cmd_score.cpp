// mtx score: the teacher-forced log-probability of given translations (decode::score_pairs), per pair and per
// token: --src and --tgt line-aligned, or tab-separated pairs on stdin.
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "mtx/decode/scoring.h"
#include "mtx/util/device.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"
#include "mtx/util/system.h"
#include "mtx/util/utf8.h"

namespace mtx::cli {

struct ScoreArgs {
  std::vector<std::string> ckpts;
  std::string src, tgt;
  std::string device = "auto";
  int threads = 0;
  int batch_tokens = 4096;
  bool tokens = false, json = false;
  QuantizeArgs quantize;
};

namespace {

std::vector<std::string> read_lines(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(std::string(flag) + ": cannot read '" + path + "'");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(std::move(line));
  }
  return out;
}

int run_score(const ScoreArgs& a) {
  std::vector<std::string> src, tgt;
  if (a.src.empty() != a.tgt.empty())
    throw ConfigError("--src and --tgt go together (or tab-separated pairs on stdin)");
  if (!a.src.empty()) {
    src = read_lines(a.src, "--src");
    tgt = read_lines(a.tgt, "--tgt");
    if (src.size() != tgt.size()) {
      throw DataError("--src '" + a.src + "' has " + std::to_string(src.size()) + " lines but --tgt '" + a.tgt +
                      "' has " + std::to_string(tgt.size()));
    }
  } else {
    int64_t number = 0;
    for (std::string line; std::getline(std::cin, line);) {
      ++number;
      const size_t tab = line.find('\t');
      if (tab == std::string::npos) {
        throw DataError("stdin line " + std::to_string(number) + ": no tab between source and translation");
      }
      if (!line.empty() && line.back() == '\r') line.pop_back();
      src.push_back(line.substr(0, tab));
      tgt.push_back(line.substr(tab + 1));
    }
  }
  for (size_t i = 0; i < src.size(); ++i) {
    for (const std::string* s : {&src[i], &tgt[i]}) {
      if (utf8::find_invalid(*s) != utf8::kValid) throw DataError("line " + std::to_string(i + 1) + ": invalid UTF-8");
    }
  }
  const torch::Device device = select_device(parse_device(inference_device(a.device, a.quantize)), "--device");
  TranslationModels loaded = load_translation_models(a.ckpts, device, a.quantize);
  set_threads(a.threads);
  const tokenizer::Tokenizer& tok = *loaded.bundles.front().tokenizer;
  std::vector<std::vector<int32_t>> src_ids, tgt_ids;
  for (size_t i = 0; i < src.size(); ++i) {
    src_ids.push_back(tok.src().encode(src[i]));
    tgt_ids.push_back(tok.tgt().encode(tgt[i]));
  }
  const auto scores = decode::score_pairs(loaded.models, tok.special_ids(), src_ids, tgt_ids, a.batch_tokens);
  for (const auto& s : scores) {
    if (a.json) {
      nlohmann::json tokens = nlohmann::json::array();
      for (size_t j = 0; j < s.tokens.size(); ++j) {
        tokens.push_back({{"piece", tok.tgt().piece(s.tokens[j])}, {"log_prob", s.token_log_probs[j]}});
      }
      std::cout << nlohmann::json{{"log_prob", s.log_prob}, {"tokens", std::move(tokens)}}.dump() << '\n';
      continue;
    }
    std::cout << fmt::format("{:.6f}", s.log_prob);
    if (a.tokens) {
      std::cout << " |||";
      for (size_t j = 0; j < s.tokens.size(); ++j) {
        std::cout << ' ' << tok.tgt().piece(s.tokens[j]) << ':' << fmt::format("{:.6f}", s.token_log_probs[j]);
      }
    }
    std::cout << '\n';
  }
  log::info("scored {} pairs", scores.size());
  return 0;
}

}  // namespace

Command add_score(CLI::App& app) {
  auto a = std::make_shared<ScoreArgs>();
  auto* cmd = app.add_subcommand(
      "score", "Teacher-forced log-probabilities of given translations, per pair and per token (batch-invariant)");
  cmd->add_option("--ckpt", a->ckpts, "Checkpoint (repeat for an ensemble, scored as it translates)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--src", a->src, "Source lines (with --tgt; otherwise tab-separated pairs on stdin)");
  cmd->add_option("--tgt", a->tgt, "Translations, line-aligned with --src");
  cmd->add_flag("--tokens", a->tokens, "Add ` ||| piece:log_prob ...` (EOS last) after each pair's score");
  cmd->add_flag("--json", a->json, "One JSON object per pair: log_prob and tokens [{piece, log_prob}]");
  cmd->add_option("--batch-tokens", a->batch_tokens, "Source and target tokens per batch")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--device", a->device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--threads", a->threads, "CPU threads (0 = one per core)")->check(CLI::NonNegativeNumber);
  add_quantize_flags(*cmd, a->quantize);
  return {cmd, [a] { return run_score(*a); }};
}

}  // namespace mtx::cli
