/*
 * Load every tensor of a checkpoint as BF16 into host memory with the
 * weightstream C API, reporting progress; print a checksum per tensor.
 *
 *   cc -std=c11 load_gguf.c -I crates/weightstream-capi/include \
 *      -L target/release -lweightstream_c -Wl,-rpath,$PWD/target/release -o load_gguf
 *   ./load_gguf model-q4_0.gguf
 */
#include <stdio.h>
#include <stdlib.h>

#include "weightstream.h"

static bool on_progress(float fraction, void *user_data) {
    (void)user_data;
    fprintf(stderr, "\rloading %3.0f%%", fraction * 100.0);
    return true; /* false would cancel */
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CHECKPOINT\n", argv[0]);
        return 2;
    }
    ws_checkpoint *ckpt = NULL;
    if (ws_open(argv[1], &ckpt) != WS_OK) {
        fprintf(stderr, "cannot open: %s\n", ws_last_error());
        return 1;
    }
    size_t n = ws_tensor_count(ckpt), m = 0;
    ws_load_request *reqs = calloc(n, sizeof *reqs);
    for (size_t i = 0; i < n; i++) {
        size_t bytes = ws_tensor_nbytes(ckpt, i, WS_DTYPE_BF16);
        if (bytes == 0) {
            ws_tensor_info info;
            ws_tensor_info_at(ckpt, i, &info);
            fprintf(stderr, "skipping %s (%s): not loadable as BF16\n", info.name, info.dtype);
            continue;
        }
        reqs[m].index = i;
        reqs[m].dtype = WS_DTYPE_BF16;
        reqs[m].dst.data = malloc(bytes);          /* or a device pointer with WS_MEMORY_CUDA */
        reqs[m].dst.size = bytes;
        reqs[m].dst.memory = WS_MEMORY_HOST;
        m++;
    }
    ws_status s = ws_load_tensors(ckpt, reqs, m, on_progress, NULL);
    fprintf(stderr, "\n");
    if (s != WS_OK) {
        fprintf(stderr, "load failed (%d): %s\n", (int)s, ws_last_error());
    }
    for (size_t r = 0; r < m; r++) {
        if (s == WS_OK) {
            ws_tensor_info info;
            ws_tensor_info_at(ckpt, reqs[r].index, &info);
            unsigned long sum = 0;
            const unsigned short *v = reqs[r].dst.data;
            for (size_t k = 0; k < reqs[r].dst.size / 2; k++) sum = sum * 31 + v[k];
            printf("%-40s %-8s %10llu elements  checksum %016lx\n", info.name, info.dtype, (unsigned long long)info.n_elements, sum);
        }
        free(reqs[r].dst.data);
    }
    free(reqs);
    ws_close(ckpt);
    return s == WS_OK ? 0 : 1;
}
