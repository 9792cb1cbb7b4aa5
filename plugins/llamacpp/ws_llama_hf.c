/*
 * A Hugging Face checkpoint as llama.cpp metadata: the keys and the tensor
 * map the C API builds (ws_hf_gguf_*), handed to gguf_set_* and declared;
 * no JSON, tokenizer or architecture logic here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ws_llama_hf.h"

int ws_hf_is_checkpoint(const char *path) {
    char p[4096];
    struct stat st;
    snprintf(p, sizeof p, "%s/config.json", path);
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && stat(p, &st) == 0;
}

void ws_map_free(struct ws_map *map) {
    free(map->entries);
    map->entries = NULL;
    map->n = 0;
}

struct ws_map_entry *ws_map_find(const struct ws_map *map, const char *name) {
    for (size_t i = 0; i < map->n; i++) {
        if (!strcmp(map->entries[i].name, name)) return &map->entries[i];
    }
    return NULL;
}

static ws_status set_kv(struct gguf_context *meta, const ws_meta_kv *kv) {
    switch (kv->type) {
        case WS_META_U32: gguf_set_val_u32(meta, kv->key, kv->u32); break;
        case WS_META_F32: gguf_set_val_f32(meta, kv->key, kv->f32); break;
        case WS_META_BOOL: gguf_set_val_bool(meta, kv->key, kv->boolean); break;
        case WS_META_STRING: gguf_set_val_str(meta, kv->key, kv->string); break;
        case WS_META_STRING_ARRAY: gguf_set_arr_str(meta, kv->key, (const char **)kv->strings, kv->n); break;
        case WS_META_F32_ARRAY: gguf_set_arr_data(meta, kv->key, GGUF_TYPE_FLOAT32, kv->f32s, kv->n); break;
        case WS_META_I32_ARRAY: gguf_set_arr_data(meta, kv->key, GGUF_TYPE_INT32, kv->i32s, kv->n); break;
        case WS_META_I32: gguf_set_val_i32(meta, kv->key, kv->i32); break;
        default: return WS_ERR_INTERNAL;
    }
    return WS_OK;
}

/* Can every source be produced as the declared type? BF16 needs a
 * dequantization; F32 takes a stored F32 or F16 too (widened in ws_llama.c).
 * A computed tensor (data) has none. */
static ws_status check_sources(ws_checkpoint *ckpt, const ws_gguf_tensor *t, char *error, size_t error_size) {
    for (size_t k = 0; k < t->n_sources; k++) {
        size_t i = t->sources[k];
        int ok = ws_tensor_nbytes(ckpt, i, WS_DTYPE_BF16) != 0 ||
                 (t->ggml_type == GGML_TYPE_F32 && (ws_tensor_nbytes(ckpt, i, WS_DTYPE_F32) || ws_tensor_nbytes(ckpt, i, WS_DTYPE_F16)));
        if (!ok) {
            ws_tensor_info info;
            ws_tensor_info_at(ckpt, i, &info);
            snprintf(error, error_size, "tensor '%s' (%s) cannot be loaded: weightstream does not produce it", info.name, info.dtype);
            return WS_ERR_UNSUPPORTED;
        }
    }
    return WS_OK;
}

ws_status ws_hf_metadata(ws_checkpoint *ckpt, struct gguf_context **out, struct ws_map *map, char *error, size_t error_size) {
    size_t n_kv = 0, n_tensors = 0;
    memset(map, 0, sizeof *map);
    *out = NULL;
    ws_status s = ws_hf_gguf_metadata(ckpt, &n_kv, &n_tensors);
    if (s != WS_OK) {
        snprintf(error, error_size, "%s", ws_last_error());
        return s;
    }
    struct gguf_context *meta = gguf_init_empty();
    map->entries = calloc(n_tensors + 1, sizeof *map->entries); /* + a tied output.weight */
    if (!meta || !map->entries) {
        snprintf(error, error_size, "no memory for the metadata of %zu tensors", n_tensors);
        s = WS_ERR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; s == WS_OK && i < n_kv; i++) {
        ws_meta_kv kv;
        s = ws_hf_gguf_kv(ckpt, i, &kv);
        if (s == WS_OK) s = set_kv(meta, &kv);
        if (s != WS_OK) snprintf(error, error_size, "metadata key %zu: %s", i, ws_last_error());
    }
    struct ws_map_entry *embd = NULL;
    ws_gguf_tensor embd_t;
    for (size_t i = 0; s == WS_OK && i < n_tensors; i++) {
        ws_gguf_tensor t;
        s = ws_hf_gguf_tensor(ckpt, i, &t);
        if (s != WS_OK) {
            snprintf(error, error_size, "%s", ws_last_error());
            break;
        }
        s = check_sources(ckpt, &t, error, error_size);
        if (s == WS_OK) s = ws_gguf_declare(meta, t.name, (enum ggml_type)t.ggml_type, t.shape, t.n_dims, error, error_size);
        if (s != WS_OK) break;
        struct ws_map_entry *e = &map->entries[map->n++];
        snprintf(e->name, sizeof e->name, "%s", t.name);
        e->src = t.sources;
        e->n_src = t.n_sources;
        e->permute_heads = t.permute_heads;
        e->data = t.data;
        e->row_start = t.row_start;
        e->source_rows = t.source_rows;
        if (!strcmp(t.name, "token_embd.weight")) {
            embd = e;
            embd_t = t;
        }
    }
    if (s == WS_OK && embd && !ws_map_find(map, "output.weight")) {
        /* Tied embeddings: convert writes no output.weight and llama.cpp
         * then multiplies by token_embd; the adapter declares it as that. */
        struct ws_map_entry *o = &map->entries[map->n++];
        *o = *embd;
        snprintf(o->name, sizeof o->name, "output.weight");
        s = ws_gguf_declare(meta, "output.weight", GGML_TYPE_BF16, embd_t.shape, embd_t.n_dims, error, error_size);
    }
    if (s != WS_OK) {
        ws_map_free(map);
        if (meta) gguf_free(meta);
        return s;
    }
    *out = meta;
    return WS_OK;
}
