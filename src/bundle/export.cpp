#include "mtx/bundle/export.h"
#include "mtx/model/param_names.h"

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "mtx/util/atomic_file.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"
#include "mtx/util/process.h"
#include "mtx_ct2_converter.h"  // kCt2Converter: scripts/ct2_convert.py, generated at build time

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtx::bundle {
namespace {

std::string safetensors_dtype(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat:
      return "F32";
    case torch::kDouble:
      return "F64";
    case torch::kHalf:
      return "F16";
    case torch::kBFloat16:
      return "BF16";
    case torch::kLong:
      return "I64";
    case torch::kInt:
      return "I32";
    case torch::kShort:
      return "I16";
    case torch::kChar:
      return "I8";
    case torch::kByte:
      return "U8";
    case torch::kBool:
      return "BOOL";
    default:
      throw Error(std::string("safetensors: no dtype for ") + c10::toString(t));
  }
}

}  // namespace

void write_safetensors(const fs::path& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::vector<torch::Tensor> data;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (!names.insert(name).second) throw Error("safetensors: tensor '" + name + "' named twice");
    const torch::Tensor c = tensor.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = uint64_t(c.numel()) * c.element_size();
    header[name] = {{"dtype", safetensors_dtype(c.scalar_type())},
                    {"shape", c.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(c);
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  write_file_atomic(path, [&](std::ostream& out) {
    uint64_t n = text.size();
    unsigned char size[8];
    for (int i = 0; i < 8; ++i) size[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);  // little-endian
    out.write(reinterpret_cast<const char*>(size), 8);
    out.write(text.data(), std::streamsize(text.size()));
    for (const auto& t : data) {
      out.write(static_cast<const char*>(t.data_ptr()), std::streamsize(uint64_t(t.numel()) * t.element_size()));
    }
  });
}

Safetensors read_safetensors(const fs::path& path) {
  const std::string bytes = read_file(path);
  const auto fail = [&](const std::string& why) {
    return DataError(path.string() + ": not a safetensors file: " + why);
  };
  if (bytes.size() < 8) throw fail("shorter than its 8-byte header size");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint64_t(static_cast<unsigned char>(bytes[size_t(i)]));  // little-endian
  if (n > bytes.size() - 8)
    throw fail("a header of " + std::to_string(n) + " bytes in a file of " + std::to_string(bytes.size()));
  json header;
  try {
    header = json::parse(bytes.substr(8, size_t(n)));
  } catch (const json::exception& e) {
    throw fail(std::string("its header is not JSON (") + e.what() + ")");
  }
  if (!header.is_object()) throw fail("its header is not a JSON object");
  static const std::map<std::string, torch::ScalarType> kDtypes = {
      {"F64", torch::kDouble}, {"F32", torch::kFloat}, {"F16", torch::kHalf},  {"BF16", torch::kBFloat16},
      {"I64", torch::kLong},   {"I32", torch::kInt},   {"I16", torch::kShort}, {"I8", torch::kChar},
      {"U8", torch::kByte},    {"BOOL", torch::kBool}};
  const uint64_t data_size = bytes.size() - 8 - n;
  const char* data = bytes.data() + 8 + n;
  Safetensors out;
  std::vector<std::pair<uint64_t, std::pair<std::string, torch::Tensor>>> ordered;
  for (const auto& [name, entry] : header.items()) {
    try {
      if (name == "__metadata__") {
        for (const auto& [key, value] : entry.items()) out.metadata[key] = value.get<std::string>();
        continue;
      }
      const std::string dtype = entry.at("dtype").get<std::string>();
      const auto type = kDtypes.find(dtype);
      if (type == kDtypes.end()) throw fail("tensor '" + name + "' has the unknown dtype " + dtype);
      const auto shape = entry.at("shape").get<std::vector<int64_t>>();
      const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size) {
        throw fail("tensor '" + name + "' has data offsets outside the file's " + std::to_string(data_size) +
                   " bytes of data");
      }
      uint64_t numel = 1;
      for (const int64_t d : shape) {
        if (d < 0) throw fail("tensor '" + name + "' has a negative dimension");
        if (d > 0 && numel > data_size / uint64_t(d)) throw fail("tensor '" + name + "' is larger than the file");
        numel *= uint64_t(d);
      }
      const auto element = uint64_t(c10::elementSize(type->second));
      if (numel * element != offsets[1] - offsets[0]) {
        throw fail("tensor '" + name + "' holds " + std::to_string(offsets[1] - offsets[0]) + " bytes, its shape " +
                   std::to_string(numel) + " elements of " + std::to_string(element));
      }
      torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(type->second));
      if (numel > 0) std::memcpy(t.data_ptr(), data + offsets[0], size_t(numel * element));
      ordered.push_back({offsets[0], {name, t}});
    } catch (const json::exception& e) {
      throw fail("tensor '" + name + "': " + e.what());
    }
  }
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& item : ordered) out.tensors.push_back(std::move(item.second));
  return out;
}

void export_safetensors(Bundle& b, const fs::path& dir) {
  if (b.config.task != config::Task::translation) {
    throw ConfigError("export: only translation models export (this is a language model)");
  }
  // The sentencepiece model that cuts a side's text (an imported vocabulary maps its pieces to the ids written in
  // the vocabularies below).
  const auto spm_bytes = [](const tokenizer::Model& m) -> const std::string& {
    if (const auto* v = dynamic_cast<const tokenizer::VocabModel*>(&m)) return v->spm().bytes();
    if (m.kind() != "sentencepiece") throw ConfigError("export: the tokenizer is not sentencepiece");
    return m.bytes();
  };
  spm_bytes(b.tokenizer->src());
  fs::create_directories(dir);
  const auto& o = b.model->options;
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& p : b.model->named_parameters()) tensors.emplace_back(p.key(), p.value().to(torch::kFloat));
  for (const auto& p : b.model->named_buffers()) tensors.emplace_back(p.key(), p.value().to(torch::kFloat));
  write_safetensors(dir / "model.safetensors", tensors,
                    {{"format", "pt"}, {"producer", "mtx"}, {"weights_sha256", b.weights_sha256}});

  const auto pieces = [](const tokenizer::Model& m) {
    std::vector<std::string> v;
    for (int32_t i = 0; i < m.vocab_size(); ++i) v.push_back(m.piece(i));
    return v;
  };
  const tokenizer::SpecialIds ids = b.tokenizer->special_ids();
  const tokenizer::Model& tgt = b.tokenizer->tgt();
  json files = json::array({"source.spm.model"});
  write_file_atomic(dir / "source.spm.model", spm_bytes(b.tokenizer->src()));
  if (!b.tokenizer->joint()) {
    files.push_back("target.spm.model");
    write_file_atomic(dir / "target.spm.model", spm_bytes(tgt));
  }
  const json meta = {{"format", "mtx-export-1"},
                     {"weights_sha256", b.weights_sha256},
                     {"int8_source", b.model->is_int8()},
                     {"model",
                      {{"task", "translation"},
                       {"d_model", o.d_model()},
                       {"heads", o.heads()},
                       {"encoder_layers", o.encoder_layers()},
                       {"decoder_layers", o.decoder_layers()},
                       {"ffn_dim", o.ffn_dim()},
                       {"max_len", o.max_len()},
                       {"pre_norm", o.pre_norm()},
                       {"positions", config::to_string(o.positions())},
                       {"activation", config::to_string(o.activation())},
                       {"share_embeddings", o.share_embeddings()},
                       {"tie_output", o.tie_output()},
                       {"output_bias", o.tie_output() && o.output_bias()},
                       {"embedding_scale", o.scale_embeddings() ? "sqrt(d_model)" : "1"},
                       {"scale_embeddings", o.scale_embeddings()},
                       {"embedding_norm", o.embedding_norm()},
                       {"position_offset", o.position_offset()},
                       {"share_positions", o.share_positions()},
                       {"layer_norm_epsilon", o.layer_norm_eps()}}},
                     {"names", model::names::as_json()},
                     {"decode", config::to_json(b.config)["decode"]},
                     {"special_ids", {{"pad", ids.pad}, {"unk", ids.unk}, {"bos", ids.bos}, {"eos", ids.eos}}},
                     {"special_pieces",
                      {{"pad", tgt.piece(ids.pad)},
                       {"unk", tgt.piece(ids.unk)},
                       {"bos", tgt.piece(ids.bos)},
                       {"eos", tgt.piece(ids.eos)}}},
                     {"source_appends_eos", true},
                     {"tokenizer_files", files},
                     {"source_vocabulary", pieces(b.tokenizer->src())},
                     {"target_vocabulary", pieces(tgt)}};
  write_file_atomic(dir / "mtx_export.json", meta.dump(1) + "\n");
}

void export_ct2(Bundle& b, const fs::path& dir, const Ct2ExportOptions& options) {
  if (b.config.model.decoder_autoreg == config::DecoderAutoreg::ssru) {
    throw ConfigError(
        "export: CTranslate2 has no SSRU decoder (model.decoder_autoreg ssru, Marian's student models); "
        "mtx export --format safetensors writes the weights");
  }
  if (fs::exists(dir) && !options.force && !fs::is_empty(dir)) {
    throw ConfigError("export: '" + dir.string() + "' exists and is not empty (--force replaces it)");
  }
  ScratchDir scratch("export");
  const fs::path& tmp = scratch.path();
  export_safetensors(b, tmp);
  write_file_atomic(tmp / "ct2_convert.py", std::string(kCt2Converter));
  std::vector<std::string> args = {
      options.python, (tmp / "ct2_convert.py").string(), "--input", tmp.string(), "--output", dir.string()};
  if (!options.quantization.empty()) {
    args.insert(args.end(), {"--quantization", options.quantization});
  }
  if (options.force || fs::exists(dir)) args.push_back("--force");
  log::info("converting with CTranslate2's specs: {}", options.python);
  const int status = run_process(args);
  if (status == 127) {
    throw Error("export: cannot run '" + options.python +
                "' (--python names an interpreter with ctranslate2: "
                "python3 -m venv .venv && .venv/bin/pip install ctranslate2 safetensors numpy)");
  }
  if (status != 0) {
    throw Error("export: the CTranslate2 converter failed (exit " + std::to_string(status) +
                "; its message is above). It needs ctranslate2, safetensors and numpy in '" + options.python + "'");
  }
}

}  // namespace mtx::bundle
