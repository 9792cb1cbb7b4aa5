/*
 * Internal to the llama.cpp adapter: a Hugging Face checkpoint directory
 * (config.json, tokenizer files, safetensors shards) presented to
 * llama.cpp as the GGUF that convert_hf_to_gguf.py would write from it
 * (--outtype bf16). The metadata and the tensor map come from the C API
 * (ws_hf_gguf_*: crate weightstream-hf2gguf, where every input is
 * checked); this side only hands them to ggml.
 */
#ifndef WS_LLAMA_HF_H
#define WS_LLAMA_HF_H

#include "ggml.h"
#include "gguf.h"
#include "weightstream.h"

/* One tensor llama.cpp is given and where its data comes from. */
struct ws_map_entry {
    char name[GGML_MAX_NAME];  /* the GGUF name: "blk.0.attn_q.weight" */
    const size_t *src;         /* weightstream tensor indices (the C API's, valid until ws_close); several for stacked experts */
    size_t n_src;
    uint32_t permute_heads;    /* llama's q/k rows in convert's order: heads to permute by, 0 for none */
    const float *data;         /* a tensor convert computes (rope_freqs.weight), n_src 0; else NULL */
    uint64_t row_start;        /* rows row_start.. of its one source of source_rows rows; 0, 0: all of it */
    uint64_t source_rows;
    int filled;                /* set when llama.cpp asked for it */
};

struct ws_map {
    struct ws_map_entry *entries;
    size_t n;
};

/* Declare tensor `name` in `meta` with a weightstream (outermost first) shape. */
ws_status ws_gguf_declare(struct gguf_context *meta, const char *name, enum ggml_type type, const uint64_t *shape,
                          uint32_t n_dims, char *error, size_t error_size);

/* Does `path` name a Hugging Face checkpoint directory (holds config.json)? */
int ws_hf_is_checkpoint(const char *path);

/* The metadata of the checkpoint opened as `ckpt`, and where each tensor
 * comes from. What the checkpoint's files or tensors do not allow is
 * refused with the C API's status and message. */
ws_status ws_hf_metadata(ws_checkpoint *ckpt, struct gguf_context **meta, struct ws_map *map, char *error, size_t error_size);
void ws_map_free(struct ws_map *map);
struct ws_map_entry *ws_map_find(const struct ws_map *map, const char *name);

#endif /* WS_LLAMA_HF_H */
