// Loads libmtx_spm_shim.so into its own link-map namespace and wraps its C ABI in SpmModel.
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "mtx/tokenizer/spm_shim.h"
#include "mtx/tokenizer/tokenizer.h"
#include "mtx/util/errors.h"
#include "mtx/util/hash.h"
#include "mtx/util/strings.h"
#include "mtx/util/system.h"

namespace fs = std::filesystem;

namespace mtx::tokenizer {
namespace {

struct ShimApi {
  decltype(&mtx_spm_abi_version) abi_version = nullptr;
  decltype(&mtx_spm_load) load = nullptr;
  decltype(&mtx_spm_free) free = nullptr;
  decltype(&mtx_spm_vocab_size) vocab_size = nullptr;
  decltype(&mtx_spm_special_id) special_id = nullptr;
  decltype(&mtx_spm_encode) encode = nullptr;
  decltype(&mtx_spm_decode) decode = nullptr;
  decltype(&mtx_spm_id_to_piece) id_to_piece = nullptr;
  decltype(&mtx_spm_train) train = nullptr;
  decltype(&mtx_spm_serialize) serialize = nullptr;
  std::string path;
  std::string mode;
};

// The directory of the binary that holds mtx's code: the executable for the CLI, the extension module for the
// Python package (whatever the CLI finds next to itself, the module finds next to itself).
fs::path code_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&code_dir), &info) == 0 || !info.dli_fname || !*info.dli_fname) return {};
  std::error_code ec;
  const fs::path file = fs::canonical(info.dli_fname, ec);
  return ec ? fs::path() : file.parent_path();
}

std::vector<fs::path> shim_candidates() {
  std::vector<fs::path> out;
  if (const char* env = std::getenv("MTX_SPM_SHIM"); env && *env) out.emplace_back(env);
  if (const fs::path code = code_dir(); !code.empty() && code != executable_dir()) {
    out.push_back(code / MTX_SPM_SHIM_NAME);
  }
  const fs::path exe = executable_dir();
  out.push_back(exe / MTX_SPM_SHIM_NAME);
  out.push_back(exe / ".." / "lib" / "mtx" / MTX_SPM_SHIM_NAME);
  out.push_back(fs::path(MTX_SPM_SHIM_BUILD_DIR) / MTX_SPM_SHIM_NAME);
  out.push_back(fs::path(MTX_SPM_SHIM_INSTALL_DIR) / MTX_SPM_SHIM_NAME);
  return out;
}

template <class F>
void bind(void* handle, const char* name, F& fn, const std::string& path) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  if (!fn) throw Error("sentencepiece shim '" + path + "' lacks symbol " + name + " (stale build?)");
}

ShimApi load_shim() {
  // MTX_SPM_NAMESPACE=shared loads the shim into the global namespace: only for LibTorch builds
  // whose protobuf does not clash with sentencepiece's (e.g. PyTorch wheels).
  const char* ns = std::getenv("MTX_SPM_NAMESPACE");
  const bool shared = ns && std::string(ns) == "shared";
  std::vector<std::string> tried;
  for (const auto& candidate : shim_candidates()) {
    std::error_code ec;
    if (!fs::exists(candidate, ec)) {
      tried.push_back(candidate.string() + " (missing)");
      continue;
    }
    const std::string path = fs::canonical(candidate, ec).string();
    void* handle = shared ? dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)
                          : dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      tried.push_back(path + " (" + (why ? why : "unknown error") + ")");
      continue;
    }
    ShimApi api;
    api.path = path;
    api.mode = shared ? "shared" : "isolated";
    bind(handle, "mtx_spm_abi_version", api.abi_version, path);
    if (api.abi_version() != MTX_SPM_ABI_VERSION) {
      throw Error("sentencepiece shim '" + path + "' has ABI " + std::to_string(api.abi_version()) + ", mtx expects " +
                  std::to_string(MTX_SPM_ABI_VERSION) + " (stale build?)");
    }
    bind(handle, "mtx_spm_load", api.load, path);
    bind(handle, "mtx_spm_free", api.free, path);
    bind(handle, "mtx_spm_vocab_size", api.vocab_size, path);
    bind(handle, "mtx_spm_special_id", api.special_id, path);
    bind(handle, "mtx_spm_encode", api.encode, path);
    bind(handle, "mtx_spm_decode", api.decode, path);
    bind(handle, "mtx_spm_id_to_piece", api.id_to_piece, path);
    bind(handle, "mtx_spm_train", api.train, path);
    bind(handle, "mtx_spm_serialize", api.serialize, path);
    return api;
  }
  throw Error("cannot load the sentencepiece shim " + std::string(MTX_SPM_SHIM_NAME) + "; tried: " + join(tried, "; ") +
              ". Set MTX_SPM_SHIM to its path.");
}

const ShimApi& shim() {
  static const ShimApi api = load_shim();
  return api;
}

}  // namespace

std::string shim_description() { return shim().path + " (" + shim().mode + " namespace)"; }

bool operator==(const SpecialIds& a, const SpecialIds& b) {
  return a.pad == b.pad && a.unk == b.unk && a.bos == b.bos && a.eos == b.eos;
}

Model::Model(std::string bytes) : bytes_(std::move(bytes)), sha256_(sha256_hex(bytes_)) {}

SpmModel::SpmModel(mtx_spm* handle, std::string bytes) : Model(std::move(bytes)), handle_(handle) {
  vocab_size_ = shim().vocab_size(handle_);
  special_ = {shim().special_id(handle_, 0), shim().special_id(handle_, 1), shim().special_id(handle_, 2),
              shim().special_id(handle_, 3)};
}

SpmModel::~SpmModel() { shim().free(handle_); }

std::shared_ptr<const SpmModel> SpmModel::from_bytes(std::string bytes) {
  char err[512] = {0};
  mtx_spm* handle = shim().load(bytes.data(), bytes.size(), err, sizeof err);
  if (!handle) throw DataError(std::string("not a valid sentencepiece model: ") + err);
  return std::shared_ptr<const SpmModel>(new SpmModel(handle, std::move(bytes)));
}

void SpmModel::encode(std::string_view text, std::vector<int32_t>& ids) const {
  // Every byte becomes at most one piece (byte fallback), plus the dummy prefix.
  ids.resize(text.size() + 2);
  char err[512] = {0};
  size_t needed = 0;
  int rc = shim().encode(handle_, text.data(), text.size(), ids.data(), ids.size(), &needed, err, sizeof err);
  if (rc == MTX_SPM_TOO_SMALL) {
    ids.resize(needed);
    rc = shim().encode(handle_, text.data(), text.size(), ids.data(), ids.size(), &needed, err, sizeof err);
  }
  if (rc != MTX_SPM_OK) throw Error(std::string("sentencepiece encode failed: ") + err);
  ids.resize(needed);
}

std::string SpmModel::decode(const int32_t* ids, size_t n) const {
  std::string out(n * 8 + 16, '\0');
  char err[512] = {0};
  size_t needed = 0;
  int rc = shim().decode(handle_, ids, n, out.data(), out.size(), &needed, err, sizeof err);
  if (rc == MTX_SPM_TOO_SMALL) {
    out.resize(needed);
    rc = shim().decode(handle_, ids, n, out.data(), out.size(), &needed, err, sizeof err);
  }
  if (rc != MTX_SPM_OK) throw Error(std::string("sentencepiece decode failed: ") + err);
  out.resize(needed);
  return out;
}

std::string SpmModel::piece(int32_t id) const {
  std::string out(64, '\0');
  size_t needed = 0;
  int rc = shim().id_to_piece(handle_, id, out.data(), out.size(), &needed);
  if (rc == MTX_SPM_TOO_SMALL) {
    out.resize(needed);
    rc = shim().id_to_piece(handle_, id, out.data(), out.size(), &needed);
  }
  if (rc != MTX_SPM_OK) throw Error("piece id " + std::to_string(id) + " is out of range");
  out.resize(needed);
  return out;
}

std::shared_ptr<const SpmModel> SpmModel::train(const std::vector<std::pair<std::string, std::string>>& flags,
                                                std::string_view text) {
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : flags) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  char err[1024] = {0};
  mtx_spm* handle = shim().train(keys.data(), values.data(), keys.size(), text.data(), text.size(), err, sizeof err);
  if (!handle) throw Error(std::string("sentencepiece training failed: ") + err);
  size_t needed = 0;
  shim().serialize(handle, nullptr, 0, &needed);  // size query
  std::string bytes(needed, '\0');
  if (shim().serialize(handle, bytes.data(), bytes.size(), &needed) != MTX_SPM_OK) {
    shim().free(handle);
    throw Error("sentencepiece: cannot serialize the trained model");
  }
  return std::shared_ptr<const SpmModel>(new SpmModel(handle, std::move(bytes)));
}

}  // namespace mtx::tokenizer
