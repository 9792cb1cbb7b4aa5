/*
 * A SentencePiece tokenizer.model (Llama 2, Mistral) as the vocabulary the
 * vendored convert_hf_to_gguf.py writes from it (_set_vocab_sentencepiece,
 * _create_vocab_sentencepiece): tokenizer.ggml.model "llama", pre
 * "default", every piece with its score and type, then added_tokens.json
 * and tokenizer_config.json's added_tokens_decoder over them, ids up to
 * vocab_size padded as [PADn].
 *
 * tokenizer.model is a protobuf ModelProto; only its pieces are read
 * (field 1, each a SentencePiece: piece = 1, score = 2, type = 3).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_llama_hf.h"

/* sentencepiece's ModelProto.SentencePiece.Type, which convert maps:
 * UNKNOWN, CONTROL, UNUSED and BYTE kept, everything else NORMAL. */
enum { NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6 };

struct reader {
    const unsigned char *p, *end;
};

static int varint(struct reader *r, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && r->p < r->end; shift += 7) {
        unsigned char b = *r->p++;
        *v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) return 1;
    }
    return 0;
}

/* Skip a field of wire type `wt`; 0 if malformed. */
static int skip(struct reader *r, uint64_t wt) {
    uint64_t n;
    switch (wt) {
        case 0: return varint(r, &n);
        case 1: n = 8; break;
        case 2: if (!varint(r, &n)) return 0; break;
        case 5: n = 4; break;
        default: return 0;
    }
    if (n > (uint64_t)(r->end - r->p)) return 0;
    r->p += n;
    return 1;
}

struct piece {
    char *text;
    float score;
    int type;
};

/* One SentencePiece message. */
static int piece_of(struct reader r, struct piece *out) {
    out->text = NULL;
    out->score = 0.0f;
    out->type = NORMAL;
    while (r.p < r.end) {
        uint64_t key, n;
        if (!varint(&r, &key)) return 0;
        if (key == (1 << 3 | 2)) {
            if (!varint(&r, &n) || n > (uint64_t)(r.end - r.p) || memchr(r.p, 0, n) || out->text) return 0;
            if (!(out->text = malloc(n + 1))) return 0;
            memcpy(out->text, r.p, n);
            out->text[n] = '\0';
            r.p += n;
        } else if (key == (2 << 3 | 5) && r.end - r.p >= 4) {
            uint32_t bits = (uint32_t)r.p[0] | (uint32_t)r.p[1] << 8 | (uint32_t)r.p[2] << 16 | (uint32_t)r.p[3] << 24;
            memcpy(&out->score, &bits, 4);
            r.p += 4;
        } else if (key == (3 << 3 | 0)) {
            if (!varint(&r, &n)) return 0;
            out->type = (int)n;
        } else if (!skip(&r, key & 7)) {
            return 0;
        }
    }
    return out->text != NULL;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *data = NULL;
    long n;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)n + 1))) {
        if (fread(data, 1, (size_t)n, f) != (size_t)n) {
            free(data);
            data = NULL;
        }
        *len = (size_t)n;
    }
    if (f) fclose(f);
    return data;
}

static char *dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

/* Token `id` := text (owned), score, type. */
static void set(char **tokens, float *scores, int32_t *types, int64_t id, char *text, float score, int type) {
    free(tokens[id]);
    tokens[id] = text;
    scores[id] = score;
    types[id] = type;
}

/* `s` with every U+2581 replaced by a space (user-defined tokens). */
static char *spaces(const char *s) {
    char *out = malloc(strlen(s) + 1), *o = out;
    while (out && *s) {
        if (!strncmp(s, "\xe2\x96\x81", 3)) {
            *o++ = ' ';
            s += 3;
        } else {
            *o++ = *s++;
        }
    }
    if (o) *o = '\0';
    return out;
}

ws_status ws_spm_vocab(const char *dir, const ws_json *tokenizer_config, int64_t n_vocab, struct gguf_context *meta,
                       int64_t *n_tokens, char *error, size_t error_size) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.model", dir);
    size_t len = 0;
    char *data = read_file(path, &len);
    if (!data) {
        snprintf(error, error_size, "%s: cannot read", path);
        return WS_ERR_IO;
    }
    struct piece *pieces = NULL;
    size_t n_pieces = 0, cap = 0;
    ws_status s = WS_ERR_FORMAT;
    struct reader r = {(const unsigned char *)data, (const unsigned char *)data + len};
    while (r.p < r.end) {
        uint64_t key, n;
        if (!varint(&r, &key)) goto bad;
        if (key != (1 << 3 | 2)) {
            if (!skip(&r, key & 7)) goto bad;
            continue;
        }
        if (!varint(&r, &n) || n > (uint64_t)(r.end - r.p)) goto bad;
        if (n_pieces == cap) {
            cap = cap ? 2 * cap : 1024;
            struct piece *grown = realloc(pieces, cap * sizeof *grown);
            if (!grown) goto bad;
            pieces = grown;
        }
        struct reader sub = {r.p, r.p + n};
        if (!piece_of(sub, &pieces[n_pieces])) {
            free(pieces[n_pieces].text);
            goto bad;
        }
        n_pieces++;
        r.p += n;
    }
    if (n_vocab <= 0) n_vocab = (int64_t)n_pieces; /* tokenizer.vocab_size() */
    char **tokens = calloc((size_t)n_vocab, sizeof *tokens);
    float *scores = calloc((size_t)n_vocab, sizeof *scores);
    int32_t *types = calloc((size_t)n_vocab, sizeof *types);
    s = WS_ERR_OUT_OF_MEMORY;
    snprintf(error, error_size, "no memory for %lld tokens", (long long)n_vocab);
    for (int64_t i = 0; tokens && scores && types && i < n_vocab; i++) {
        char pad[32];
        snprintf(pad, sizeof pad, "[PAD%lld]", (long long)i);
        set(tokens, scores, types, i, dup(pad), -10000.0f, UNUSED);
    }
    for (size_t i = 0; tokens && scores && types && i < n_pieces && (int64_t)i < n_vocab; i++) {
        int t = pieces[i].type;
        t = t == UNKNOWN || t == CONTROL || t == UNUSED || t == BYTE ? t : NORMAL;
        set(tokens, scores, types, (int64_t)i, pieces[i].text, pieces[i].score, t);
        pieces[i].text = NULL;
    }
    if (tokens && scores && types) {
        s = WS_OK;
        snprintf(path, sizeof path, "%s/added_tokens.json", dir);
        FILE *f = fopen(path, "rb");
        ws_json *added = f ? ws_json_read_file(path, error, error_size) : NULL;
        if (f) fclose(f);
        if (f && !added) s = WS_ERR_FORMAT;
        for (size_t i = 0; added && added->type == WS_JSON_OBJECT && i < added->n; i++) {
            const ws_json *id = &added->items[i];
            if (id->is_integer && id->integer >= 0 && id->integer < n_vocab) {
                set(tokens, scores, types, id->integer, dup(added->keys[i]), -1000.0f, USER_DEFINED);
            }
        }
        ws_json_free(added);
        const ws_json *dec = ws_json_get(tokenizer_config, "added_tokens_decoder");
        for (size_t i = 0; s == WS_OK && dec && dec->type == WS_JSON_OBJECT && i < dec->n; i++) {
            char *e;
            long long id = strtoll(dec->keys[i], &e, 10);
            const ws_json *content = ws_json_get(&dec->items[i], "content"), *special = ws_json_get(&dec->items[i], "special");
            if (*e || !content || content->type != WS_JSON_STRING) {
                s = WS_ERR_FORMAT;
                snprintf(error, error_size, "tokenizer_config.json: added_tokens_decoder entry %s is malformed", dec->keys[i]);
            } else if (id >= 0 && id < n_vocab) {
                int control = (special && special->type == WS_JSON_BOOL && special->boolean) || ws_looks_special(content->string);
                set(tokens, scores, types, id, control ? dup(content->string) : spaces(content->string), -1000.0f,
                    control ? CONTROL : USER_DEFINED);
            }
        }
        for (int64_t i = 0; s == WS_OK && i < n_vocab; i++) {
            if (!tokens[i]) {
                s = WS_ERR_OUT_OF_MEMORY;
                snprintf(error, error_size, "no memory for the tokens");
            }
        }
    }
    if (s == WS_OK) {
        gguf_set_val_str(meta, "tokenizer.ggml.model", "llama");
        gguf_set_val_str(meta, "tokenizer.ggml.pre", "default");
        gguf_set_arr_str(meta, "tokenizer.ggml.tokens", (const char **)tokens, (size_t)n_vocab);
        gguf_set_arr_data(meta, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, (size_t)n_vocab);
        gguf_set_arr_data(meta, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (size_t)n_vocab);
        *n_tokens = n_vocab;
    }
    for (int64_t i = 0; tokens && i < n_vocab; i++) free(tokens[i]);
    free(tokens);
    free(scores);
    free(types);
    for (size_t i = 0; i < n_pieces; i++) free(pieces[i].text);
    free(pieces);
    free(data);
    return s;
bad:
    snprintf(error, error_size, "%s: not a SentencePiece model (malformed protobuf near byte %zu)", path, (size_t)(r.p - (const unsigned char *)data));
    for (size_t i = 0; i < n_pieces; i++) free(pieces[i].text);
    free(pieces);
    free(data);
    return s;
}
