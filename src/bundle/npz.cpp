// read_npz: NumPy .npz archives through minizip (bundle/import.h).
#include <minizip/unzip.h>
#include <torch/torch.h>

#include <cstring>
#include <regex>

#include "mtx/bundle/import.h"
#include "mtx/util/errors.h"
#include "mtx/util/zip_entry.h"

namespace fs = std::filesystem;

namespace mtx::bundle {
namespace {

// The dtype of an .npy header's 'descr' (little-endian or byte-sized only).
torch::ScalarType dtype_of(const std::string& descr, const std::string& where) {
  static const std::pair<const char*, torch::ScalarType> kTypes[] = {
      {"<f4", torch::kFloat}, {"<f2", torch::kHalf}, {"<f8", torch::kDouble}, {"|i1", torch::kChar},
      {"<i1", torch::kChar},  {"|u1", torch::kByte}, {"<u1", torch::kByte},   {"|S1", torch::kByte},
      {"<i2", torch::kShort}, {"<i4", torch::kInt},  {"<i8", torch::kLong},   {"|b1", torch::kBool}};
  for (const auto& [name, type] : kTypes) {
    if (descr == name) return type;
  }
  throw DataError(where + ": dtype '" + descr + "' is not one mtx reads (little-endian floats and integers)");
}

// One .npy file's bytes as a tensor. Format: "\x93NUMPY", version (2 bytes), header length (2 bytes in version
// 1, 4 after), a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)}, the data.
torch::Tensor parse_npy(const std::string& bytes, const std::string& where) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw DataError(where + ": not an .npy array");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = size_t(static_cast<unsigned char>(bytes[8])) | size_t(static_cast<unsigned char>(bytes[9])) << 8;
    start = 10;
  } else if ((major == 2 || major == 3) && bytes.size() >= 12) {
    for (int i = 0; i < 4; ++i) header_len |= size_t(static_cast<unsigned char>(bytes[8 + size_t(i)])) << (8 * i);
    start = 12;
  } else {
    throw DataError(where + ": .npy version " + std::to_string(major) + " is not one mtx reads");
  }
  if (start + header_len > bytes.size()) throw DataError(where + ": truncated .npy header");
  const std::string header = bytes.substr(start, header_len);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([^']*)')"))) {
    throw DataError(where + ": .npy header without 'descr'");
  }
  const torch::ScalarType type = dtype_of(m[1].str(), where);
  if (std::regex_search(header, std::regex(R"('fortran_order'\s*:\s*True)"))) {
    throw DataError(where + ": Fortran-ordered arrays are not read (save C-ordered arrays)");
  }
  if (!std::regex_search(header, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))"))) {
    throw DataError(where + ": .npy header without 'shape'");
  }
  std::vector<int64_t> shape;
  const std::string dims = m[1].str();
  const std::regex number(R"(\d+)");
  for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it) {
    shape.push_back(std::stoll(it->str()));
  }
  const size_t data = start + header_len;
  int64_t count = 1;
  for (const int64_t d : shape) count *= d;
  const size_t need = size_t(count) * c10::elementSize(type);
  if (bytes.size() - data != need) {
    throw DataError(where + ": " + std::to_string(bytes.size() - data) + " data bytes where the shape needs " +
                    std::to_string(need));
  }
  torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(type));
  if (need > 0) std::memcpy(t.data_ptr(), bytes.data() + data, need);
  return t;
}

}  // namespace

std::vector<std::pair<std::string, torch::Tensor>> read_npz(const fs::path& path) {
  if (!fs::exists(path)) throw DataError(path.string() + ": no such file");
  std::unique_ptr<void, int (*)(unzFile)> zip(unzOpen64(path.c_str()), unzClose);
  if (!zip) throw DataError(path.string() + ": not a zip archive (.npz)");
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (int status = unzGoToFirstFile(zip.get()); status == UNZ_OK; status = unzGoToNextFile(zip.get())) {
    unz_file_info64 info;
    char name[4096];
    if (unzGetCurrentFileInfo64(zip.get(), &info, name, sizeof name, nullptr, 0, nullptr, 0) != UNZ_OK) {
      throw DataError(path.string() + ": a damaged zip directory entry");
    }
    std::string entry = name;
    const std::string where = path.string() + ": " + entry;
    if (unzOpenCurrentFile(zip.get()) != UNZ_OK) throw DataError(where + ": cannot be opened");
    std::string bytes(size_t(info.uncompressed_size), '\0');
    if (!read_open_entry(zip.get(), bytes)) {
      throw DataError(where + ": truncated or damaged (its size or CRC does not match)");
    }
    if (entry.size() > 4 && entry.compare(entry.size() - 4, 4, ".npy") == 0) entry.resize(entry.size() - 4);
    out.emplace_back(entry, parse_npy(bytes, where));
  }
  if (out.empty()) throw DataError(path.string() + ": an empty or damaged .npz archive");
  return out;
}

}  // namespace mtx::bundle
