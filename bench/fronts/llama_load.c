/*
 * One timed load, for bench/fronts/llama_load.py (which builds and runs it):
 *
 *   llama_load adapter FILE.gguf   ws_llama_model_load (weightstream's BF16 into llama.cpp's buffers)
 *   llama_load llama FILE.gguf     llama_model_load_from_file, mmap off (llama.cpp reads the file into its buffers)
 *   llama_load llama-mmap FILE.gguf  the same with llama.cpp's default mmap (weights used in place, paged in later)
 *   llama_load capi FILE.gguf      ws_open + ws_load_tensors of every tensor as BF16 (the C API, the core)
 *
 * Prints "RESULT <seconds>": from before the call to a model (or the
 * tensors) ready, on the CPU.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llama.h"
#include "weightstream.h"
#include "ws_llama.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static int capi(const char *path) {
    ws_checkpoint *ckpt = NULL;
    if (ws_open(path, &ckpt) != WS_OK) {
        fprintf(stderr, "ws_open: %s\n", ws_last_error());
        return 1;
    }
    size_t n = ws_tensor_count(ckpt);
    ws_load_request *reqs = calloc(n, sizeof *reqs);
    for (size_t i = 0; i < n; i++) {
        size_t bytes = ws_tensor_nbytes(ckpt, i, WS_DTYPE_BF16);
        reqs[i].index = i;
        reqs[i].dtype = WS_DTYPE_BF16;
        reqs[i].dst.data = malloc(bytes);
        reqs[i].dst.size = bytes;
        reqs[i].dst.memory = WS_MEMORY_HOST;
    }
    ws_status s = ws_load_tensors(ckpt, reqs, n, NULL, NULL);
    if (s != WS_OK) fprintf(stderr, "ws_load_tensors: %s\n", ws_last_error());
    for (size_t i = 0; i < n; i++) free(reqs[i].dst.data);
    free(reqs);
    ws_close(ckpt);
    return s != WS_OK;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s adapter|llama|llama-mmap|capi FILE.gguf\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params params = llama_model_default_params();
    struct llama_model *model = NULL;
    double t0 = now();
    int failed = 0;
    if (strcmp(argv[1], "adapter") == 0) {
        char error[1024] = "";
        model = ws_llama_model_load(argv[2], params, NULL, error, sizeof error);
        if (model == NULL) fprintf(stderr, "ws_llama_model_load: %s\n", error);
        failed = model == NULL;
    } else if (strncmp(argv[1], "llama", 5) == 0) {
        params.load_mode = strcmp(argv[1], "llama-mmap") == 0 ? LLAMA_LOAD_MODE_MMAP : LLAMA_LOAD_MODE_NONE;
        model = llama_model_load_from_file(argv[2], params);
        failed = model == NULL;
    } else {
        failed = capi(argv[2]);
    }
    double seconds = now() - t0;
    if (model != NULL) llama_model_free(model);
    llama_backend_free();
    if (failed) return 1;
    printf("RESULT %.6f\n", seconds);
    return 0;
}
