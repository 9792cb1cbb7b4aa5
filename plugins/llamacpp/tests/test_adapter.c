/*
 * The llama.cpp adapter against llama.cpp itself:
 *   (a) QUANT.gguf through ws_llama_model_load (BF16 tensors filled by weightstream),
 *   (b) REF.gguf (the gguf-py-dequantized BF16 weights) through llama_model_load_from_file.
 * The logits of a short prompt, at every position, must be identical bit for bit.
 * QUANT may be a Hugging Face checkpoint directory, REF then the GGUF
 * convert_hf_to_gguf.py wrote from its reference BF16 checkpoint: the
 * metadata llama.cpp reports for the two must also be the same (every key
 * but the general.* names convert derives from the directory's name).
 *
 *   test_adapter QUANT.gguf|QUANT_DIR REF.gguf [UNSUPPORTED [NAME]]
 * With a third path (a file or checkpoint the adapter must refuse), also
 * checks that loading it fails as unsupported with a message naming NAME
 * (by default blk.0.ffn_down.weight, the Q8_K tensor of
 * tiny-llama-unsupported.gguf).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "llama.h"
#include "ws_llama.h"

static const llama_token PROMPT[] = {1, 17, 42, 99, 7, 300, 2};
#define N_PROMPT ((int)(sizeof PROMPT / sizeof PROMPT[0]))

/* Logits at every position of PROMPT, n_vocab floats each. */
static float *logits_of(struct llama_model *model, int *n_vocab) {
    *n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 64;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create a context\n");
        return NULL;
    }
    struct llama_batch batch = llama_batch_init(N_PROMPT, 0, 1);
    for (int i = 0; i < N_PROMPT; i++) {
        batch.token[i] = PROMPT[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = N_PROMPT;
    float *out = NULL;
    if (llama_decode(ctx, batch) != 0) {
        fprintf(stderr, "llama_decode failed\n");
    } else {
        out = malloc(sizeof(float) * (size_t)(*n_vocab) * N_PROMPT);
        for (int i = 0; i < N_PROMPT; i++) {
            memcpy(out + (size_t)i * (size_t)(*n_vocab), llama_get_logits_ith(ctx, i), sizeof(float) * (size_t)(*n_vocab));
        }
    }
    llama_batch_free(batch);
    llama_free(ctx);
    return out;
}

/* Keys convert_hf_to_gguf.py derives from the directory, not the model. */
static int is_name_key(const char *key) {
    return !strcmp(key, "general.name") || !strcmp(key, "general.size_label") || !strcmp(key, "general.type") ||
           !strcmp(key, "general.basename") || !strcmp(key, "general.finetune");
}

static char *meta_val(const struct llama_model *m, const char *key) {
    int n = llama_model_meta_val_str(m, key, NULL, 0);
    char *v = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (v) {
        llama_model_meta_val_str(m, key, v, (size_t)n + 1);
    }
    return v;
}

/* Every key of `x` is in `y` with the same value (names aside); 0 if so. */
static int meta_subset(const struct llama_model *x, const struct llama_model *y, const char *xname) {
    char key[256];
    int n = llama_model_meta_count(x);
    for (int i = 0; i < n; i++) {
        llama_model_meta_key_by_index(x, i, key, sizeof key);
        if (is_name_key(key)) {
            continue;
        }
        char *vx = meta_val(x, key), *vy = meta_val(y, key);
        int same = vx && vy && !strcmp(vx, vy);
        if (!same) {
            fprintf(stderr, "FAIL: metadata %s: %s has %.200s, the other %.200s\n", key, xname, vx ? vx : "(none)", vy ? vy : "(none)");
        }
        free(vx);
        free(vy);
        if (!same) {
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s QUANT.gguf|QUANT_DIR REF.gguf [UNSUPPORTED [NAME]]\n", argv[0]);
        return 2;
    }
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.use_extra_bufts = false; /* no weight repacking: the same kernels for (a) and (b) */

    ws_status st;
    char err[512];
    struct llama_model *a = ws_llama_model_load(argv[1], mp, &st, err, sizeof err);
    if (!a) {
        fprintf(stderr, "FAIL: adapter load of %s: status %d: %s\n", argv[1], (int)st, err);
        return 1;
    }
    struct llama_model *b = llama_model_load_from_file(argv[2], mp);
    if (!b) {
        fprintf(stderr, "FAIL: llama.cpp cannot load the reference %s\n", argv[2]);
        return 1;
    }
    struct stat sb;
    if (stat(argv[1], &sb) == 0 && S_ISDIR(sb.st_mode)) {
        if (meta_subset(a, b, "the adapter") || meta_subset(b, a, "the reference")) {
            return 1;
        }
        printf("same metadata (%d keys); ", llama_model_meta_count(b));
    }
    int na, nb;
    float *la = logits_of(a, &na), *lb = logits_of(b, &nb);
    int rc = 0;
    if (!la || !lb || na != nb) {
        fprintf(stderr, "FAIL: no logits (or vocab sizes %d vs %d)\n", na, nb);
        rc = 1;
    } else if (memcmp(la, lb, sizeof(float) * (size_t)na * N_PROMPT) != 0) {
        for (size_t i = 0; i < (size_t)na * N_PROMPT; i++) {
            if (memcmp(&la[i], &lb[i], sizeof(float)) != 0) {
                fprintf(stderr, "FAIL: logits differ at position %zu token %zu: %.9g vs %.9g\n", i / (size_t)na, i % (size_t)na, la[i], lb[i]);
                break;
            }
        }
        rc = 1;
    } else {
        printf("identical logits: %d positions x %d tokens\n", N_PROMPT, na);
    }
    free(la);
    free(lb);
    llama_model_free(a);
    llama_model_free(b);

    if (rc == 0 && argc > 3) {
        struct llama_model *bad = ws_llama_model_load(argv[3], mp, &st, err, sizeof err);
        const char *name = argc > 4 ? argv[4] : "blk.0.ffn_down.weight";
        if (bad || st != WS_ERR_UNSUPPORTED || !strstr(err, name)) {
            fprintf(stderr, "FAIL: loading %s: model %p, status %d, message '%s'\n", argv[3], (void *)bad, (int)st, err);
            rc = 1;
            if (bad) {
                llama_model_free(bad);
            }
        } else {
            printf("unsupported checkpoint refused: %s\n", err);
        }
    }
    llama_backend_free();
    return rc;
}
