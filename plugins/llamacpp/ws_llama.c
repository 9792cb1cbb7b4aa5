/*
 * weightstream for llama.cpp: see ws_llama.h.
 *
 * 1. weightstream opens the checkpoint (headers only).
 * 2. ggml reads the GGUF's metadata; every tensor weightstream produces as
 *    BF16 is re-declared BF16 there, so llama.cpp allocates BF16 tensors
 *    (F32 tensors stay F32). For a split set (weightstream opens every
 *    file from the first), the other files' tensors are declared too:
 *    llama.cpp reads only this metadata and would create them as F32.
 * 3. llama_model_init_from_user allocates every tensor in the buffers of
 *    its choice and calls fill_tensor for each; weightstream writes into
 *    t->data (a host or a device address).
 *
 * In this mode llama.cpp also creates optional tensors the file does not
 * hold (biases, per-tensor weight and input scales, rope frequency factors, an output
 * projection for tied embeddings). They get what their absence means to the
 * normal loader: biases 0 (x + 0), scales and frequency factors 1 (x * 1,
 * theta / 1), the output projection the token embedding; Qwen3's reranker
 * head (read by rank pooling only) 0.
 */
#include "ws_llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "gguf.h"
#include "ws_llama_hf.h"

struct fill_ctx {
    ws_checkpoint *ckpt;
    struct ws_map *map; /* a Hugging Face checkpoint: where each GGUF tensor comes from */
    ws_status status;
    char error[512];
};

static void fail(struct fill_ctx *c, ws_status s, const char *fmt, const char *name, const char *detail) {
    if (c->status != WS_OK) {
        return; /* keep the first failure */
    }
    c->status = s;
    snprintf(c->error, sizeof c->error, fmt, name, detail);
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Where a tensor's data lives, as weightstream needs to know it. */
static ws_destination destination(struct ggml_tensor *t) {
    ws_destination d;
    memset(&d, 0, sizeof d);
    d.data = t->data;
    d.size = ggml_nbytes(t);
    d.memory = WS_MEMORY_HOST;
    if (t->buffer && !ggml_backend_buffer_is_host(t->buffer)) {
        d.memory = WS_MEMORY_CUDA;
        ggml_backend_dev_t dev = ggml_backend_buft_get_device(ggml_backend_buffer_get_type(t->buffer));
        const char *name = dev ? ggml_backend_dev_name(dev) : NULL; /* "CUDA0", "CUDA1", ... */
        d.device = (name && strncmp(name, "CUDA", 4) == 0) ? atoi(name + 4) : 0;
    }
    return d;
}

/* A tensor llama.cpp created that the checkpoint does not hold. */
static void fill_absent(struct fill_ctx *c, struct ggml_tensor *t) {
    const char *name = ggml_get_name(t);
    size_t index;
    if (strcmp(name, "output.weight") == 0 && ws_find_tensor(c->ckpt, "token_embd.weight", &index) == WS_OK) {
        ws_destination d = destination(t);
        ws_status s = ws_load_tensor(c->ckpt, index, WS_DTYPE_BF16, &d);
        if (s != WS_OK) {
            fail(c, s, "tied output.weight from %s: %s", "token_embd.weight", ws_last_error());
        }
        return;
    }
    float value;
    if (ends_with(name, ".bias")) {
        value = 0.0f;
    } else if (strcmp(name, "cls.output.weight") == 0) {
        /* Qwen3's reranker head: only rank pooling (LLAMA_POOLING_TYPE_RANK)
         * reads it, and a model without one has no rank scores to give;
         * zero, so that generation is unaffected. */
        value = 0.0f;
    } else if (ends_with(name, "scale") || strncmp(name, "rope_freqs", 10) == 0 || strncmp(name, "rope_factors", 12) == 0) {
        value = 1.0f;
    } else {
        fail(c, WS_ERR_NOT_FOUND, "llama.cpp needs tensor '%s', which the checkpoint does not hold%s", name, "");
        return;
    }
    if (t->type != GGML_TYPE_F32) {
        fail(c, WS_ERR_UNSUPPORTED, "optional tensor '%s' is not F32 (%s)", name, ggml_type_name(t->type));
        return;
    }
    const int64_t n = ggml_nelements(t);
    float *tmp = malloc((size_t)n * sizeof(float));
    if (!tmp) {
        fail(c, WS_ERR_OUT_OF_MEMORY, "no memory to fill '%s'%s", name, "");
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        tmp[i] = value;
    }
    ggml_backend_tensor_set(t, tmp, 0, ggml_nbytes(t));
    free(tmp);
}

/* Source `index` as `type` into host memory `dst` of `size` bytes. F32
 * from a BF16 or F16 source is widened here (exactly, as convert's
 * .to(torch.float32)): weightstream copies only stored F32 as F32. */
static ws_status load_host(struct fill_ctx *c, size_t index, enum ggml_type type, void *dst, size_t size) {
    ws_destination d;
    memset(&d, 0, sizeof d);
    d.memory = WS_MEMORY_HOST;
    d.data = dst;
    d.size = size;
    if (type == GGML_TYPE_BF16) {
        return ws_load_tensor(c->ckpt, index, WS_DTYPE_BF16, &d);
    }
    if (ws_tensor_nbytes(c->ckpt, index, WS_DTYPE_F32) == size) {
        return ws_load_tensor(c->ckpt, index, WS_DTYPE_F32, &d);
    }
    /* F16 only for a source stored as F16 (its values exactly): every
     * other source is widened from its BF16, as before. */
    ws_tensor_info info;
    int f16 = ws_tensor_info_at(c->ckpt, index, &info) == WS_OK && strcmp(info.dtype, "F16") == 0;
    d.size = size / 2;
    d.data = malloc(d.size);
    if (!d.data) {
        return WS_ERR_OUT_OF_MEMORY;
    }
    ws_status s = ws_load_tensor(c->ckpt, index, f16 ? WS_DTYPE_F16 : WS_DTYPE_BF16, &d);
    if (s == WS_OK && f16) {
        ggml_fp16_to_fp32_row(d.data, dst, (int64_t)(size / 4));
    } else if (s == WS_OK) {
        ggml_bf16_to_fp32_row(d.data, dst, (int64_t)(size / 4));
    }
    free(d.data);
    return s;
}

/* convert's LlamaModel.permute on rows: w.reshape(heads, 2, rows/heads/2,
 * ...).swapaxes(1, 2): row (h, i, j) of the result is row (h, j, i) of
 * the source. Bitwise: rows are moved, not computed. */
static void permute_rows(const char *src, char *dst, int64_t rows, size_t row_bytes, uint32_t heads) {
    int64_t half = rows / heads / 2;
    for (int64_t r = 0; r < rows; r++) {
        int64_t h = r / (2 * half), i = (r % (2 * half)) / 2, j = r % 2;
        memcpy(dst + (size_t)r * row_bytes, src + (size_t)(h * 2 * half + j * half + i) * row_bytes, row_bytes);
    }
}

/* A tensor of a Hugging Face checkpoint: one source or a stack of experts
 * (outermost), straight into t->data when BF16 as stored, else through a
 * host buffer (widened to F32, or rows permuted) and ggml_backend_tensor_set. */
static void fill_mapped(struct fill_ctx *c, struct ggml_tensor *t, struct ws_map_entry *e) {
    e->filled = 1;
    if (e->n_src == 0) { /* computed by the library (Llama 3's rope factors): F32 as declared */
        if (e->data && t->type == GGML_TYPE_F32) {
            ggml_backend_tensor_set(t, e->data, 0, ggml_nbytes(t));
        } else {
            fail(c, WS_ERR_INTERNAL, "'%s': a computed tensor without %s", e->name, "F32 data");
        }
        return;
    }
    const size_t nbytes = ggml_nbytes(t), per = nbytes / e->n_src;
    if (e->source_rows) { /* a row range of one source: the whole source through a host buffer */
        int64_t rows = ggml_n_dims(t) == 1 ? t->ne[0] : t->ne[1];
        size_t row_bytes = nbytes / (size_t)rows, all = row_bytes * (size_t)e->source_rows;
        char *whole = e->n_src == 1 && e->row_start + (uint64_t)rows <= e->source_rows ? malloc(all) : NULL;
        ws_status s = whole ? load_host(c, e->src[0], t->type, whole, all) : WS_ERR_OUT_OF_MEMORY;
        if (s == WS_OK) {
            ggml_backend_tensor_set(t, whole + e->row_start * row_bytes, 0, nbytes);
        } else {
            fail(c, s, "'%s': %s", e->name, whole ? ws_last_error() : "cannot take its rows");
        }
        free(whole);
        return;
    }
    if (t->type == GGML_TYPE_BF16 && e->permute_heads == 0) {
        for (size_t k = 0; k < e->n_src && c->status == WS_OK; k++) {
            ws_destination d = destination(t);
            d.data = (char *)t->data + k * per;
            d.size = per;
            ws_status s = ws_load_tensor(c->ckpt, e->src[k], WS_DTYPE_BF16, &d);
            if (s != WS_OK) {
                fail(c, s, "'%s': %s", e->name, ws_last_error());
            }
        }
        return;
    }
    char *buf = malloc(nbytes), *tmp = NULL;
    if (!buf) {
        fail(c, WS_ERR_OUT_OF_MEMORY, "no memory to fill '%s'%s", e->name, "");
        return;
    }
    for (size_t k = 0; k < e->n_src && c->status == WS_OK; k++) {
        ws_status s = load_host(c, e->src[k], t->type, buf + k * per, per);
        if (s != WS_OK) {
            fail(c, s, "'%s': %s", e->name, ws_last_error());
        }
    }
    int64_t rows = ggml_n_dims(t) == 1 ? t->ne[0] : t->ne[1];
    if (c->status == WS_OK && e->permute_heads) {
        if (e->n_src != 1 || rows % (2 * (int64_t)e->permute_heads) != 0 || !(tmp = malloc(nbytes))) {
            fail(c, WS_ERR_UNSUPPORTED, "'%s': cannot permute its rows by %s heads", e->name, "its");
        } else {
            permute_rows(buf, tmp, rows, nbytes / (size_t)rows, e->permute_heads);
        }
    }
    if (c->status == WS_OK) {
        ggml_backend_tensor_set(t, tmp ? tmp : buf, 0, nbytes);
    }
    free(tmp);
    free(buf);
}

static void fill_tensor(struct ggml_tensor *t, void *userdata) {
    struct fill_ctx *c = userdata;
    if (c->status != WS_OK) {
        return;
    }
    size_t index;
    const char *name = ggml_get_name(t);
    if (c->map) {
        struct ws_map_entry *e = ws_map_find(c->map, name);
        if (e) {
            fill_mapped(c, t, e);
        } else {
            fill_absent(c, t);
        }
        return;
    }
    if (ws_find_tensor(c->ckpt, name, &index) != WS_OK) {
        fill_absent(c, t);
        return;
    }
    ws_dtype dtype;
    switch (t->type) {
        case GGML_TYPE_BF16: dtype = WS_DTYPE_BF16; break;
        case GGML_TYPE_F32: dtype = WS_DTYPE_F32; break;
        case GGML_TYPE_F16: dtype = WS_DTYPE_F16; break;
        default:
            fail(c, WS_ERR_UNSUPPORTED, "llama.cpp allocated '%s' as %s", name, ggml_type_name(t->type));
            return;
    }
    ws_destination d = destination(t);
    ws_status s = ws_load_tensor(c->ckpt, index, dtype, &d);
    if (s != WS_OK) {
        fail(c, s, "'%s': %s", name, ws_last_error());
    }
}

/* Declare tensor `name` in the metadata. llama_model_init_from_user creates
 * every tensor it needs with the type declared here, and as F32 when none
 * is: so every tensor weightstream fills must be declared. `shape` is
 * weightstream's (outermost dimension first); ggml's run innermost first.
 * gguf_add_tensor copies the struct, so a stack tensor is enough. */
ws_status ws_gguf_declare(struct gguf_context *meta, const char *name, enum ggml_type type, const uint64_t *shape,
                         uint32_t n_dims, char *error, size_t error_size) {
    if (n_dims < 1 || n_dims > GGML_MAX_DIMS || strlen(name) >= GGML_MAX_NAME) {
        snprintf(error, error_size, "tensor '%s': %u dimensions or a name of %zu bytes do not fit a ggml tensor", name,
                 (unsigned)n_dims, strlen(name));
        return WS_ERR_UNSUPPORTED;
    }
    struct ggml_tensor t;
    memset(&t, 0, sizeof t);
    t.type = type;
    for (int d = 0; d < GGML_MAX_DIMS; d++) {
        t.ne[d] = d < (int)n_dims ? (int64_t)shape[n_dims - 1 - d] : 1;
    }
    t.nb[0] = ggml_type_size(type);
    t.nb[1] = ggml_row_size(type, t.ne[0]);
    for (int d = 2; d < GGML_MAX_DIMS; d++) {
        t.nb[d] = t.nb[d - 1] * (size_t)t.ne[d - 1];
    }
    ggml_set_name(&t, name);
    gguf_add_tensor(meta, &t);
    return WS_OK;
}

/* Re-declare in the metadata, as BF16, every tensor weightstream will
 * produce as BF16; declare the tensors of a split set's other files (the
 * first file's metadata lists only its own); declare a BF16 output.weight
 * for tied embeddings. */
static ws_status retype(struct gguf_context *meta, ws_checkpoint *ckpt, char *error, size_t error_size) {
    int64_t n = gguf_get_n_tensors(meta);
    for (int64_t i = 0; i < n; i++) {
        const char *name = gguf_get_tensor_name(meta, i);
        enum ggml_type type = gguf_get_tensor_type(meta, i);
        if (type == GGML_TYPE_F32) {
            continue; /* copied as F32 */
        }
        size_t index;
        if (ws_find_tensor(ckpt, name, &index) != WS_OK || ws_tensor_nbytes(ckpt, index, WS_DTYPE_BF16) == 0) {
            snprintf(error, error_size, "tensor '%s' (%s) cannot be loaded as BF16: weightstream has no dequantization kernel for %s",
                     name, ggml_type_name(type), ggml_type_name(type));
            return WS_ERR_UNSUPPORTED;
        }
        gguf_set_tensor_type(meta, name, GGML_TYPE_BF16);
    }
    size_t count = ws_tensor_count(ckpt);
    for (size_t i = 0; i < count; i++) {
        ws_tensor_info info;
        ws_status s = ws_tensor_info_at(ckpt, i, &info);
        if (s != WS_OK) {
            snprintf(error, error_size, "%s", ws_last_error());
            return s;
        }
        if (gguf_find_tensor(meta, info.name) >= 0) {
            continue; /* in the first file: done above */
        }
        /* Stored F32 stays F32 (copied), as in the first file. */
        enum ggml_type type = ws_tensor_nbytes(ckpt, i, WS_DTYPE_F32) != 0 ? GGML_TYPE_F32 : GGML_TYPE_BF16;
        if (type == GGML_TYPE_BF16 && !info.loadable) {
            snprintf(error, error_size, "tensor '%s' (%s) cannot be loaded as BF16: weightstream has no dequantization kernel for %s",
                     info.name, info.dtype, info.dtype);
            return WS_ERR_UNSUPPORTED;
        }
        s = ws_gguf_declare(meta, info.name, type, info.shape, info.n_dims, error, error_size);
        if (s != WS_OK) {
            return s;
        }
    }
    size_t embd;
    if (gguf_find_tensor(meta, "output.weight") < 0 && ws_find_tensor(ckpt, "token_embd.weight", &embd) == WS_OK) {
        ws_tensor_info info;
        ws_tensor_info_at(ckpt, embd, &info);
        return ws_gguf_declare(meta, "output.weight", GGML_TYPE_BF16, info.shape, info.n_dims, error, error_size);
    }
    return WS_OK;
}

struct llama_model *ws_llama_model_load(const char *path, struct llama_model_params params,
                                        ws_status *status, char *error, size_t error_size) {
    char scratch[512];
    if (!error || error_size == 0) {
        error = scratch;
        error_size = sizeof scratch;
    }
    error[0] = '\0';
    ws_status s = WS_OK;
    struct llama_model *model = NULL;
    struct gguf_context *meta = NULL;
    ws_checkpoint *ckpt = NULL;
    struct ws_map map = {NULL, 0};
    const int hf = ws_hf_is_checkpoint(path);

    s = ws_open(path, &ckpt);
    if (s != WS_OK) {
        snprintf(error, error_size, "%s", ws_last_error());
        goto done;
    }
    if (hf) {
        s = ws_hf_metadata(ckpt, &meta, &map, error, error_size);
        if (s != WS_OK) {
            goto done;
        }
    } else {
        struct gguf_init_params gp = {true, NULL};
        meta = gguf_init_from_file(path, gp);
        if (!meta) {
            s = WS_ERR_FORMAT;
            snprintf(error, error_size, "%s: ggml cannot read the GGUF metadata", path);
            goto done;
        }
        s = retype(meta, ckpt, error, error_size);
        if (s != WS_OK) {
            goto done;
        }
    }
    struct fill_ctx c;
    memset(&c, 0, sizeof c);
    c.ckpt = ckpt;
    c.map = hf ? &map : NULL;
    c.status = WS_OK;
    model = llama_model_init_from_user(meta, fill_tensor, &c, params);
    /* A checkpoint tensor llama.cpp never asked for would be silently
     * dropped: refused instead, naming it. */
    for (size_t i = 0; model && c.status == WS_OK && i < map.n; i++) {
        if (!map.entries[i].filled) {
            fail(&c, WS_ERR_UNSUPPORTED, "llama.cpp's %s model has no use for tensor '%s'", gguf_get_val_str(meta, gguf_find_key(meta, "general.architecture")),
                 map.entries[i].name);
        }
    }
    if (!model) {
        s = c.status != WS_OK ? c.status : WS_ERR_INTERNAL;
        snprintf(error, error_size, "%s", c.status != WS_OK ? c.error : "llama_model_init_from_user failed (see llama.cpp's log)");
    } else if (c.status != WS_OK) {
        s = c.status;
        snprintf(error, error_size, "%s", c.error);
        llama_model_free(model);
        model = NULL;
    }
done:
    ws_map_free(&map);
    if (meta) {
        gguf_free(meta);
    }
    ws_close(ckpt);
    if (status) {
        *status = s;
    }
    return model;
}
