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

/* The tokenizer keys (tokenizer.ggml.*) as convert_hf_to_gguf.py writes
 * them: from dir/tokenizer.model (SentencePiece) if present, else from
 * dir/tokenizer.json (byte-level BPE); special tokens from tokenizer.json,
 * tokenizer_config.json and config.json. `n_vocab` is the model's
 * vocab_size (0: the tokenizer's); `llama`: LlamaModel.set_vocab's extras. */
ws_status ws_hf_vocab(const char *dir, const ws_json *config, int64_t n_vocab, int llama, struct gguf_context *meta,
                      char *error, size_t error_size);

/* SentencePiece tokens, scores and types (ws_llama_spm.c); *n_tokens is
 * how many were written. */
ws_status ws_spm_vocab(const char *dir, const ws_json *tokenizer_config, int64_t n_vocab, struct gguf_context *meta,
                       int64_t *n_tokens, char *error, size_t error_size);

/* Special token ids, add_*_token flags and the chat template
 * (ws_llama_special.c); ids from `limit` on skipped (0: no limit). */
ws_status ws_hf_specials(const char *dir, const ws_json *tokenizer_json, const ws_json *tokenizer_config, const ws_json *config,
                         int64_t limit, struct gguf_context *meta, char *error, size_t error_size);
/* The normalizer's Lowercase / StripAccents flags (-1: unset). */
void ws_hf_normalizer_flags(const ws_json *normalizer, int *lower, int *strip);

/* convert's does_token_look_special. */
int ws_looks_special(const char *token);

#endif /* WS_LLAMA_HF_H */
