/* The plain C ABI of libmtx_spm_shim.so, the only code that touches sentencepiece.
 * mtx loads the shim with dlmopen(LM_ID_NEWLM) so sentencepiece's built-in protobuf never meets
 * libtorch's. Rules: C types only across the boundary; every buffer belongs to the caller; a
 * handle is created and freed by the shim. Functions return 0 on success, MTX_SPM_TOO_SMALL when
 * a caller buffer was too small (*needed says how much), and MTX_SPM_ERROR with a message in err. */
#ifndef MTX_TOKENIZER_SPM_SHIM_H_
#define MTX_TOKENIZER_SPM_SHIM_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MTX_SPM_ABI_VERSION 2
#define MTX_SPM_OK 0
#define MTX_SPM_TOO_SMALL 1
#define MTX_SPM_ERROR (-1)

typedef struct mtx_spm mtx_spm;

int mtx_spm_abi_version(void);

/* Loads a model from its serialized protobuf bytes; NULL on error (message in err). */
mtx_spm* mtx_spm_load(const char* bytes, size_t size, char* err, size_t err_cap);
void mtx_spm_free(mtx_spm* model);

int mtx_spm_vocab_size(const mtx_spm* model);
/* which: 0 = pad, 1 = unk, 2 = bos, 3 = eos; -1 when the model has none. */
int mtx_spm_special_id(const mtx_spm* model, int which);

int mtx_spm_encode(const mtx_spm* model, const char* text, size_t size, int32_t* ids, size_t cap, size_t* needed,
                   char* err, size_t err_cap);
int mtx_spm_decode(const mtx_spm* model, const int32_t* ids, size_t n, char* out, size_t cap, size_t* needed, char* err,
                   size_t err_cap);
int mtx_spm_id_to_piece(const mtx_spm* model, int32_t id, char* out, size_t cap, size_t* needed);

/* Trains a model on `text` (sentences separated by '\n', caller-owned) with sentencepiece trainer
 * flags (names without "--": vocab_size, model_type, ...; no input or model_prefix: no file is
 * read or written, so the model's bytes do not depend on paths). Returns the trained model, or NULL
 * with a message in err. */
mtx_spm* mtx_spm_train(const char* const* keys, const char* const* values, size_t n, const char* text, size_t text_size,
                       char* err, size_t err_cap);

/* The model's serialized protobuf bytes (what mtx_spm_load takes). */
int mtx_spm_serialize(const mtx_spm* model, char* out, size_t cap, size_t* needed);

#ifdef __cplusplus
}
#endif

#endif /* MTX_TOKENIZER_SPM_SHIM_H_ */
