// Models trained elsewhere, brought in as ordinary mtx bundles (weights, tokenizers, model options): Hugging
// Face's MarianMT directories (OPUS-MT's converted models). The result translates, scores, exports,
// quantizes and fine-tunes as any bundle does. docs/import.md says what carries over.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "mtx/bundle/bundle.h"

namespace mtx::bundle {

// What an importer built, and what a user should know about it (one line each: what mtx changed or left out).
struct Imported {
  Bundle bundle;
  std::vector<std::string> notes;
};

struct ImportOptions {
  // pytorch_model.bin only (torch.save's pickle): an interpreter with torch and safetensors rewrites it first.
  std::string python = "python3";
  // The model's settings file where its format keeps one apart (marian: decoder.yml).
  std::filesystem::path config;
};

// One format mtx imports: its name (mtx import --from NAME, Python's source=NAME), what its input is, and whether
// it needs ImportOptions::config. Each format is one entry of one table (src/bundle/import.cpp): the CLI and
// Python call import_model only.
struct ImportFormat {
  const char* name;
  const char* input;   // "a Hugging Face directory (config.json, weights, tokenizer files)"
  const char* config;  // what ImportOptions::config is, or nullptr where the format needs none
  Imported (*import)(const std::filesystem::path& input, const ImportOptions& options);
};
const std::vector<ImportFormat>& import_formats();

// `input` in `format` as an mtx bundle (import_hf or import_marian). Throws ConfigError for an unknown format or
// a missing config file, and what the format's importer throws.
Imported import_model(const std::string& format, const std::filesystem::path& input, const ImportOptions& options = {});

// A Hugging Face MarianMT directory: config.json, the weights (model.safetensors, its sharded index
// model.safetensors.index.json, or pytorch_model.bin through options.python), source.spm and target.spm,
// vocab.json.
//
// Ids stay the vocabulary's own: mtx's pad, unk and eos are config.json's and vocab.json's. mtx starts decoding
// from a token of its own, so the vocabulary gains one piece ("<s>", or "<mtx-start>" where "<s>" is taken)
// whose input embedding is the decoder start token's (MarianMT's <pad>) and whose output row is that token's
// with the bias 30 lower: its probability is e^-30 of the start token's, which mtx never generates either, so
// the other tokens' log-probabilities are MarianMT's to float precision while label smoothing stays finite.
//
// Throws DataError naming the file and the key or parameter: a missing file, a parameter of the wrong shape or
// one mtx has no place for, an architecture mtx cannot run (unscaled embeddings, pre-norm, unequal encoder and
// decoder widths, separate source and target vocabularies).
Imported import_hf(const std::filesystem::path& dir, const ImportOptions& options = {});

// The config.json model_types import_hf takes (marian, m2m_100, mbart).
std::vector<std::string> hf_model_types();

// A Marian model (OPUS-MT's): its .npz parameters with their options ("special:model.yml"), and decoder.yml,
// whose 'vocabs' name the vocabulary (Marian's .yml, or a sentencepiece model) of each side; with .yml
// vocabularies, source.spm and target.spm beside decoder.yml cut the text. The model is Marian's transformer
// (post-norm, Marian's sinusoid, layer norm epsilon 1e-6, <unk> never generated); its vocabulary gains <pad> and
// a decoder start (zero embeddings, logit bias -100). Throws DataError naming the file and the option or
// parameter mtx cannot use (an SSRU or average-attention decoder, pre-norm, factors, separate vocabularies).
Imported import_marian(const std::filesystem::path& npz, const std::filesystem::path& decoder_yml);

// A NumPy .npz archive (a zip of .npy arrays, stored or deflated, as numpy.savez and Marian write them), read
// through minizip: each array under its name without ".npy", as a CPU tensor (f2/f4/f8, i1/i2/i4/i8, u1, b1, and
// S1 characters as u1), in archive order. Throws DataError naming the file and the entry.
std::vector<std::pair<std::string, torch::Tensor>> read_npz(const std::filesystem::path& path);

}  // namespace mtx::bundle
