/*
 * The tokenizer keys of a Hugging Face checkpoint, as the vendored
 * llama.cpp's convert_hf_to_gguf.py writes them: a SentencePiece
 * tokenizer.model when there is one (ws_llama_spm.c; convert tries it
 * first), else tokenizer.json's byte-level BPE (_set_vocab_gpt2,
 * get_vocab_base): tokens, token types, merges; then the special tokens
 * (ws_llama_special.c).
 *
 * convert names the BPE pre-tokenizer by hashing what the tokenizer makes
 * of a test text, which needs the tokenizer itself; here the pre-tokenizer
 * is recognized by the split regex in tokenizer.json (the part of it that
 * decides how llama.cpp splits text), and a regex not in PRE is refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ws_llama_hf.h"

/* Split regexes of tokenizer.json, and the llama.cpp pre-tokenizer (with
 * the same regex, llama-vocab.cpp) that convert names for them. */
static const struct {
    const char *regex, *pre;
} PRE[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "llama-bpe"}, /* Llama 3 */
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "qwen2"}, /* Qwen2, Qwen2.5, Qwen3 */
};

/* gguf-py's TokenType */
enum { NORMAL = 1, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5 };

/* strdup is POSIX, not C11 */
static char *dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

static const char *str_of(const ws_json *j) {
    return j && j->type == WS_JSON_STRING ? j->string : NULL;
}

/* The pre-tokenizer: Sequence[Split(regex), ByteLevel(use_regex=false)]. */
static const char *pre_of(const ws_json *tok, char *error, size_t error_size) {
    const ws_json *p = ws_json_get(tok, "pre_tokenizer");
    const ws_json *seq = ws_json_get(p, "pretokenizers");
    const char *type = str_of(ws_json_get(p, "type"));
    if (type && strcmp(type, "Sequence") == 0 && seq && seq->type == WS_JSON_ARRAY && seq->n == 2) {
        const ws_json *split = &seq->items[0], *bl = &seq->items[1];
        const char *regex = str_of(ws_json_get(ws_json_get(split, "pattern"), "Regex"));
        const char *bl_type = str_of(ws_json_get(bl, "type"));
        const ws_json *use_regex = ws_json_get(bl, "use_regex");
        if (regex && bl_type && strcmp(bl_type, "ByteLevel") == 0 && use_regex && use_regex->type == WS_JSON_BOOL && !use_regex->boolean) {
            for (size_t i = 0; i < sizeof PRE / sizeof PRE[0]; i++) {
                if (strcmp(regex, PRE[i].regex) == 0) {
                    return PRE[i].pre;
                }
            }
            snprintf(error, error_size, "tokenizer.json: pre-tokenizer regex %.200s is not one the adapter knows (Llama 3's, Qwen2's)", regex);
            return NULL;
        }
    }
    snprintf(error, error_size, "tokenizer.json: the pre-tokenizer is not a regex split followed by ByteLevel: "
             "not a tokenizer the adapter converts (Llama 3 and Qwen byte-level BPE are)");
    return NULL;
}

/* convert's does_token_look_special */
int ws_looks_special(const char *t) {
    size_t n = strlen(t);
    if (!strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") || !strcmp(t, "[@BOS@]")) return 1;
    if (n >= 4 && !strncmp(t, "<|", 2) && !strcmp(t + n - 2, "|>")) return 1;
    if (n >= 8 && !strncmp(t, "<\xef\xbd\x9c", 4) && !strcmp(t + n - 4, "\xef\xbd\x9c>")) return 1; /* <｜ ... ｜> */
    return n >= 8 && !strncmp(t, "<unused", 7) && t[n - 1] == '>';
}

/* `s` with every U+2581 (▁) replaced by a space: convert pre-normalizes
 * user-defined tokens so. */
static char *spaces(const char *s) {
    char *out = malloc(strlen(s) + 1), *o = out;
    if (!out) return NULL;
    while (*s) {
        if (!strncmp(s, "\xe2\x96\x81", 3)) {
            *o++ = ' ';
            s += 3;
        } else {
            *o++ = *s++;
        }
    }
    *o = '\0';
    return out;
}

/* A merge pair ["a b", ...] or [["a", "b"], ...] as "a b", spaces inside a
 * part written as U+0120 (gguf-py's SpecialVocab). */
static char *merge_of(const ws_json *m) {
    if (m->type == WS_JSON_STRING) return dup(m->string);
    if (m->type != WS_JSON_ARRAY || m->n != 2 || !str_of(&m->items[0]) || !str_of(&m->items[1])) return NULL;
    size_t n = 2 * (strlen(m->items[0].string) + strlen(m->items[1].string)) + 2;
    char *out = malloc(n), *o = out;
    if (!out) return NULL;
    for (int k = 0; k < 2; k++) {
        for (const char *c = m->items[k].string; *c; c++) {
            if (*c == ' ') { *o++ = '\xc4'; *o++ = '\xa0'; } else { *o++ = *c; }
        }
        if (k == 0) *o++ = ' ';
    }
    *o = '\0';
    return out;
}


/* tokenizer.json's byte-level BPE: _set_vocab_gpt2 and get_vocab_base. */
static ws_status gpt2_vocab(const ws_json *tok, const char *path, int64_t n_vocab, struct gguf_context *meta, char *error,
                            size_t error_size) {
    ws_status s = WS_ERR_UNSUPPORTED;
    const char **tokens = NULL;
    char **owned = NULL, **merges = NULL;
    int32_t *types = NULL;
    size_t n_merges = 0;
    const ws_json *model = ws_json_get(tok, "model");
    const ws_json *vocab = ws_json_get(model, "vocab"), *added = ws_json_get(tok, "added_tokens");
    const ws_json *mlist = ws_json_get(model, "merges");
    const char *mtype = str_of(ws_json_get(model, "type"));
    const char *pre = pre_of(tok, error, error_size);
    if (!pre) goto done;
    if (!mtype || strcmp(mtype, "BPE") != 0 || !vocab || vocab->type != WS_JSON_OBJECT) {
        snprintf(error, error_size, "%s: model type %s: only BPE tokenizers are converted", path, mtype ? mtype : "(none)");
        goto done;
    }
    s = WS_ERR_FORMAT;
    if (n_vocab <= 0) {
        n_vocab = 0; /* len(tokenizer.vocab): the largest id + 1 */
        for (size_t i = 0; i < vocab->n; i++) if (vocab->items[i].is_integer && vocab->items[i].integer >= n_vocab) n_vocab = vocab->items[i].integer + 1;
        for (size_t i = 0; added && added->type == WS_JSON_ARRAY && i < added->n; i++) {
            const ws_json *id = ws_json_get(&added->items[i], "id");
            if (id && id->is_integer && id->integer >= n_vocab) n_vocab = id->integer + 1;
        }
    }
    tokens = calloc((size_t)n_vocab, sizeof *tokens);
    owned = calloc((size_t)n_vocab, sizeof *owned);
    types = calloc((size_t)n_vocab, sizeof *types);
    if (!tokens || !owned || !types) {
        s = WS_ERR_OUT_OF_MEMORY;
        snprintf(error, error_size, "no memory for %lld tokens", (long long)n_vocab);
        goto done;
    }
    for (size_t i = 0; i < vocab->n; i++) {
        int64_t id = vocab->items[i].is_integer ? vocab->items[i].integer : -1;
        if (id < 0 || id >= n_vocab) {
            snprintf(error, error_size, "%s: token '%.100s' has id %lld, outside the vocabulary of %lld", path, vocab->keys[i],
                     (long long)id, (long long)n_vocab);
            goto done;
        }
        tokens[id] = vocab->keys[i];
        types[id] = NORMAL;
    }
    for (size_t i = 0; added && added->type == WS_JSON_ARRAY && i < added->n; i++) {
        const ws_json *a = &added->items[i], *id = ws_json_get(a, "id"), *special = ws_json_get(a, "special");
        const char *content = str_of(ws_json_get(a, "content"));
        if (!content || !id || !id->is_integer || id->integer < 0 || id->integer >= n_vocab) {
            snprintf(error, error_size, "%s: added token %zu has no content or an id outside the vocabulary", path, i);
            goto done;
        }
        int64_t k = id->integer;
        tokens[k] = content;
        if ((special && special->type == WS_JSON_BOOL && special->boolean) || ws_looks_special(content)) {
            types[k] = CONTROL;
        } else {
            types[k] = USER_DEFINED;
            tokens[k] = owned[k] = spaces(content);
        }
    }
    for (int64_t i = 0; i < n_vocab; i++) {
        if (!tokens[i]) {
            char pad[32];
            snprintf(pad, sizeof pad, "[PAD%lld]", (long long)i);
            tokens[i] = owned[i] = dup(pad);
            types[i] = UNUSED;
        }
        if (!tokens[i]) {
            s = WS_ERR_OUT_OF_MEMORY;
            snprintf(error, error_size, "no memory for the tokens");
            goto done;
        }
    }
    if (mlist && mlist->type == WS_JSON_ARRAY && mlist->n > 0) {
        merges = calloc(mlist->n, sizeof *merges);
        for (; merges && n_merges < mlist->n; n_merges++) {
            if (!(merges[n_merges] = merge_of(&mlist->items[n_merges]))) {
                snprintf(error, error_size, "%s: merge %zu is neither \"a b\" nor [\"a\", \"b\"]", path, n_merges);
                goto done;
            }
        }
    }
    gguf_set_val_str(meta, "tokenizer.ggml.model", "gpt2");
    gguf_set_val_str(meta, "tokenizer.ggml.pre", pre);
    gguf_set_arr_str(meta, "tokenizer.ggml.tokens", tokens, (size_t)n_vocab);
    gguf_set_arr_data(meta, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (size_t)n_vocab);
    if (n_merges) gguf_set_arr_str(meta, "tokenizer.ggml.merges", (const char **)merges, n_merges);
    s = WS_OK;
done:
    for (int64_t i = 0; owned && i < n_vocab; i++) free(owned[i]);
    for (size_t i = 0; merges && i < n_merges; i++) free(merges[i]);
    free(owned);
    free(merges);
    free(tokens);
    free(types);
    return s;
}

ws_status ws_hf_vocab(const char *dir, const ws_json *config, int64_t n_vocab, int llama, struct gguf_context *meta,
                      char *error, size_t error_size) {
    char path[4096], spm[4096];
    struct stat st;
    ws_json *tok = NULL, *tc = NULL;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (stat(path, &st) == 0 && !(tc = ws_json_read_file(path, error, error_size))) return WS_ERR_FORMAT;
    snprintf(spm, sizeof spm, "%s/tokenizer.model", dir);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    ws_status s = WS_OK;
    if (stat(path, &st) == 0 && !(tok = ws_json_read_file(path, error, error_size))) {
        s = WS_ERR_FORMAT;
    } else if (llama && (n_vocab == 32016 || n_vocab == 49152)) {
        /* LlamaModel.set_vocab adds CodeLlama's infill tokens / Granite's add_bos for these */
        snprintf(error, error_size, "config.json: vocab_size %lld (CodeLlama or Granite small): not supported", (long long)n_vocab);
        s = WS_ERR_UNSUPPORTED;
    } else if (!tok && stat(spm, &st) != 0) {
        snprintf(error, error_size, "%s: no tokenizer.json or tokenizer.model: llama.cpp needs a vocabulary", dir);
        s = WS_ERR_NOT_FOUND;
    }
    const ws_json *aps = ws_json_get(tc, "add_prefix_space");
    if (s == WS_OK && llama && aps && aps->type == WS_JSON_BOOL) { /* LlamaModel.set_vocab */
        gguf_set_val_bool(meta, "tokenizer.ggml.add_space_prefix", aps->boolean);
    }
    int64_t limit = 0;
    /* convert tries SentencePiece first (llama, qwen2, qwen3), then tokenizer.json */
    if (s == WS_OK) {
        s = stat(spm, &st) == 0 ? ws_spm_vocab(dir, tc, n_vocab, meta, &limit, error, error_size)
                                : gpt2_vocab(tok, path, n_vocab, meta, error, error_size);
    }
    int lower = -1, strip = -1;
    ws_hf_normalizer_flags(ws_json_get(tok, "normalizer"), &lower, &strip);
    if (lower >= 0) gguf_set_val_bool(meta, "tokenizer.ggml.normalizer.lowercase", lower);
    if (strip >= 0) gguf_set_val_bool(meta, "tokenizer.ggml.normalizer.strip_accents", strip);
    if (s == WS_OK) s = ws_hf_specials(dir, tok, tc, config, limit, meta, error, error_size);
    ws_json_free(tok);
    ws_json_free(tc);
    return s;
}
