// mtx generate: continue a prompt with a language model (task lm) by sampling (decode/lm.h).
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "commands.h"
#include "mtx/bundle/bundle.h"
#include "mtx/decode/lm.h"
#include "mtx/util/device.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"
#include "mtx/util/system.h"

namespace mtx::cli {

namespace {

struct GenerateArgs {
  std::string ckpt;
  std::string prompt;  // "" = start as at a line start
  decode::GenerateOptions options;
  std::optional<int> context;  // default: the checkpoint's train.bptt
  std::string device = "auto";
  int threads = 0;
};

// Ids as text: the pieces between <eos> joined by the tokenizer, one line per <eos>.
std::string render(const tokenizer::Model& model, const std::vector<int32_t>& ids) {
  std::string out;
  std::vector<int32_t> line;
  for (const int32_t id : ids) {
    if (id == model.special_ids().eos) {
      out += model.decode(line) + "\n";
      line.clear();
    } else {
      line.push_back(id);
    }
  }
  return out + model.decode(line);
}

int run_generate(GenerateArgs a) {
  decode::validate(a.options);  // flag errors before the checkpoint is read
  const torch::Device device = select_device(parse_device(a.device), "--device");
  bundle::Bundle ckpt = bundle::load_bundle(a.ckpt, device);
  if (ckpt.config.task != config::Task::lm) {
    throw ConfigError(
        fmt::format("--ckpt: '{}' is a translation model; mtx generate needs a language model (task "
                    "lm, e.g. configs/lm-tutorial.json); translate with mtx translate",
                    a.ckpt));
  }
  a.options.context = a.context ? *a.context : ckpt.config.train.bptt;
  decode::validate(a.options);
  set_threads(a.threads);
  const tokenizer::Model& words = ckpt.tokenizer->tgt();
  const std::vector<int32_t> prompt = words.encode(a.prompt);
  const auto out = decode::generate(ckpt.model, prompt, words.special_ids().eos, a.options);
  // Prompt and continuation decoded as one sequence: a continuation may start inside a word (subwords).
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), out.begin(), out.end());
  std::cout << render(words, all) << "\n";
  return 0;
}

}  // namespace

Command add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate",
                                 "Continue a prompt with a language model (task lm): sampling with "
                                 "temperature and top-k, reproducible by seed");
  cmd->add_option("--ckpt", a->ckpt, "Language-model checkpoint (best.pt of a task lm run)")->required();
  cmd->add_option("--prompt", a->prompt, "Text to continue (default: none, as at a line start)");
  cmd->add_option("--max-tokens", a->options.max_tokens, "Tokens to generate")->capture_default_str();
  cmd->add_option("--temperature", a->options.temperature, "Sampling temperature (0 = greedy)")->capture_default_str();
  cmd->add_option("--top-k", a->options.top_k, "Sample among the k most likely tokens (0 = all)")
      ->capture_default_str();
  cmd->add_option("--seed", a->options.seed, "Sampling seed")->capture_default_str();
  cmd->add_option("--context", a->context, "Tokens the model sees at most (default: the checkpoint's train.bptt)");
  cmd->add_flag("--stop-at-eos", a->options.stop_at_eos, "Stop at the first line end (<eos>)");
  cmd->add_option("--device", a->device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--threads", a->threads, "CPU threads (0 = one per core)");
  return {cmd, [a] { return run_generate(*a); }};
}

}  // namespace mtx::cli
