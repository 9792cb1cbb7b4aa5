/*
 * weightstream for llama.cpp: build a llama_model whose quantized weights
 * (every type weightstream dequantizes: Q4_0 ... Q6_K, F16, BF16) are BF16 tensors filled by
 * weightstream, in the buffers llama.cpp allocates (CPU or GPU), through
 * llama_model_init_from_user. F32 tensors are copied as they are.
 *
 * Needs llama.cpp with llama_model_init_from_user (the copy vendored in
 * llama-cpp-python 0.3.36 has it) and libweightstream_c.
 */
#ifndef WS_LLAMA_H
#define WS_LLAMA_H

#include "llama.h"
#include "weightstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Load the GGUF at `path` as a llama_model with BF16 weights. On failure
 * returns NULL, sets *status (if not NULL) and writes a message into
 * `error` (if not NULL, at most error_size bytes including the NUL). */
struct llama_model *ws_llama_model_load(const char *path, struct llama_model_params params,
                                        ws_status *status, char *error, size_t error_size);

#ifdef __cplusplus
}
#endif

#endif /* WS_LLAMA_H */
