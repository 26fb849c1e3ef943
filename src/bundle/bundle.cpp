#include "mtx/bundle/bundle.h"

#include <minizip/unzip.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <regex>
#include <sstream>
#include <utility>
#include <vector>

#include "mtx/model/linear.h"
#include "mtx/util/atomic_file.h"
#include "mtx/util/errors.h"
#include "mtx/util/hash.h"
#include "mtx/util/system.h"
#include "mtx/util/zip_entry.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtx::bundle {

const char* const kExtraParts[4] = {"mtx_state", "mtx_optimizer", "rng_cpu", "rng_cuda"};

namespace {

constexpr const char* kFormat = "mtx-checkpoint-1";

torch::Tensor bytes_tensor(const std::string& bytes) {
  torch::Tensor t = torch::empty({int64_t(bytes.size())}, torch::kUInt8);
  if (!bytes.empty()) std::memcpy(t.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  return t;
}

std::string tensor_bytes(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kCPU).contiguous();
  return std::string(reinterpret_cast<const char*>(c.data_ptr<uint8_t>()), size_t(c.numel()));
}

void write_string(torch::serialize::OutputArchive& a, const std::string& key, const std::string& value) {
  a.write(key, bytes_tensor(value), /*is_buffer=*/true);
}

std::string read_string(torch::serialize::InputArchive& a, const std::string& key, const fs::path& path) {
  torch::Tensor t;
  if (!a.try_read(key, t, /*is_buffer=*/true)) {
    throw DataError(path.string() + ": not an mtx checkpoint (no '" + key + "')");
  }
  return tensor_bytes(t);
}

// One sha256 over the named parts of a file that no other hash covers (format, config, training state,
// optimizer state, random generator state) and the tokenizer's and weights' own hashes: a flipped byte in
// any of them is a DataError, never a model or a resumed run that silently differs. The order is the file
// format's (older files verify with it).
constexpr const char* kHashedParts[] = {
    "mtx_format", "mtx_config", "mtx_state", "mtx_tokenizer_sha256", "mtx_weights_sha256", "mtx_optimizer",
    "rng_cpu",    "rng_cuda",   "mtx_int8"};
using Parts = std::map<std::string, std::string>;

std::string parts_sha256(const Parts& parts) {
  Sha256 h;
  for (const char* name : kHashedParts) {  // one order for writing and reading
    const auto it = parts.find(name);
    if (it == parts.end()) continue;
    h.update(it->first + "\n" + std::to_string(it->second.size()) + "\n");
    h.update(it->second);
  }
  return h.hex();
}

bool is_extra(const std::string& name) {
  return std::any_of(std::begin(kExtraParts), std::end(kExtraParts), [&](const char* e) { return name == e; });
}

// An int8 model's weights: Module::save's layout, except that each int8 Linear stores "weight" as its int8
// values and "weight_scale" as their per-row scales, and a tied int8 output projection its own pair at the top.
// `tied` is the target embedding when it holds a tied int8 output projection's dequantized values: its weight
// is not written (the projection's int8 values are).
void save_int8_weights(const torch::nn::Module& m, torch::serialize::OutputArchive& a, const torch::nn::Module* tied) {
  const auto* linear = dynamic_cast<const model::LinearImpl*>(&m);
  for (const auto& p : m.named_parameters(/*recurse=*/false)) {
    if (&m == tied && p.key() == "weight") continue;
    if (linear && linear->is_int8() && p.key() == "weight") {
      a.write("weight", linear->int8().weight().values);
      a.write("weight_scale", linear->int8().weight().scales);
    } else {
      a.write(p.key(), p.value());
    }
  }
  for (const auto& b : m.named_buffers(/*recurse=*/false)) a.write(b.key(), b.value(), /*is_buffer=*/true);
  for (const auto& child : m.named_children()) {
    torch::serialize::OutputArchive sub(a.compilation_unit());
    save_int8_weights(*child.value(), sub, tied);
    a.write(child.key(), sub);
  }
}

// Reads what save_int8_weights wrote; the int8 layers are packed once every parameter (their biases
// included) has been read. `tied`'s weight may be absent (it is rebuilt from the tied int8 projection).
void load_int8_weights(torch::nn::Module& m, torch::serialize::InputArchive& a,
                       std::vector<std::pair<model::LinearImpl*, model::int8::Weight>>& int8_layers,
                       const torch::nn::Module* tied) {
  auto* linear = dynamic_cast<model::LinearImpl*>(&m);
  for (auto& p : m.named_parameters(/*recurse=*/false)) {
    if (&m == tied && p.key() == "weight") {
      a.try_read(p.key(), p.value());  // written before mtx left it out
      continue;
    }
    if (linear && p.key() == "weight") {
      if (torch::Tensor scales; a.try_read("weight_scale", scales)) {
        torch::Tensor values;
        a.read("weight", values);
        int8_layers.emplace_back(linear, model::int8::Weight{values, scales});
        continue;
      }
    }
    a.read(p.key(), p.value());
  }
  for (auto& b : m.named_buffers(/*recurse=*/false)) a.read(b.key(), b.value(), /*is_buffer=*/true);
  for (const auto& child : m.named_children()) {
    torch::serialize::InputArchive sub;
    a.read(child.key(), sub);
    load_int8_weights(*child.value(), sub, int8_layers, tied);
  }
}

}  // namespace

std::string short_what(const std::exception& e) {
  std::string what = e.what();
  if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) what = ce->what_without_backtrace();
  what.erase(0, std::min(what.size(), what.find_first_not_of(" \n")));  // some start with a newline
  return what.substr(0, what.find('\n')).substr(0, 200);
}

model::Transformer build_model(const config::Config& config, const tokenizer::Tokenizer& tok, bool filled) {
  const model::TransformerOptions options = model::options_from_config(
      config.model, tok.src().vocab_size(), tok.tgt().vocab_size(), tok.special_ids().pad, config.task);
  if (filled) return model::Transformer(options);
  return model::Transformer(std::make_shared<model::TransformerImpl>(options, model::TransformerImpl::Unfilled{}));
}

std::string weights_sha256(model::Transformer& model) {
  Sha256 h;
  std::string last;
  model->visit_weights([&](const std::string& name, c10::IntArrayRef sizes, const torch::Tensor& rows) {
    if (name != last || last.empty()) {  // a weight's first block: its name and shape
      std::ostringstream shape;
      shape << name << sizes << "\n";
      h.update(shape.str());
      last = name;
    }
    const torch::Tensor c = rows.detach().to(torch::kCPU, torch::kFloat).contiguous();
    h.update(c.data_ptr<float>(), size_t(c.numel()) * sizeof(float));
  });
  return h.hex();
}

bool weights_finite(model::Transformer& model) {
  torch::NoGradGuard no_grad;
  for (const auto& p : model->parameters()) {
    if (!torch::isfinite(p).all().item<bool>()) return false;
  }
  return true;
}

void save_bundle(const fs::path& path, const config::Config& config, const tokenizer::Tokenizer& tok,
                 model::Transformer& model, const std::map<std::string, std::string>& extra) {
  const auto modules = model->modules();
  if (model->embedding_released() || std::any_of(modules.begin(), modules.end(), [](const auto& m) {
        const auto* linear = m->template as<model::LinearImpl>();
        return linear && linear->released();
      })) {
    throw Error("refusing to write " + path.string() +
                ": the model was loaded for inference only (bundle::load_for_inference)");
  }
  if (!weights_finite(model)) {
    throw Error("refusing to write " + path.string() + ": the model has non-finite weights");
  }
  Parts parts = {{"mtx_format", kFormat},
                 {"mtx_config", config::to_json(config).dump()},
                 {"mtx_tokenizer_sha256", tok.hash()},
                 {"mtx_weights_sha256", weights_sha256(model)}};
  for (const auto& [name, bytes] : extra) {
    if (!is_extra(name)) throw Error("save_bundle: '" + name + "' is not a part of the file format");
    parts.emplace(name, bytes);
  }
  if (model->is_int8()) {
    parts.emplace("mtx_int8", json{{"scheme", "per-row symmetric int8 weights, per-row dynamic activations"},
                                   {"output", model->int8_output()}}
                                  .dump());
  }
  torch::serialize::OutputArchive archive;
  for (const auto& [name, bytes] : parts) write_string(archive, name, bytes);
  write_string(archive, "mtx_tokenizer_src", tok.src().bytes());
  write_string(archive, "mtx_tokenizer_tgt", tok.joint() ? std::string() : tok.tgt().bytes());
  write_string(archive, "mtx_sha256", parts_sha256(parts));
  torch::serialize::OutputArchive weights;
  if (model->is_int8()) {
    save_int8_weights(*model, weights, model->tied_output_int8().defined() ? model->tgt_embed.get() : nullptr);
    if (model->tied_output_int8().defined()) {
      weights.write("tied_output_weight", model->tied_output_int8().weight().values);
      weights.write("tied_output_weight_scale", model->tied_output_int8().weight().scales);
    }
  } else {
    model->save(weights);
  }
  archive.write("model", weights);
  // torch's zip writer aborts the process when a write fails (it throws again from its destructor): it gets a
  // sink that never fails, and write_file_atomic checks the stream afterwards ("disk full?", one error).
  write_file_atomic(path, [&](std::ostream& out) {
    archive.save_to([&out](const void* data, size_t n) -> size_t {
      out.write(static_cast<const char*>(data), std::streamsize(n));
      return n;
    });
  });
}

namespace {

// Empties every parameter's storage (each keeps its shape: model::placeholder) before the file's tensors
// replace them, so loading never holds the freshly initialised weights beside the file's. Returns the shapes
// the config builds, by name.
std::map<std::string, std::vector<int64_t>> empty_parameters(model::Transformer& model) {
  torch::NoGradGuard no_grad;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (auto& p : model->named_parameters()) {
    shapes.emplace(p.key(), p.value().sizes().vec());
    p.value().set_(model::placeholder(p.value()));
  }
  return shapes;
}

// After a load: every parameter has the shape the config builds and holds the file's values (not a
// placeholder), except the released ones.
void check_loaded(model::Transformer& model, const std::map<std::string, std::vector<int64_t>>& shapes,
                  const fs::path& path) {
  std::map<const void*, bool> released;
  for (const auto& m : model->modules(/*include_self=*/false)) {
    if (const auto* linear = m->as<model::LinearImpl>(); linear && linear->released()) {
      released[linear->weight.unsafeGetTensorImpl()] = true;
    }
  }
  if (model->tgt_embed && model->embedding_released()) released[model->tgt_embed->weight.unsafeGetTensorImpl()] = true;
  for (const auto& p : model->named_parameters()) {
    const torch::Tensor& t = p.value();
    if (t.sizes().vec() != shapes.at(p.key())) {
      std::ostringstream msg;
      msg << path.string() << ": weight '" << p.key() << "' has shape " << t.sizes() << ", its config builds "
          << c10::IntArrayRef(shapes.at(p.key())) << " (a file from another model?)";
      throw DataError(msg.str());
    }
    const bool placeholder =
        t.numel() > 1 && std::all_of(t.strides().begin(), t.strides().end(), [](int64_t s) { return s == 0; });
    if (placeholder && !released.count(t.unsafeGetTensorImpl())) {
      throw DataError(path.string() + ": weight '" + p.key() + "' is missing");
    }
  }
}

Bundle load_bundle_impl(const fs::path& path, const torch::Device& device, ExtraParts* extra, bool lean);

}  // namespace

Bundle load_bundle(const fs::path& path, const torch::Device& device, ExtraParts* extra) {
  return load_bundle_impl(path, device, extra, /*lean=*/false);
}

namespace {

// LibTorch's unpickler trusts the numbers in a pickle: a LONG_BINPUT's memo index sizes its memo table, so a damaged
// checkpoint could ask for gigabytes (the checkpoint fuzz target found a 17 GB request). Each pickle of the archive is
// walked first, opcode by opcode without running it: every argument must fit in the entry, every memo index must be
// below the entry's size, and an opcode outside pickle's protocols is refused.
void check_pickle(const std::string& where, const std::string& p) {
  const size_t n = p.size();
  size_t i = 0;
  const auto bad = [&](const std::string& why) {
    throw CheckpointError(where + ": not a readable checkpoint (" + why + " at byte " + std::to_string(i) + ")");
  };
  const auto skip = [&](uint64_t k) {
    if (k > n - i) bad("a pickle argument runs past the entry's end");
    i += size_t(k);
  };
  const auto number = [&](size_t k) {  // little-endian, k bytes
    if (k > n - i) bad("a pickle argument runs past the entry's end");
    uint64_t v = 0;
    for (size_t j = 0; j < k; ++j) v |= uint64_t(uint8_t(p[i + j])) << (8 * j);
    i += k;
    return v;
  };
  const auto line = [&] {
    const size_t e = p.find('\n', i);
    if (e == std::string::npos) bad("a pickle line without its end");
    std::string s = p.substr(i, e - i);
    i = e + 1;
    return s;
  };
  const auto memo = [&](uint64_t id) {
    if (id > n) bad("a pickle memo index of " + std::to_string(id) + " in " + std::to_string(n) + " bytes");
  };
  while (i < n) {
    const auto op = uint8_t(p[i++]);
    switch (op) {
      case '.':  // STOP
        return;
      case '(':
      case '0':
      case '1':
      case '2':
      case 'N':
      case 'R':
      case 'a':
      case 'b':
      case 'd':
      case '}':
      case 'e':
      case 'l':
      case ']':
      case 'o':
      case 's':
      case 'u':
      case 't':
      case ')':
      case 'Q':
      case 0x81:
      case 0x85:
      case 0x86:
      case 0x87:
      case 0x88:
      case 0x89:
      case 0x8f:
      case 0x90:
      case 0x91:
      case 0x92:
      case 0x93:
      case 0x94:
      case 0x97:
      case 0x98:
        break;
      case 'K':
      case 'h':
      case 0x80:
      case 0x82:
        number(1);
        break;
      case 'M':
      case 0x83:
        number(2);
        break;
      case 'J':
      case 'j':
      case 0x84:
        number(4);
        break;
      case 'G':
      case 0x95:
        number(8);
        break;
      case 'q':
        memo(number(1));
        break;
      case 'r':
        memo(number(4));
        break;
      case 'U':
      case 'C':
      case 0x8c:
      case 0x8a:
        skip(number(1));
        break;
      case 'T':
      case 'X':
      case 'B':
      case 0x8b:
        skip(number(4));
        break;
      case 0x8d:
      case 0x8e:
      case 0x96:
        skip(number(8));
        break;
      case 'I':
      case 'L':
      case 'F':
      case 'S':
      case 'V':
      case 'P':
      case 'g':
        line();
        break;
      case 'p': {
        const std::string id = line();
        if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) bad("a pickle PUT without an index");
        memo(id.size() > 19 ? UINT64_MAX : std::stoull(id));
        break;
      }
      case 'c':
      case 'i':
        line();
        line();
        break;
      default:
        bad("an unknown pickle opcode " + std::to_string(op));
    }
  }
  bad("a pickle without its STOP");
}

// LibTorch compiles a checkpoint's code/ entries (TorchScript class declarations) on every load, and its front end
// can crash on a damaged one (the checkpoint fuzz target found a SEGV in ScriptTypeParser). torch::serialize's
// OutputArchive writes only module declarations, in a handful of line forms (the same in LibTorch 1.13 and 2.x):
// anything else is refused before LibTorch parses it.
void check_code(const std::string& where, const std::string& text) {
  static const std::regex kLine(
      "|class [A-Za-z_][A-Za-z0-9_]*\\(Module\\):"
      "|  __(parameters|buffers)__ = \\[(\"[A-Za-z_][A-Za-z0-9_]*\", )*\\]"
      "|  __annotations__ = \\[\\]"
      "|  __annotations__\\[\"[A-Za-z0-9_]+\"\\] = __torch__(\\.[A-Za-z_][A-Za-z0-9_]*)+"
      "|  [A-Za-z_][A-Za-z0-9_]* : (Tensor|__torch__(\\.[A-Za-z_][A-Za-z0-9_]*)+)");
  size_t begin = 0;
  for (size_t number = 1; begin <= text.size(); ++number) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    // Lines are short (a module's own names); the cap also bounds std::regex's recursion on a damaged one.
    if (end - begin > 1024 ||
        !std::regex_match(text.begin() + ptrdiff_t(begin), text.begin() + ptrdiff_t(end), kLine)) {
      throw CheckpointError(where + ": not a readable checkpoint (line " + std::to_string(number) +
                            " is not a module declaration as LibTorch's serializer writes one)");
    }
    begin = end + 1;
  }
}

// Every pickle and TorchScript entry, read whole (LibTorch's reader checks no CRC). A file minizip cannot open as a
// zip is left to LibTorch's reader, which says why in its own words.
void check_entries(const fs::path& path) {
  const uint64_t file_size = fs::file_size(path);
  std::unique_ptr<void, int (*)(unzFile)> zip(unzOpen64(path.c_str()), unzClose);
  if (!zip) return;
  for (int status = unzGoToFirstFile(zip.get()); status == UNZ_OK; status = unzGoToNextFile(zip.get())) {
    unz_file_info64 info;
    char name[1024] = {};
    if (unzGetCurrentFileInfo64(zip.get(), &info, name, sizeof name - 1, nullptr, 0, nullptr, 0) != UNZ_OK) {
      throw CheckpointError(path.string() + ": not a readable checkpoint (a damaged zip directory entry)");
    }
    const std::string entry = name;
    const std::string where = path.string() + ": " + entry;
    if (info.uncompressed_size > file_size || info.compressed_size > file_size) {
      throw CheckpointError(where + ": not a readable checkpoint (the entry claims " +
                            std::to_string(info.uncompressed_size) + " bytes in a file of " +
                            std::to_string(file_size) + ")");
    }
    const auto ends_with = [&entry](const char* tail) {
      const size_t k = std::strlen(tail);
      return entry.size() >= k && entry.compare(entry.size() - k, k, tail) == 0;
    };
    const bool pickle = ends_with("pkl");
    const bool code = ends_with(".py") && entry.find("/code/") != std::string::npos;
    if (!pickle && !code) continue;
    std::string bytes(size_t(info.uncompressed_size), '\0');
    if (unzOpenCurrentFile(zip.get()) != UNZ_OK || !read_open_entry(zip.get(), bytes)) {
      throw CheckpointError(where + ": not a readable checkpoint (the entry is truncated or fails its CRC)");
    }
    if (pickle) check_pickle(where, bytes);
    if (code) check_code(where, bytes);
  }
}

// lean: for inference only -- an int8 bundle's layers never build their float weights (load_for_inference).
Bundle load_bundle_impl(const fs::path& path, const torch::Device& device, ExtraParts* extra, bool lean) {
  if (!fs::exists(path)) throw NotFoundError("checkpoint '" + path.string() + "' not found");
  check_entries(path);
  const auto open = [&path] {
    auto archive = std::make_shared<torch::serialize::InputArchive>();
    try {
      archive->load_from(path.string(), torch::Device(torch::kCPU));
    } catch (const std::exception& e) {  // c10::Error from the zip reader, jit::ErrorReport from its code/ part
      throw CheckpointError(path.string() + ": not a readable checkpoint (" + short_what(e) + ")");
    }
    return archive;
  };
  // The file is read twice: for its parts, then (once the model is built and its fresh weights emptied) for
  // its weights, so the model's initial weights and the file's are never in memory together.
  auto archive = open();
  Bundle b;
  b.path = path;
  // Past the zip container every part is checked: a damaged file is one DataError naming it, never a crash
  // or silently wrong weights.
  try {
    if (read_string(*archive, "mtx_format", path) != kFormat) {
      throw DataError(path.string() + ": unsupported checkpoint format (expected " + kFormat + ")");
    }
    Parts parts;
    // (try_read into a defined tensor would set_() it, i.e. repoint the archive's own tensor: fresh ones each time)
    for (const char* name : kHashedParts) {
      if (torch::Tensor part; archive->try_read(name, part, /*is_buffer=*/true))
        parts.emplace(name, tensor_bytes(part));
    }
    if (torch::Tensor t; archive->try_read("mtx_sha256", t, /*is_buffer=*/true)) {
      if (parts_sha256(parts) != tensor_bytes(t)) {
        throw DataError(path.string() + ": contents do not match their recorded sha256 (corrupt file?)");
      }
    }  // else: written before mtx_sha256 existed (weights and tokenizer are still checked below)
    b.config = config::from_json(json::parse(read_string(*archive, "mtx_config", path)));
    b.tokenizer = tokenizer::Tokenizer::from_bytes(read_string(*archive, "mtx_tokenizer_src", path),
                                                   read_string(*archive, "mtx_tokenizer_tgt", path));
    if (b.tokenizer->hash() != read_string(*archive, "mtx_tokenizer_sha256", path)) {
      throw DataError(path.string() + ": embedded tokenizer does not match its recorded hash (corrupt file?)");
    }
    archive.reset();
    release_free_memory();  // (tensors of other sizes follow: the freed pages go back rather than pile up)
    b.model = build_model(b.config, *b.tokenizer, /*filled=*/false);
    const auto shapes = empty_parameters(b.model);
    archive = open();
    torch::serialize::InputArchive weights;
    if (!archive->try_read("model", weights)) throw DataError(path.string() + ": checkpoint has no weights");
    if (parts.count("mtx_int8")) {
      const bool output = json::parse(parts.at("mtx_int8")).at("output").get<bool>();
      const bool keep_float = !lean || !device.is_cpu();
      torch::Tensor tied_scales;
      const bool tied = weights.try_read("tied_output_weight_scale", tied_scales);
      std::vector<std::pair<model::LinearImpl*, model::int8::Weight>> int8_layers;
      load_int8_weights(*b.model, weights, int8_layers, tied ? b.model->tgt_embed.get() : nullptr);
      b.model->eval();
      for (auto& [linear, w] : int8_layers) linear->load_int8(w, keep_float);
      if (tied) {
        torch::Tensor values;
        weights.read("tied_output_weight", values);
        b.model->load_tied_output_int8({values, tied_scales}, keep_float);
      }
      b.model->mark_int8(output);
    } else {
      b.model->load(weights);
    }
    check_loaded(b.model, shapes, path);
    b.weights_sha256 = read_string(*archive, "mtx_weights_sha256", path);
    if (weights_sha256(b.model) != b.weights_sha256) {
      throw DataError(path.string() + ": weights do not match their recorded sha256 (corrupt file?)");
    }
    if (extra) {
      extra->parts.clear();
      for (auto& [name, bytes] : parts) {
        if (is_extra(name)) extra->parts.emplace(name, std::move(bytes));
      }
      extra->archive = archive;
    }
  } catch (const DataError& e) {
    if (std::string(e.what()).rfind(path.string(), 0) == 0) throw CheckpointError(e.what());
    throw CheckpointError(path.string() + ": damaged or not an mtx checkpoint (" + short_what(e) + ")");
  } catch (const ConfigError&) {
    throw;  // a setting (an MTX_* variable read while the layers are built), not the file
  } catch (const std::exception& e) {
    throw CheckpointError(path.string() + ": damaged or not an mtx checkpoint (" + short_what(e) + ")");
  }
  if (b.model->is_int8()) {
    if (!device.is_cpu()) {
      throw ConfigError(path.string() + " is an int8 bundle, which runs on the CPU (use --device cpu), not " +
                        device.str());
    }
    return b;
  }
  b.model->to(device);
  return b;
}

}  // namespace

namespace {

std::vector<Bundle> load_ensemble_impl(const std::vector<fs::path>& paths, const torch::Device& device, bool lean) {
  if (paths.empty()) throw ConfigError("an ensemble needs at least one checkpoint");
  std::vector<Bundle> bundles;
  for (const auto& path : paths) {
    Bundle b = load_bundle_impl(path, device, nullptr, lean);
    if (!bundles.empty() && b.tokenizer->hash() != bundles.front().tokenizer->hash()) {
      throw ConfigError("'" + path.string() + "' has another tokenizer than '" + bundles.front().path.string() +
                        "': an ensemble's models must share one (train them on one prepared corpus)");
    }
    bundles.push_back(std::move(b));
  }
  return bundles;
}

}  // namespace

std::vector<Bundle> load_ensemble(const std::vector<fs::path>& paths, const torch::Device& device) {
  return load_ensemble_impl(paths, device, /*lean=*/false);
}

std::vector<Bundle> load_for_inference(const std::vector<fs::path>& paths, const torch::Device& device,
                                       const std::optional<Int8Options>& int8) {
  std::vector<Bundle> bundles = load_ensemble_impl(paths, device, /*lean=*/true);
  for (auto& b : bundles) {
    if (int8) quantize_int8(b, *int8);
    b.model->eval();
    if (device.is_cpu()) b.model->release_float();
  }
  release_free_memory();  // what loading and packing freed
  return bundles;
}

void quantize_int8(Bundle& b, const Int8Options& options) {
  if (!b.model->parameters().front().device().is_cpu()) {
    throw ConfigError("int8 inference runs on the CPU (use --device cpu)");
  }
  if (model::int8::engine().empty()) {
    throw ConfigError("this LibTorch has no quantized CPU engine (fbgemm, onednn or qnnpack): int8 is unavailable");
  }
  if (b.model->is_int8()) {  // an int8 bundle already
    if (b.model->int8_output() != options.output) {
      throw ConfigError(b.path.string() + " is an int8 bundle with " +
                        (b.model->int8_output() ? "an int8" : "a float") +
                        " output projection: quantize the float checkpoint again to change that");
    }
    return;
  }
  b.model->eval();
  b.model->quantize_int8(options.output);
  b.weights_sha256 = weights_sha256(b.model);
}

}  // namespace mtx::bundle
