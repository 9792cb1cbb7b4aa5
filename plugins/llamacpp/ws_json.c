/* A small JSON reader: see ws_json.h. */
#include "ws_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct parser {
    const char *s, *end, *start;
    const char *path;
    char *error;
    size_t error_size;
    int failed;
    int depth;
};

/* Deeper nesting than any config or tokenizer has: bounds the recursion. */
#define MAX_DEPTH 64

static void bad(struct parser *p, const char *what) {
    if (!p->failed) {
        p->failed = 1;
        snprintf(p->error, p->error_size, "%s: invalid JSON at byte %zu: %s", p->path, (size_t)(p->s - p->start), what);
    }
}

static void skip_ws(struct parser *p) {
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')) {
        p->s++;
    }
}

static void clear(ws_json *j) {
    if (j->type == WS_JSON_STRING) {
        free(j->string);
    } else if (j->type == WS_JSON_ARRAY || j->type == WS_JSON_OBJECT) {
        for (size_t i = 0; i < j->n; i++) {
            clear(&j->items[i]);
            if (j->keys) {
                free(j->keys[i]);
            }
        }
        free(j->items);
        free(j->keys);
    }
    memset(j, 0, sizeof *j);
}

static int hex4(struct parser *p, unsigned *out) {
    if (p->end - p->s < 4) {
        return 0;
    }
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *p->s++;
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

/* A string at p->s (just past the opening quote) into a malloc'd C string. */
static char *string(struct parser *p) {
    /* Decoded UTF-8 is never longer than the escaped text. */
    const char *q = p->s;
    while (q < p->end && *q != '"') {
        q += (*q == '\\') ? 2 : 1;
    }
    if (q >= p->end) {
        bad(p, "unterminated string");
        return NULL;
    }
    char *out = malloc((size_t)(q - p->s) + 1), *o = out;
    if (!out) {
        bad(p, "out of memory");
        return NULL;
    }
    while (*p->s != '"') {
        unsigned char c = (unsigned char)*p->s++;
        if (c < 0x20) {
            bad(p, "control character in a string");
            goto fail;
        }
        if (c != '\\') {
            *o++ = (char)c;
            continue;
        }
        c = (unsigned char)*p->s++;
        unsigned u;
        switch (c) {
            case '"': case '\\': case '/': *o++ = (char)c; continue;
            case 'b': *o++ = '\b'; continue;
            case 'f': *o++ = '\f'; continue;
            case 'n': *o++ = '\n'; continue;
            case 'r': *o++ = '\r'; continue;
            case 't': *o++ = '\t'; continue;
            case 'u': break;
            default: bad(p, "unknown escape"); goto fail;
        }
        if (!hex4(p, &u)) {
            bad(p, "bad \\u escape");
            goto fail;
        }
        if (u >= 0xD800 && u < 0xDC00) { /* a high surrogate: its low half must follow */
            unsigned lo;
            if (p->end - p->s < 6 || p->s[0] != '\\' || p->s[1] != 'u' || (p->s += 2, !hex4(p, &lo)) || lo < 0xDC00 || lo > 0xDFFF) {
                bad(p, "unpaired surrogate");
                goto fail;
            }
            u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        } else if (u >= 0xDC00 && u < 0xE000) {
            bad(p, "unpaired surrogate");
            goto fail;
        }
        if (u == 0) {
            bad(p, "NUL in a string");
            goto fail;
        }
        if (u < 0x80) {
            *o++ = (char)u;
        } else if (u < 0x800) {
            *o++ = (char)(0xC0 | (u >> 6));
            *o++ = (char)(0x80 | (u & 0x3F));
        } else if (u < 0x10000) {
            *o++ = (char)(0xE0 | (u >> 12));
            *o++ = (char)(0x80 | ((u >> 6) & 0x3F));
            *o++ = (char)(0x80 | (u & 0x3F));
        } else {
            *o++ = (char)(0xF0 | (u >> 18));
            *o++ = (char)(0x80 | ((u >> 12) & 0x3F));
            *o++ = (char)(0x80 | ((u >> 6) & 0x3F));
            *o++ = (char)(0x80 | (u & 0x3F));
        }
    }
    p->s++; /* the closing quote */
    *o = '\0';
    return out;
fail:
    free(out);
    return NULL;
}

static int value(struct parser *p, ws_json *j);

/* Elements of an array or members of an object, after the opening bracket. */
static int container(struct parser *p, ws_json *j, int object) {
    size_t cap = 0;
    j->type = object ? WS_JSON_OBJECT : WS_JSON_ARRAY;
    skip_ws(p);
    if (p->s < p->end && *p->s == (object ? '}' : ']')) {
        p->s++;
        return 1;
    }
    for (;;) {
        if (j->n == cap) {
            cap = cap ? cap * 2 : 8;
            ws_json *items = realloc(j->items, cap * sizeof *items);
            char **keys = object ? realloc(j->keys, cap * sizeof *keys) : NULL;
            if (items) j->items = items;
            if (keys) j->keys = keys;
            if (!items || (object && !keys)) {
                bad(p, "out of memory");
                return 0;
            }
        }
        char *key = NULL;
        if (object) {
            skip_ws(p);
            if (p->s >= p->end || *p->s != '"') {
                bad(p, "expected a key");
                return 0;
            }
            p->s++;
            if (!(key = string(p))) {
                return 0;
            }
            skip_ws(p);
            if (p->s >= p->end || *p->s != ':') {
                free(key);
                bad(p, "expected ':'");
                return 0;
            }
            p->s++;
            j->keys[j->n] = key;
        }
        memset(&j->items[j->n], 0, sizeof j->items[j->n]);
        j->n++; /* counted now, so that a failure below frees it */
        if (!value(p, &j->items[j->n - 1])) {
            return 0;
        }
        skip_ws(p);
        if (p->s < p->end && *p->s == ',') {
            p->s++;
        } else if (p->s < p->end && *p->s == (object ? '}' : ']')) {
            p->s++;
            return 1;
        } else {
            bad(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
            return 0;
        }
    }
}

static int literal(struct parser *p, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(p->end - p->s) < n || memcmp(p->s, word, n) != 0) {
        bad(p, "unexpected character");
        return 0;
    }
    p->s += n;
    return 1;
}

static int number(struct parser *p, ws_json *j) {
    const char *q = p->s;
    if (q < p->end && *q == '-') q++;
    if (q >= p->end || *q < '0' || *q > '9') {
        bad(p, "unexpected character");
        return 0;
    }
    int integer = 1;
    while (q < p->end && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E' || *q == '+' || *q == '-')) {
        if (*q == '.' || *q == 'e' || *q == 'E') integer = 0;
        q++;
    }
    char buf[64];
    if ((size_t)(q - p->s) >= sizeof buf) {
        bad(p, "number too long");
        return 0;
    }
    memcpy(buf, p->s, (size_t)(q - p->s));
    buf[q - p->s] = '\0';
    char *e;
    j->type = WS_JSON_NUMBER;
    j->number = strtod(buf, &e);
    if (*e != '\0') {
        bad(p, "malformed number");
        return 0;
    }
    if (integer) {
        errno = 0;
        j->integer = strtoll(buf, &e, 10);
        j->is_integer = errno == 0;
    }
    p->s = q;
    return 1;
}

static int value(struct parser *p, ws_json *j) {
    skip_ws(p);
    if (p->s >= p->end) {
        bad(p, "unexpected end");
        return 0;
    }
    if (++p->depth > MAX_DEPTH) {
        bad(p, "nested too deeply");
        return 0;
    }
    int ok;
    switch (*p->s) {
        case '{': p->s++; ok = container(p, j, 1); break;
        case '[': p->s++; ok = container(p, j, 0); break;
        case '"':
            p->s++;
            j->type = WS_JSON_STRING;
            ok = (j->string = string(p)) != NULL;
            if (!ok) j->type = WS_JSON_NULL;
            break;
        case 't': j->type = WS_JSON_BOOL; j->boolean = 1; ok = literal(p, "true"); break;
        case 'f': j->type = WS_JSON_BOOL; ok = literal(p, "false"); break;
        case 'n': ok = literal(p, "null"); break;
        default: ok = number(p, j); break;
    }
    p->depth--;
    return ok;
}

ws_json *ws_json_read_file(const char *path, char *error, size_t error_size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(error, error_size, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            char *t = realloc(text, cap);
            if (!t) {
                free(text);
                fclose(f);
                snprintf(error, error_size, "%s: out of memory", path);
                return NULL;
            }
            text = t;
        }
        size_t got = fread(text + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int read_error = ferror(f);
    fclose(f);
    ws_json *root = calloc(1, sizeof *root);
    struct parser p = {text, text + len, text, path, error, error_size, 0, 0};
    if (read_error) {
        snprintf(error, error_size, "%s: read error", path);
        p.failed = 1;
    } else if (!root) {
        snprintf(error, error_size, "%s: out of memory", path);
        p.failed = 1;
    } else if (value(&p, root)) {
        skip_ws(&p);
        if (p.s != p.end) bad(&p, "text after the value");
    }
    free(text);
    if (p.failed) {
        ws_json_free(root);
        return NULL;
    }
    return root;
}

void ws_json_free(ws_json *j) {
    if (j) {
        clear(j);
        free(j);
    }
}

const ws_json *ws_json_get(const ws_json *obj, const char *key) {
    if (!obj || obj->type != WS_JSON_OBJECT) {
        return NULL;
    }
    for (size_t i = obj->n; i-- > 0;) {
        if (strcmp(obj->keys[i], key) == 0) {
            return &obj->items[i];
        }
    }
    return NULL;
}
