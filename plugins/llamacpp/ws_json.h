/*
 * A small JSON reader for the adapter's Hugging Face inputs (config.json,
 * tokenizer.json, tokenizer_config.json): the whole document as a tree.
 * Strict RFC 8259 (no comments, no trailing commas, no NaN); strings are
 * decoded to UTF-8 (\uXXXX and surrogate pairs); a string holding a NUL is
 * refused, so every string is a C string.
 */
#ifndef WS_JSON_H
#define WS_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef enum { WS_JSON_NULL, WS_JSON_BOOL, WS_JSON_NUMBER, WS_JSON_STRING, WS_JSON_ARRAY, WS_JSON_OBJECT } ws_json_type;

typedef struct ws_json {
    ws_json_type type;
    int boolean;
    double number;
    int is_integer;   /* the number was written without fraction or exponent */
    int64_t integer;  /* its value, when is_integer */
    char *string;     /* WS_JSON_STRING */
    size_t n;         /* items of an array or object */
    struct ws_json *items;
    char **keys;      /* an object's keys, n of them */
} ws_json;

/* Parse the file at `path`; NULL on failure with a message (naming the file
 * and byte offset) in `error`. Free with ws_json_free. */
ws_json *ws_json_read_file(const char *path, char *error, size_t error_size);
void ws_json_free(ws_json *j);

/* Member `key` of an object (the last one if repeated), or NULL. */
const ws_json *ws_json_get(const ws_json *obj, const char *key);

#endif /* WS_JSON_H */
