/*
 * The tokenizer keys of a Hugging Face checkpoint, as the vendored
 * llama.cpp's convert_hf_to_gguf.py writes them for a byte-level BPE
 * tokenizer.json (_set_vocab_gpt2, get_vocab_base and gguf-py's
 * SpecialVocab): tokens, token types, merges, special token ids, the
 * add_*_token flags and the chat template.
 *
 * convert names the pre-tokenizer by hashing what the tokenizer makes of
 * a test text, which needs the tokenizer itself; here the pre-tokenizer is
 * recognized by the split regex in tokenizer.json (the part of it that
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
static int looks_special(const char *t) {
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

struct special {
    const char *typ, *key;
    int64_t id;   /* -1: not set */
    int add;      /* -1: not set, else the add_<typ>_token flag */
};

static void set_id(struct special *s, int64_t id) {
    if (s->id < 0 && id >= 0) s->id = id; /* the first source wins, as in SpecialVocab */
}

/* The add_bos/add_eos flags a post-processor implies (SpecialVocab);
 * *leading: the special token a template puts first. */
static ws_status post_processor(const ws_json *tok, struct special *sp, const char **leading, const char **middle, char *error,
                                size_t error_size) {
    const ws_json *pp = ws_json_get(tok, "post_processor");
    if (!pp || pp->type != WS_JSON_OBJECT) return WS_OK;
    const ws_json *list = ws_json_get(pp, "processors");
    size_t n = list && list->type == WS_JSON_ARRAY ? list->n : 1;
    for (size_t i = 0; i < n; i++) {
        const ws_json *p = list && list->type == WS_JSON_ARRAY ? &list->items[i] : pp;
        const char *type = str_of(ws_json_get(p, "type"));
        if (type && !strcmp(type, "ByteLevel")) {
            if (sp[0].add < 0) sp[0].add = 0;
            if (sp[1].add < 0) sp[1].add = 0;
        } else if (type && !strcmp(type, "TemplateProcessing")) {
            /* Understood: "single" [A] (nothing added) or [special, A] (a
             * leading BOS), and "pair" [special?, A, middle.., B]: convert's
             * handling of other templates renames special tokens. */
            const ws_json *single = ws_json_get(p, "single"), *pair = ws_json_get(p, "pair");
            if (single && single->type == WS_JSON_ARRAY && single->n == 1 && ws_json_get(&single->items[0], "Sequence")) {
                continue;
            }
            const char *first = single && single->type == WS_JSON_ARRAY && single->n == 2 && ws_json_get(&single->items[1], "Sequence")
                                    ? str_of(ws_json_get(ws_json_get(&single->items[0], "SpecialToken"), "id")) : NULL;
            if (!first) {
                snprintf(error, error_size, "tokenizer.json: a TemplateProcessing post-processor other than [A] or [special, A] is not supported");
                return WS_ERR_UNSUPPORTED;
            }
            *leading = first;
            /* pair [first, A, middle..., B]: add_sep from the first middle token */
            if (pair && pair->type == WS_JSON_ARRAY && pair->n > 3) {
                const char *a = str_of(ws_json_get(ws_json_get(&pair->items[1], "Sequence"), "id"));
                const char *b = str_of(ws_json_get(ws_json_get(&pair->items[pair->n - 1], "Sequence"), "id"));
                if (a && b && !strcmp(a, "A") && !strcmp(b, "B")) {
                    *middle = str_of(ws_json_get(ws_json_get(&pair->items[2], "SpecialToken"), "id"));
                    sp[3].add = 0; /* compared with sep and eos below */
                }
            }
        } else if (type) {
            snprintf(error, error_size, "tokenizer.json: post-processor %s is not supported", type);
            return WS_ERR_UNSUPPORTED;
        }
    }
    return WS_OK;
}

/* A whole file as a string (the chat template), or NULL. */
static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)n + 1)) != NULL) {
            if (fread(text, 1, (size_t)n, f) != (size_t)n) {
                free(text);
                text = NULL;
            } else {
                text[n] = '\0';
            }
        }
    }
    fclose(f);
    return text;
}

static int64_t added_id(const ws_json *added, const char *content) {
    for (size_t i = 0; added && added->type == WS_JSON_ARRAY && i < added->n; i++) {
        const char *c = str_of(ws_json_get(&added->items[i], "content"));
        const ws_json *id = ws_json_get(&added->items[i], "id");
        if (c && !strcmp(c, content) && id && id->is_integer) return id->integer;
    }
    return -1;
}

static ws_status specials(const char *dir, const ws_json *tok, const ws_json *config, struct gguf_context *meta,
                          char *error, size_t error_size) {
    struct special sp[] = {{"bos", "tokenizer.ggml.bos_token_id", -1, -1}, {"eos", "tokenizer.ggml.eos_token_id", -1, -1},
                           {"unk", "tokenizer.ggml.unknown_token_id", -1, -1}, {"sep", "tokenizer.ggml.seperator_token_id", -1, -1},
                           {"pad", "tokenizer.ggml.padding_token_id", -1, -1}, {"mask", "tokenizer.ggml.mask_token_id", -1, -1}};
    const size_t n = sizeof sp / sizeof sp[0];
    const char *leading = NULL, *middle = NULL;
    ws_status s = post_processor(tok, sp, &leading, &middle, error, error_size);
    if (s != WS_OK) return s;
    const ws_json *added = ws_json_get(tok, "added_tokens");
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    struct stat st;
    ws_json *tc = NULL;
    if (stat(path, &st) == 0 && !(tc = ws_json_read_file(path, error, error_size))) return WS_ERR_FORMAT;
    const ws_json *bos = ws_json_get(tc, "bos_token");
    const char *bos_content = bos && bos->type == WS_JSON_OBJECT ? str_of(ws_json_get(bos, "content")) : str_of(bos);
    if (leading) {
        /* A template's leading token is the BOS token, added (SpecialVocab;
         * a different one would make convert rename tokens: refused). */
        if (bos_content && strcmp(bos_content, leading) != 0) {
            snprintf(error, error_size, "tokenizer.json: the post-processor adds %.100s first, tokenizer_config.json's "
                     "bos_token is %.100s: not supported", leading, bos_content);
            ws_json_free(tc);
            return WS_ERR_UNSUPPORTED;
        }
        if (!bos_content) set_id(&sp[0], added_id(added, leading));
        sp[0].add = 1;
        for (int k = 1; middle && k < 4; k += 2) { /* eos (1), sep (3) */
            const ws_json *e = ws_json_get(tc, k == 1 ? "eos_token" : "sep_token");
            const char *content = e && e->type == WS_JSON_OBJECT ? str_of(ws_json_get(e, "content")) : str_of(e);
            if (content && !strcmp(content, middle)) sp[3].add = 1;
        }
    }
    if (tc) {
        const ws_json *tmpl = ws_json_get(tc, "chat_template");
        char jinja[4096];
        snprintf(jinja, sizeof jinja, "%s/chat_template.jinja", dir);
        char *text = tmpl ? NULL : read_text(jinja);
        if (tmpl && tmpl->type == WS_JSON_STRING) gguf_set_val_str(meta, "tokenizer.chat_template", tmpl->string);
        if (text) gguf_set_val_str(meta, "tokenizer.chat_template", text);
        free(text);
        for (size_t i = 0; i < n; i++) {
            char key[32];
            snprintf(key, sizeof key, "add_%s_token", sp[i].typ);
            const ws_json *add = ws_json_get(tc, key);
            if (add && add->type == WS_JSON_BOOL && sp[i].add < 0) sp[i].add = add->boolean;
            snprintf(key, sizeof key, "%s_token", sp[i].typ);
            const ws_json *e = ws_json_get(tc, key);
            const char *content = e && e->type == WS_JSON_OBJECT ? str_of(ws_json_get(e, "content")) : str_of(e);
            if (content) set_id(&sp[i], added_id(added, content));
        }
    }
    for (size_t i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof key, "%s_token_id", sp[i].typ);
        const ws_json *id = ws_json_get(config, key);
        if (id && id->is_integer) set_id(&sp[i], id->integer);
        if (sp[i].id >= 0) gguf_set_val_u32(meta, sp[i].key, (uint32_t)sp[i].id);
        /* gguf-py has add_*_token keys for these three only */
        if (sp[i].add >= 0 && (!strcmp(sp[i].typ, "bos") || !strcmp(sp[i].typ, "eos") || !strcmp(sp[i].typ, "sep"))) {
            char key[48];
            snprintf(key, sizeof key, "tokenizer.ggml.add_%s_token", sp[i].typ);
            gguf_set_val_bool(meta, key, sp[i].add != 0);
        }
    }
    ws_json_free(tc);
    return WS_OK;
}

ws_status ws_hf_vocab(const char *dir, const ws_json *config, int64_t n_vocab, struct gguf_context *meta, char *error,
                      size_t error_size) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/tokenizer.model", dir);
    if (stat(path, &st) == 0) {
        snprintf(error, error_size, "%s: a SentencePiece tokenizer (convert_hf_to_gguf.py writes a SentencePiece vocabulary "
                 "from it), which the adapter does not convert", path);
        return WS_ERR_UNSUPPORTED;
    }
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    ws_json *tok = ws_json_read_file(path, error, error_size);
    if (!tok) return stat(path, &st) == 0 ? WS_ERR_FORMAT : WS_ERR_NOT_FOUND;
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
    const ws_json *norm = ws_json_get(tok, "normalizer");
    const char *norm_type = str_of(ws_json_get(norm, "type"));
    if (norm && norm->type != WS_JSON_NULL && (!norm_type || strcmp(norm_type, "NFC") != 0)) {
        /* convert writes Lowercase/StripAccents flags; NFC (Qwen) it ignores */
        snprintf(error, error_size, "%s: normalizer %s is not supported", path, norm_type ? norm_type : "(unnamed)");
        goto done;
    }
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
        if ((special && special->type == WS_JSON_BOOL && special->boolean) || looks_special(content)) {
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
    s = specials(dir, tok, config, meta, error, error_size);
done:
    for (int64_t i = 0; owned && i < n_vocab; i++) free(owned[i]);
    for (size_t i = 0; merges && i < n_merges; i++) free(merges[i]);
    free(owned);
    free(merges);
    free(tokens);
    free(types);
    ws_json_free(tok);
    return s;
}
