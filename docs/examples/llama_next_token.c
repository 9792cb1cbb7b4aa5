/*
 * Load a model with the weightstream llama.cpp adapter (a GGUF file, the
 * first file of a split set, or a Hugging Face checkpoint directory) and
 * print the most likely token after a prompt of token ids.
 *
 *   cc -std=c11 llama_next_token.c ws_llama.c ws_llama_hf.c \
 *      -I plugins/llamacpp -I crates/weightstream-capi/include -I LLAMA_PREFIX/include \
 *      -L LLAMA_PREFIX/lib -L target/release -lllama -lggml -lggml-base -lweightstream_c
 *   ./llama_next_token Qwen3-8B-FP8/ 9707 11 1879
 */
#include <stdio.h>
#include <stdlib.h>

#include "llama.h"
#include "ws_llama.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL TOKEN_ID...\n", argv[0]);
        return 2;
    }
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0; /* or offload: the adapter fills GPU tensors in place */
    ws_status st;
    char err[512];
    struct llama_model *model = ws_llama_model_load(argv[1], mp, &st, err, sizeof err);
    if (!model) {
        fprintf(stderr, "cannot load %s (status %d): %s\n", argv[1], (int)st, err);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    int n = argc - 2, rc = 1;
    llama_token *prompt = malloc(sizeof *prompt * (size_t)n);
    for (int i = 0; prompt && i < n; i++) {
        prompt[i] = atoi(argv[2 + i]);
    }
    if (ctx && prompt && llama_decode(ctx, llama_batch_get_one(prompt, n)) == 0) {
        const float *logits = llama_get_logits_ith(ctx, -1);
        int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model)), best = 0;
        for (int t = 1; t < n_vocab; t++) {
            best = logits[t] > logits[best] ? t : best;
        }
        printf("next token: %d\n", best);
        rc = 0;
    }
    free(prompt);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
