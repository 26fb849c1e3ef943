// A bundle's model leaves mtx in interoperable forms: safetensors (float32 weights under mtx's parameter
// names, the model description and vocabularies as JSON, the sentencepiece models), and a CTranslate2 model
// directory converted from that export by CTranslate2's own Python specs (scripts/ct2_convert.py, built in).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "mtx/bundle/bundle.h"

namespace mtx::bundle {

// Writes `tensors` (any float/int dtype LibTorch and safetensors share; CPU copies are made) as one
// safetensors file, atomically, with `metadata` as its __metadata__. Throws Error on a name used twice.
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// A safetensors file read back (Hugging Face's weights, mtx's exports): each tensor under its name, in the
// order of their data, as a CPU tensor of its dtype (F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL), and the
// __metadata__ strings. Throws DataError naming the file and what is wrong (a truncated file, a header that is
// not safetensors' JSON, an unknown dtype, data offsets outside the file or not matching the shape).
struct Safetensors {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  std::map<std::string, std::string> metadata;
};
Safetensors read_safetensors(const std::filesystem::path& path);

// DIR/model.safetensors (every parameter and buffer, float32; an int8 bundle's dequantized weights),
// DIR/mtx_export.json ("format": "mtx-export-1", the model's shape, special ids and pieces, both
// vocabularies, the weights' sha256) and the tokenizer's models (source.spm.model, and target.spm.model
// unless joint). Creates DIR; replaces files of an earlier export.
void export_safetensors(Bundle& bundle, const std::filesystem::path& dir);

struct Ct2ExportOptions {
  std::string python = "python3";  // an interpreter with ctranslate2, safetensors and numpy (e.g. .venv/bin/python)
  std::string quantization;        // CTranslate2 weight type ("int8", "float32", ...); empty: float32
  bool force = false;              // replace an existing output directory
};

// A CTranslate2 model directory at `dir` (model.bin, config.json, vocabularies, the sentencepiece models),
// through a safetensors export in a temporary directory. Throws Error with the converter's message when
// the interpreter or its packages are missing or the conversion fails.
void export_ct2(Bundle& bundle, const std::filesystem::path& dir, const Ct2ExportOptions& options);

}  // namespace mtx::bundle
