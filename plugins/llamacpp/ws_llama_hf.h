/*
 * Internal to the llama.cpp adapter: a Hugging Face checkpoint directory
 * (config.json, tokenizer files, safetensors shards) presented to
 * llama.cpp as the GGUF that convert_hf_to_gguf.py would write from it
 * (--outtype bf16), built in memory.
 */
#ifndef WS_LLAMA_HF_H
#define WS_LLAMA_HF_H

#include "ggml.h"
#include "gguf.h"
#include "weightstream.h"
#include "ws_json.h"

/* One tensor llama.cpp is given and where its data comes from. */
struct ws_map_entry {
    char name[GGML_MAX_NAME];  /* the GGUF name: "blk.0.attn_q.weight" */
    size_t *src;               /* weightstream tensor indices; several for stacked experts (outermost) */
    size_t n_src;
    /* llama's q/k rows in convert_hf_to_gguf's order (LlamaModel.permute):
     * the number of heads to permute by, 0 for none. */
    uint32_t permute_heads;
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

/* The metadata (architecture, hyperparameters, tokenizer, tensors as
 * convert_hf_to_gguf.py names and types them) of the checkpoint in `dir`,
 * opened as `ckpt`, and where each tensor comes from. An architecture,
 * tensor or setting the adapter does not support is refused with a
 * message naming it (WS_ERR_UNSUPPORTED). */
ws_status ws_hf_metadata(const char *dir, ws_checkpoint *ckpt, struct gguf_context **meta, struct ws_map *map,
                         char *error, size_t error_size);
void ws_map_free(struct ws_map *map);
struct ws_map_entry *ws_map_find(const struct ws_map *map, const char *name);

/* The tokenizer keys (tokenizer.ggml.*) from dir/tokenizer.json and
 * dir/tokenizer_config.json, as convert_hf_to_gguf.py's _set_vocab_gpt2
 * writes them; `n_vocab` is the model's vocab_size (0: the tokenizer's). */
ws_status ws_hf_vocab(const char *dir, const ws_json *config, int64_t n_vocab, struct gguf_context *meta, char *error,
                      size_t error_size);

#endif /* WS_LLAMA_HF_H */
