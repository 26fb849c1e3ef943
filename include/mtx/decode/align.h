// Word alignments of a translation from its cross-attention, as Marian and fairseq print them: for each target
// word, the source word the decoder attended to most (one layer, averaged over heads), in Pharaoh format
// ("0-0 1-2 ...") or as probabilities. Subword pieces are mapped back to the words they spell: a piece that
// begins with sentencepiece's "▁" starts a word, every other piece continues one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mtx/model/transformer.h"
#include "mtx/tokenizer/tokenizer.h"

namespace mtx::decode {

struct WordAlignment {
  std::vector<std::vector<float>> soft;  // [target word][source word]: attention mass, each row summing to 1
  std::vector<int> hard;                 // per target word: the source word with the most (ties: the first)
};

// The word each piece belongs to (0, 0, 1, 2, 2, ...): a piece starting with "▁" begins a word, except that the
// first piece always begins word 0.
std::vector<int> word_of_pieces(const tokenizer::Model& model, const std::vector<int32_t>& ids);

// Teacher-forced over `tgt` (the translation's ids, without BOS and EOS) given `src` (without EOS): the cross-
// attention rows that produced each target piece, from decoder layer `layer` (negative: from the last, -1 the
// last), averaged over heads, without the source's EOS; summed over each source word's pieces and averaged over
// each target word's pieces. Empty when `tgt` is. Throws ConfigError for a layer the model does not have.
WordAlignment align_words(model::Transformer& model, const tokenizer::Tokenizer& tokenizer,
                          const std::vector<int32_t>& src, const std::vector<int32_t>& tgt, int layer = -1);

// The alignments of several pairs (as align_words gives each alone, up to float rounding) from one padded
// teacher-forced pass; a pair with an empty side gets an empty alignment.
std::vector<WordAlignment> align_batch(model::Transformer& model, const tokenizer::Tokenizer& tokenizer,
                                       const std::vector<const std::vector<int32_t>*>& src,
                                       const std::vector<const std::vector<int32_t>*>& tgt, int layer = -1);

// The same alignment from a search's own attention (Hypothesis::attention, as the translator gives it: one row per
// piece of `tgt`, one column per piece of `src`), without another pass over the model. Empty when a side is.
WordAlignment align_from_search(const tokenizer::Tokenizer& tokenizer, const std::vector<int32_t>& src,
                                const std::vector<int32_t>& tgt, const std::vector<std::vector<float>>& attention);

std::string pharaoh(const WordAlignment& a);    // "0-0 1-2 2-1": target word i aligned to source word hard[i]
std::string soft_text(const WordAlignment& a);  // "0.912,0.088 0.103,0.897": one row per target word

}  // namespace mtx::decode
