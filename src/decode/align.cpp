#include "mtx/decode/align.h"

#include <torch/torch.h>

#include <algorithm>
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

namespace {

int chosen_layer(model::Transformer& model, int layer) {
  const auto layers = int(model->options.decoder_layers());
  const int chosen = layer < 0 ? layers + layer : layer;
  if (chosen < 0 || chosen >= layers) {
    throw ConfigError("align layer " + std::to_string(layer) + ": the model has decoder layers 0.." +
                      std::to_string(layers - 1) + " (or -1.." + std::to_string(-layers) + " from the last)");
  }
  return chosen;
}

// Word alignment from one pair's cross-attention: weight(i, j) is target piece i's attention to source piece j.
template <typename Weight>
WordAlignment words_from(const Weight& weight, const tokenizer::Tokenizer& tokenizer, const std::vector<int32_t>& src,
                         const std::vector<int32_t>& tgt) {
  WordAlignment out;
  const std::vector<int> src_words = word_of_pieces(tokenizer.src(), src);
  const std::vector<int> tgt_words = word_of_pieces(tokenizer.tgt(), tgt);
  const auto n_src = size_t(src_words.back() + 1), n_tgt = size_t(tgt_words.back() + 1);
  out.soft.assign(n_tgt, std::vector<float>(n_src, 0.f));
  for (size_t i = 0; i < tgt.size(); ++i) {
    for (size_t j = 0; j < src.size(); ++j) out.soft[size_t(tgt_words[i])][size_t(src_words[j])] += weight(i, j);
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

// From `attn` [>= T, >= S] (row i: target piece i; column j: source piece j; the rest ignored).
WordAlignment from_attention(const torch::Tensor& attn, const tokenizer::Tokenizer& tokenizer,
                             const std::vector<int32_t>& src, const std::vector<int32_t>& tgt) {
  const torch::Tensor used = attn.narrow(0, 0, int64_t(tgt.size()))
                                 .narrow(1, 0, int64_t(src.size()))
                                 .to(torch::kCPU, torch::kFloat)
                                 .contiguous();  // [T, S]
  const auto a = used.accessor<float, 2>();
  return words_from([&a](size_t i, size_t j) { return a[int64_t(i)][int64_t(j)]; }, tokenizer, src, tgt);
}

}  // namespace

WordAlignment align_words(model::Transformer& model, const tokenizer::Tokenizer& tokenizer,
                          const std::vector<int32_t>& src, const std::vector<int32_t>& tgt, int layer) {
  if (tgt.empty() || src.empty()) return {};
  return std::move(align_batch(model, tokenizer, {&src}, {&tgt}, layer).front());
}

std::vector<WordAlignment> align_batch(model::Transformer& model, const tokenizer::Tokenizer& tokenizer,
                                       const std::vector<const std::vector<int32_t>*>& src,
                                       const std::vector<const std::vector<int32_t>*>& tgt, int layer) {
  TORCH_CHECK(src.size() == tgt.size(), "align_batch: ", src.size(), " sources for ", tgt.size(), " targets");
  const int chosen = chosen_layer(model, layer);
  std::vector<WordAlignment> out(src.size());
  std::vector<size_t> used;  // the pairs with both sides
  for (size_t i = 0; i < src.size(); ++i) {
    if (!src[i]->empty() && !tgt[i]->empty()) used.push_back(i);
  }
  if (used.empty()) return out;
  const tokenizer::SpecialIds ids = tokenizer.special_ids();
  const auto device = model->parameters().front().device();
  // In groups of up to 32 pairs (every layer's weights of a group are held at once), each padded to its longest:
  // the encoder's mask hides the sources' padding, and a target's rows depend only on the positions before them,
  // so each pair's rows are its own.
  constexpr size_t kGroup = 32;
  for (size_t first = 0; first < used.size(); first += kGroup) {
    const size_t n = std::min(kGroup, used.size() - first);
    size_t longest_s = 0, longest_t = 0;
    for (size_t k = 0; k < n; ++k) {
      longest_s = std::max(longest_s, src[used[first + k]]->size());
      longest_t = std::max(longest_t, tgt[used[first + k]]->size());
    }
    torch::Tensor s = torch::full({int64_t(n), int64_t(longest_s) + 1}, int64_t(ids.pad), torch::kLong);
    torch::Tensor t = torch::full({int64_t(n), int64_t(longest_t) + 1}, int64_t(ids.pad), torch::kLong);
    auto sa = s.accessor<int64_t, 2>();
    auto ta = t.accessor<int64_t, 2>();
    for (size_t k = 0; k < n; ++k) {
      const auto& a = *src[used[first + k]];
      const auto& b = *tgt[used[first + k]];
      for (size_t j = 0; j < a.size(); ++j) sa[int64_t(k)][int64_t(j)] = a[j];
      sa[int64_t(k)][int64_t(a.size())] = ids.eos;
      ta[int64_t(k)][0] = ids.bos;
      for (size_t j = 0; j < b.size(); ++j) ta[int64_t(k)][int64_t(j) + 1] = b[j];
    }
    // Row j of the teacher-forced pass produced target piece j; the source's EOS column is left out.
    // cross_attention leaves the model as it is: the server aligns while other threads translate with it.
    const torch::Tensor attn = model->cross_attention(s.to(device), t.to(device))[size_t(chosen)].mean(1);
    for (size_t k = 0; k < n; ++k) {
      const size_t i = used[first + k];
      out[i] = from_attention(attn[int64_t(k)], tokenizer, *src[i], *tgt[i]);
    }
  }
  return out;
}

WordAlignment align_from_search(const tokenizer::Tokenizer& tokenizer, const std::vector<int32_t>& src,
                                const std::vector<int32_t>& tgt, const std::vector<std::vector<float>>& attention) {
  if (src.empty() || tgt.empty()) return {};
  TORCH_CHECK(attention.size() >= tgt.size(), "align_from_search: ", attention.size(), " attention rows for ",
              tgt.size(), " target pieces");
  return words_from([&attention](size_t i, size_t j) { return j < attention[i].size() ? attention[i][j] : 0.0f; },
                    tokenizer, src, tgt);
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
