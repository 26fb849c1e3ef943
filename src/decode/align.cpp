#include "mtx/decode/align.h"

#include <torch/torch.h>

#include <cstdio>

#include "mtx/util/errors.h"

namespace mtx::decode {

std::vector<int> word_of_pieces(const tokenizer::Model& model, const std::vector<int32_t>& ids) {
  static const std::string kWordStart = "\xe2\x96\x81";  // U+2581, sentencepiece's space
  std::vector<int> words;
  int word = -1;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i == 0 || model.piece(ids[i]).rfind(kWordStart, 0) == 0) ++word;
    words.push_back(word);
  }
  return words;
}

WordAlignment align_words(model::Transformer& model, const tokenizer::Tokenizer& tokenizer,
                          const std::vector<int32_t>& src, const std::vector<int32_t>& tgt, int layer) {
  WordAlignment out;
  if (tgt.empty() || src.empty()) return out;
  const auto layers = int(model->options.decoder_layers());
  const int chosen = layer < 0 ? layers + layer : layer;
  if (chosen < 0 || chosen >= layers) {
    throw ConfigError("align layer " + std::to_string(layer) + ": the model has decoder layers 0.." +
                      std::to_string(layers - 1) + " (or -1.." + std::to_string(-layers) + " from the last)");
  }
  const tokenizer::SpecialIds ids = tokenizer.special_ids();
  const auto device = model->parameters().front().device();
  std::vector<int64_t> s(src.begin(), src.end()), t = {ids.bos};
  s.push_back(ids.eos);
  t.insert(t.end(), tgt.begin(), tgt.end());
  const torch::Tensor src_t = torch::tensor(s, torch::kLong).unsqueeze(0).to(device);  // [1, S + 1]
  const torch::Tensor tgt_t = torch::tensor(t, torch::kLong).unsqueeze(0).to(device);  // [1, T + 1]
  // Row j of the teacher-forced pass produced target piece j; the source's EOS column is left out.
  // cross_attention leaves the model as it is: the server aligns while other threads translate with it.
  const torch::Tensor attn = model
                                 ->cross_attention(src_t, tgt_t)[size_t(chosen)][0]  // [h, T + 1, S + 1]
                                 .mean(0)
                                 .narrow(0, 0, int64_t(tgt.size()))
                                 .narrow(1, 0, int64_t(src.size()))
                                 .to(torch::kCPU, torch::kFloat)
                                 .contiguous();  // [T, S]
  const std::vector<int> src_words = word_of_pieces(tokenizer.src(), src);
  const std::vector<int> tgt_words = word_of_pieces(tokenizer.tgt(), tgt);
  const auto n_src = size_t(src_words.back() + 1), n_tgt = size_t(tgt_words.back() + 1);
  out.soft.assign(n_tgt, std::vector<float>(n_src, 0.f));
  std::vector<int> pieces(n_tgt, 0);
  const auto a = attn.accessor<float, 2>();
  for (size_t i = 0; i < tgt.size(); ++i) {
    ++pieces[size_t(tgt_words[i])];
    for (size_t j = 0; j < src.size(); ++j)
      out.soft[size_t(tgt_words[i])][size_t(src_words[j])] += a[int64_t(i)][int64_t(j)];
  }
  for (size_t w = 0; w < n_tgt; ++w) {
    float total = 0;
    for (float& v : out.soft[w]) total += v;
    int best = 0;
    for (size_t j = 0; j < n_src; ++j) {
      out.soft[w][j] = total > 0 ? out.soft[w][j] / total : 1.f / float(n_src);
      if (out.soft[w][j] > out.soft[w][size_t(best)]) best = int(j);
    }
    out.hard.push_back(best);
  }
  return out;
}

std::string pharaoh(const WordAlignment& a) {
  std::string out;
  for (size_t i = 0; i < a.hard.size(); ++i) {
    if (i) out += ' ';
    out += std::to_string(a.hard[i]) + "-" + std::to_string(i);
  }
  return out;
}

std::string soft_text(const WordAlignment& a) {
  std::string out;
  char buf[32];
  for (size_t i = 0; i < a.soft.size(); ++i) {
    if (i) out += ' ';
    for (size_t j = 0; j < a.soft[i].size(); ++j) {
      std::snprintf(buf, sizeof buf, "%s%.3f", j ? "," : "", double(a.soft[i][j]));
      out += buf;
    }
  }
  return out;
}

}  // namespace mtx::decode
