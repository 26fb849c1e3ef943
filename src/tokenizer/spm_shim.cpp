// libmtx_spm_shim.so: sentencepiece behind the plain C ABI of mtx/tokenizer/spm_shim.h.
// Built as its own module and never linked into mtx (see the header for why).
#include "mtx/tokenizer/spm_shim.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstring>
#include <exception>
#include <string>
#include <unordered_map>
#include <vector>

#define MTX_EXPORT extern "C" __attribute__((visibility("default")))

struct mtx_spm {
  sentencepiece::SentencePieceProcessor processor;
};

namespace {

void set_error(char* err, size_t cap, const std::string& message) {
  if (!err || cap == 0) return;
  const size_t n = std::min(cap - 1, message.size());
  std::memcpy(err, message.data(), n);
  err[n] = '\0';
}

template <class T>
int copy_out(const T* data, size_t n, T* out, size_t cap, size_t* needed) {
  if (needed) *needed = n;
  if (n > cap) return MTX_SPM_TOO_SMALL;
  if (n) std::memcpy(out, data, n * sizeof(T));
  return MTX_SPM_OK;
}

}  // namespace

MTX_EXPORT int mtx_spm_abi_version(void) { return MTX_SPM_ABI_VERSION; }

MTX_EXPORT mtx_spm* mtx_spm_load(const char* bytes, size_t size, char* err, size_t err_cap) {
  try {
    auto* model = new mtx_spm();
    const auto status = model->processor.LoadFromSerializedProto(std::string(bytes, size));
    if (!status.ok()) {
      set_error(err, err_cap, status.ToString());
      delete model;
      return nullptr;
    }
    return model;
  } catch (const std::exception& e) {
    set_error(err, err_cap, e.what());
    return nullptr;
  }
}

MTX_EXPORT void mtx_spm_free(mtx_spm* model) { delete model; }

MTX_EXPORT int mtx_spm_vocab_size(const mtx_spm* model) { return model->processor.GetPieceSize(); }

MTX_EXPORT int mtx_spm_special_id(const mtx_spm* model, int which) {
  switch (which) {
    case 0:
      return model->processor.pad_id();
    case 1:
      return model->processor.unk_id();
    case 2:
      return model->processor.bos_id();
    case 3:
      return model->processor.eos_id();
    default:
      return -1;
  }
}

MTX_EXPORT int mtx_spm_encode(const mtx_spm* model, const char* text, size_t size, int32_t* ids, size_t cap,
                              size_t* needed, char* err, size_t err_cap) {
  try {
    std::vector<int> pieces;
    const auto status = model->processor.Encode(std::string_view(text, size), &pieces);
    if (!status.ok()) {
      set_error(err, err_cap, status.ToString());
      return MTX_SPM_ERROR;
    }
    static_assert(sizeof(int) == sizeof(int32_t), "int must be 32 bits");
    return copy_out(reinterpret_cast<const int32_t*>(pieces.data()), pieces.size(), ids, cap, needed);
  } catch (const std::exception& e) {
    set_error(err, err_cap, e.what());
    return MTX_SPM_ERROR;
  }
}

MTX_EXPORT int mtx_spm_decode(const mtx_spm* model, const int32_t* ids, size_t n, char* out, size_t cap, size_t* needed,
                              char* err, size_t err_cap) {
  try {
    const std::vector<int> pieces(ids, ids + n);
    std::string text;
    const auto status = model->processor.Decode(pieces, &text);
    if (!status.ok()) {
      set_error(err, err_cap, status.ToString());
      return MTX_SPM_ERROR;
    }
    return copy_out(text.data(), text.size(), out, cap, needed);
  } catch (const std::exception& e) {
    set_error(err, err_cap, e.what());
    return MTX_SPM_ERROR;
  }
}

MTX_EXPORT int mtx_spm_id_to_piece(const mtx_spm* model, int32_t id, char* out, size_t cap, size_t* needed) {
  if (id < 0 || id >= model->processor.GetPieceSize()) return MTX_SPM_ERROR;
  const std::string& piece = model->processor.IdToPiece(id);
  return copy_out(piece.data(), piece.size(), out, cap, needed);
}

namespace {

// Yields the lines of a caller-owned buffer without copying it.
class BufferIterator : public sentencepiece::SentenceIterator {
 public:
  BufferIterator(const char* text, size_t size) : text_(text), size_(size) { advance(); }
  bool done() const override { return done_; }
  void Next() override { advance(); }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }

 private:
  void advance() {
    if (pos_ >= size_) {
      done_ = true;
      return;
    }
    const void* nl = std::memchr(text_ + pos_, '\n', size_ - pos_);
    const size_t end = nl ? size_t(static_cast<const char*>(nl) - text_) : size_;
    value_.assign(text_ + pos_, end - pos_);
    pos_ = end + 1;
  }
  const char* text_;
  size_t size_;
  size_t pos_ = 0;
  bool done_ = false;
  std::string value_;
};

}  // namespace

MTX_EXPORT mtx_spm* mtx_spm_train(const char* const* keys, const char* const* values, size_t n, const char* text,
                                  size_t text_size, char* err, size_t err_cap) {
  try {
    std::unordered_map<std::string, std::string> kwargs;
    for (size_t i = 0; i < n; ++i) kwargs[keys[i]] = values[i];
    BufferIterator sentences(text, text_size);
    std::string serialized;
    const auto status = sentencepiece::SentencePieceTrainer::Train(kwargs, &sentences, &serialized);
    if (!status.ok()) {
      set_error(err, err_cap, status.ToString());
      return nullptr;
    }
    return mtx_spm_load(serialized.data(), serialized.size(), err, err_cap);
  } catch (const std::exception& e) {
    set_error(err, err_cap, e.what());
    return nullptr;
  }
}

MTX_EXPORT int mtx_spm_serialize(const mtx_spm* model, char* out, size_t cap, size_t* needed) {
  const std::string bytes = model->processor.serialized_model_proto();
  return copy_out(bytes.data(), bytes.size(), out, cap, needed);
}
