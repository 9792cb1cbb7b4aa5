/*
 * weightstream C API: quantized checkpoints (GGUF Q4_0-Q8_0, K-quants Q2_K-Q6_K, IQ types,
 * MXFP4/NVFP4, TQ1_0/TQ2_0, F16/F32/BF16,
 * FP8 safetensors) loaded as BF16 into memory the caller owns, on the host
 * or on a CUDA device.
 *
 * Link with -lweightstream_c (libweightstream_c.so or .a; see docs/c-api.md).
 *
 * Thread safety: every function may be called from any thread. One
 * ws_checkpoint may be used by several threads at once; loads to a CUDA
 * device through one checkpoint run one at a time (the staging buffers are
 * shared), host loads run concurrently. ws_last_error() is per thread.
 *
 * Errors: every call that can fail returns a ws_status; WS_OK is 0. The
 * message of the last failure on the calling thread is ws_last_error().
 * No call aborts the process on bad input, and a Rust panic never crosses
 * this boundary (it becomes WS_ERR_INTERNAL).
 */
#ifndef WEIGHTSTREAM_H
#define WEIGHTSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WS_API_VERSION 1
#define WS_MAX_DIMS 16

typedef enum ws_status {
    WS_OK = 0,
    WS_ERR_INVALID_ARGUMENT = 1, /* a null pointer, a wrong size, an unknown enum value */
    WS_ERR_FORMAT = 2,           /* the checkpoint is malformed (the message names file, tensor, byte) */
    WS_ERR_UNSUPPORTED = 3,      /* the tensor cannot be produced in the dtype asked for */
    WS_ERR_IO = 4,               /* a file or object cannot be opened or read */
    WS_ERR_NOT_FOUND = 5,        /* no tensor with that name or index */
    WS_ERR_DEVICE = 6,           /* no usable GPU, or a CUDA failure */
    WS_ERR_OUT_OF_MEMORY = 7,    /* host or device memory */
    WS_ERR_CANCELLED = 8,        /* the progress callback returned false */
    WS_ERR_INTERNAL = 9          /* a bug: please report ws_last_error() */
} ws_status;

/* Output element types. BF16 and F16 work for every loadable tensor, each
 * value rounded once (to nearest even) from the format's exact value; a
 * tensor stored as F16 comes back as stored under F16, one stored as BF16
 * under BF16. F32 only for tensors stored as F32 (their bytes are copied). */
typedef enum ws_dtype {
    WS_DTYPE_BF16 = 0,
    WS_DTYPE_F16 = 1,
    WS_DTYPE_F32 = 2
} ws_dtype;

typedef enum ws_memory {
    WS_MEMORY_HOST = 0,
    WS_MEMORY_CUDA = 1
} ws_memory;

/* Where one tensor goes. */
typedef struct ws_destination {
    void *data;       /* host pointer, or CUDA device pointer */
    size_t size;      /* bytes at data: exactly ws_tensor_nbytes(...) */
    ws_memory memory;
    int device;       /* CUDA device ordinal (WS_MEMORY_CUDA) */
    void *stream;     /* CUstream/cudaStream_t whose queued work must finish before the data is
                         written; NULL is the legacy default stream (waited for too, as any
                         stream); the data is complete when the call returns either way */
} ws_destination;

typedef struct ws_tensor_info {
    const char *name;   /* valid until ws_close */
    const char *dtype;  /* stored dtype: "Q4_0", "F8_E4M3", ... (valid until ws_close) */
    uint32_t n_dims;
    uint64_t shape[WS_MAX_DIMS]; /* row-major, outermost dimension first */
    uint64_t n_elements;
    bool loadable;      /* can be produced as BF16 */
} ws_tensor_info;

typedef struct ws_load_request {
    size_t index;        /* tensor index, 0 .. ws_tensor_count() - 1 */
    ws_dtype dtype;
    ws_destination dst;
} ws_load_request;

/* Options for ws_open_with. Zero-initialise, set struct_size, change what you
 * need; zero means the default. */
typedef struct ws_options {
    size_t struct_size;    /* sizeof(ws_options) */
    const char *source;    /* "auto" (default: measures the page cache, then reads through it
                              when the file is warm and with O_DIRECT when cold), "read", "mmap",
                              "direct" (O_DIRECT) or "gds" (cuFile into GPU memory); see ws_sources */
    int threads;           /* CPU dequant threads (0: every core) */
    int staging_slots;     /* buffers read ahead: pinned on the GPU path (0: default) */
    size_t staging_bytes;  /* bytes per read and per buffer (0: default) */
    int readers;           /* threads reading ahead (0: default) */
    int ignore_transforms; /* non-zero: open a GGUF file whose metadata declares a
                              transform of the weights (prism.hadamard.*, ...) that
                              weightstream does not apply, ignoring it (the weights
                              load as stored) */
} ws_options;

/* Called during ws_load_tensors with the fraction done (0..1, by file
 * bytes); return false to cancel. Like llama.cpp's progress_callback. */
typedef bool (*ws_progress_callback)(float progress, void *user_data);

typedef struct ws_checkpoint ws_checkpoint;

/* "0.1.0" */
const char *ws_version(void);
/* WS_API_VERSION of the library (compare with the header's). */
uint32_t ws_api_version(void);

/* The message of the last failure on this thread ("" if none). Valid until
 * the next call on this thread. */
const char *ws_last_error(void);

/* Open a checkpoint: a .gguf or .safetensors file or a directory of shards,
 * or a URL: s3://bucket/key, s3://bucket/prefix/ (credentials from the AWS
 * environment; docs/storage.md) or http(s)://host/file. Reads headers only.
 * On failure *out is NULL (an object store's failure is WS_ERR_IO, a bad
 * URL WS_ERR_INVALID_ARGUMENT; ws_last_error() names the object). */
ws_status ws_open(const char *path, ws_checkpoint **out);
ws_status ws_open_with(const char *path, const ws_options *options, ws_checkpoint **out);
/* Free everything; NULL is allowed. */
void ws_close(ws_checkpoint *ckpt);

/* How the files are read, one line per file: "<path>: <source>" with
 * source read, mmap, direct or gds, followed by " (<why>)" when `auto` chose
 * it or it replaces a source the filesystem refused. Valid until ws_close;
 * "" for NULL. */
const char *ws_sources(const ws_checkpoint *ckpt);

/* Data tensors in file order (FP8 scales are consumed by their weights and
 * activation scales left out, so they are not listed). */
size_t ws_tensor_count(const ws_checkpoint *ckpt);
ws_status ws_tensor_info_at(const ws_checkpoint *ckpt, size_t index, ws_tensor_info *out);
ws_status ws_find_tensor(const ws_checkpoint *ckpt, const char *name, size_t *index);
/* Bytes tensor `index` takes as `dtype`, or 0 if it cannot be produced so. */
size_t ws_tensor_nbytes(const ws_checkpoint *ckpt, size_t index, ws_dtype dtype);

/* Produce one tensor into dst. */
ws_status ws_load_tensor(ws_checkpoint *ckpt, size_t index, ws_dtype dtype, const ws_destination *dst);
/* Produce several: GPU requests for one device share one pipelined pass.
 * progress may be NULL. On failure nothing is left allocated; destinations
 * may be partly written. */
ws_status ws_load_tensors(ws_checkpoint *ckpt, const ws_load_request *requests, size_t count,
                          ws_progress_callback progress, void *user_data);

/* A rectangle of a tensor seen as a matrix (its innermost dimension against
 * all the others): rows [row_begin, row_end), columns [col_begin, col_end).
 * Columns may start and end anywhere: where an edge falls inside a block (32
 * or 256 elements for GGUF quants), the blocks covering it are read and the
 * result trimmed after dequantization. For llama.cpp-style row splits
 * across devices and tensor-parallel shards: only the slice's bytes (its
 * covering blocks) are read and dequantized. */
typedef struct ws_slice {
    uint64_t row_begin, row_end, col_begin, col_end;
} ws_slice;

/* BF16 bytes of a slice of tensor `index`; 0 if the slice is outside the
 * tensor or the tensor cannot become BF16. */
size_t ws_slice_nbytes(const ws_checkpoint *ckpt, size_t index, const ws_slice *slice);
/* The slice as BF16, row-major, into `dst` (sized ws_slice_nbytes). */
ws_status ws_load_slice(ws_checkpoint *ckpt, size_t index, const ws_slice *slice, const ws_destination *dst);

/* llama.cpp's metadata of a Hugging Face checkpoint directory (config.json,
 * tokenizer files, safetensors), as the vendored convert_hf_to_gguf.py
 * --outtype bf16 writes it, for llama.cpp-style loaders
 * (plugins/llamacpp): every key with its GGUF type, and the tensor map:
 * each GGUF tensor's name, type, shape and the checkpoint tensors it is
 * made of, as llama.cpp creates them for a loader that fills them
 * (llama_model_init_from_user: a fused tensor it skips there, Phi-3's
 * attn_qkv, listed as its q, k and v row ranges). Every input is checked first: a config field out of range or
 * disagreeing with a tensor, duplicate token text, an id outside the
 * vocabulary is WS_ERR_FORMAT naming the file and field; an architecture,
 * tokenizer or tensor llama.cpp has no counterpart for, WS_ERR_UNSUPPORTED.
 * Built on the first call and kept: every pointer below is valid until
 * ws_close. */
typedef enum ws_meta_type {
    WS_META_U32 = 0,
    WS_META_F32 = 1,
    WS_META_BOOL = 2,
    WS_META_STRING = 3,
    WS_META_STRING_ARRAY = 4,
    WS_META_F32_ARRAY = 5,
    WS_META_I32_ARRAY = 6,
    WS_META_I32 = 7
} ws_meta_type;

/* One key; the field of its type is set, the others zero. */
typedef struct ws_meta_kv {
    const char *key;
    uint32_t type;                /* a ws_meta_type */
    uint32_t u32;                 /* WS_META_U32 */
    float f32;                    /* WS_META_F32 */
    bool boolean;                 /* WS_META_BOOL */
    const char *string;           /* WS_META_STRING */
    size_t n;                     /* the array types' length */
    const char *const *strings;   /* WS_META_STRING_ARRAY */
    const float *f32s;            /* WS_META_F32_ARRAY */
    const int32_t *i32s;          /* WS_META_I32_ARRAY */
    int32_t i32;                  /* WS_META_I32 (last: the fields above keep their offsets) */
} ws_meta_kv;

/* One GGUF tensor and where its data comes from. */
typedef struct ws_gguf_tensor {
    const char *name;             /* "blk.0.attn_q.weight" */
    uint32_t ggml_type;           /* GGML_TYPE_F32 (0: norms, biases, the MoE router) or GGML_TYPE_BF16 (30) */
    uint32_t n_dims;
    uint64_t shape[WS_MAX_DIMS];  /* outermost first, as ws_tensor_info's */
    const size_t *sources;        /* checkpoint tensor indices: one, or one per expert (stacked, outermost) */
    size_t n_sources;
    uint32_t permute_heads;       /* llama's q/k rows in convert's order (LlamaModel.permute): within each of
                                     this many heads of d rows, row 2i + j is source row j * d / 2 + i; 0: none */
    const float *data;            /* a tensor convert computes rather than reads (Llama 3's rope_freqs.weight):
                                     its F32 values, n_sources 0; NULL otherwise */
    uint64_t row_start;           /* a row range of its one source: rows row_start .. row_start + shape[0] of */
    uint64_t source_rows;         /* a source of this many rows (Phi-3's q, k, v of qkv_proj: llama.cpp creates them
                                     apart when the loader fills them); 0 and 0: the whole source */
} ws_gguf_tensor;

ws_status ws_hf_gguf_metadata(ws_checkpoint *ckpt, size_t *n_kv, size_t *n_tensors);
ws_status ws_hf_gguf_kv(const ws_checkpoint *ckpt, size_t index, ws_meta_kv *out);
ws_status ws_hf_gguf_tensor(const ws_checkpoint *ckpt, size_t index, ws_gguf_tensor *out);

/* Usable CUDA devices (0 when none; ws_last_error() says why). */
int ws_cuda_device_count(void);

/* Layout check for bindings and tests: writes sizes and offsets of the
 * structs above as the library sees them (see
 * crates/weightstream-capi/tests/test_capi.c); returns how many values it
 * wrote, at most `capacity`. */
size_t ws_abi_layout(uint64_t *values, size_t capacity);

#ifdef __cplusplus
}
#endif

#endif /* WEIGHTSTREAM_H */
