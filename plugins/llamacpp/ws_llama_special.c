/*
 * The special-token keys of a Hugging Face tokenizer as gguf-py's
 * SpecialVocab (the vendored llama.cpp's gguf-py/gguf/vocab.py) writes
 * them: ids of bos/eos/unk/sep/pad/mask from tokenizer_config.json (by
 * content, through tokenizer.json's added_tokens) then config.json; the
 * add_bos/add_eos/add_sep flags from tokenizer.json's post-processor then
 * tokenizer_config.json; the chat template; the normalizer's lowercase and
 * strip-accents flags. Post-processors SpecialVocab would answer by
 * renaming special tokens are refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_llama_hf.h"

static const char *str_of(const ws_json *j) {
    return j && j->type == WS_JSON_STRING ? j->string : NULL;
}

struct special {
    const char *typ, *key;
    int64_t id;   /* -1: not set */
    int add;      /* -1: not set, else the add_<typ>_token flag */
};

/* The first valid source wins, as in SpecialVocab._set_special_token; ids
 * from `limit` on are skipped (the SentencePiece path's n_vocab). */
static void set_id(struct special *s, int64_t id, int64_t limit) {
    if (s->id < 0 && id >= 0 && (limit <= 0 || id < limit)) s->id = id;
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

ws_status ws_hf_specials(const char *dir, const ws_json *tok, const ws_json *tc, const ws_json *config, int64_t limit,
                          struct gguf_context *meta, char *error, size_t error_size) {
    struct special sp[] = {{"bos", "tokenizer.ggml.bos_token_id", -1, -1}, {"eos", "tokenizer.ggml.eos_token_id", -1, -1},
                           {"unk", "tokenizer.ggml.unknown_token_id", -1, -1}, {"sep", "tokenizer.ggml.seperator_token_id", -1, -1},
                           {"pad", "tokenizer.ggml.padding_token_id", -1, -1}, {"mask", "tokenizer.ggml.mask_token_id", -1, -1}};
    const size_t n = sizeof sp / sizeof sp[0];
    const char *leading = NULL, *middle = NULL;
    ws_status s = post_processor(tok, sp, &leading, &middle, error, error_size);
    if (s != WS_OK) return s;
    const ws_json *added = ws_json_get(tok, "added_tokens");
    const ws_json *bos = ws_json_get(tc, "bos_token");
    const char *bos_content = bos && bos->type == WS_JSON_OBJECT ? str_of(ws_json_get(bos, "content")) : str_of(bos);
    if (leading) {
        /* A template's leading token is the BOS token, added (SpecialVocab;
         * a different one would make convert rename tokens: refused). */
        if (bos_content && strcmp(bos_content, leading) != 0) {
            snprintf(error, error_size, "tokenizer.json: the post-processor adds %.100s first, tokenizer_config.json's "
                     "bos_token is %.100s: not supported", leading, bos_content);
            return WS_ERR_UNSUPPORTED;
        }
        if (!bos_content) set_id(&sp[0], added_id(added, leading), limit);
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
            if (content) set_id(&sp[i], added_id(added, content), limit);
        }
    }
    for (size_t i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof key, "%s_token_id", sp[i].typ);
        const ws_json *id = ws_json_get(config, key);
        if (id && id->is_integer) set_id(&sp[i], id->integer, limit);
        if (sp[i].id >= 0) gguf_set_val_u32(meta, sp[i].key, (uint32_t)sp[i].id);
        /* gguf-py has add_*_token keys for these three only */
        if (sp[i].add >= 0 && (!strcmp(sp[i].typ, "bos") || !strcmp(sp[i].typ, "eos") || !strcmp(sp[i].typ, "sep"))) {
            char key[48];
            snprintf(key, sizeof key, "tokenizer.ggml.add_%s_token", sp[i].typ);
            gguf_set_val_bool(meta, key, sp[i].add != 0);
        }
    }
    return WS_OK;
}

/* SpecialVocab._parse_normalizer: Lowercase / StripAccents flags. */
void ws_hf_normalizer_flags(const ws_json *norm, int *lower, int *strip) {
    const char *type = str_of(ws_json_get(norm, "type"));
    if (!type) return;
    if (!strcmp(type, "Lowercase")) *lower = 1;
    if (!strcmp(type, "StripAccents")) *strip = 1;
    if (!strcmp(type, "BertNormalizer")) {
        const ws_json *l = ws_json_get(norm, "lowercase"), *a = ws_json_get(norm, "strip_accents");
        if (l && l->type == WS_JSON_BOOL) *lower = l->boolean;
        if (a && a->type == WS_JSON_BOOL) *strip = a->boolean;
    }
    const ws_json *list = ws_json_get(norm, "normalizers");
    for (size_t i = 0; !strcmp(type, "Sequence") && list && list->type == WS_JSON_ARRAY && i < list->n; i++) {
        ws_hf_normalizer_flags(&list->items[i], lower, strip);
    }
}
