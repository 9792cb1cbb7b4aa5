/*
 * weightstream for llama.cpp: build a llama_model whose weights are BF16
 * tensors filled by weightstream, in the buffers llama.cpp allocates (CPU
 * or GPU), through llama_model_init_from_user. Inputs:
 *
 * - a GGUF file, or the first file of a llama-gguf-split set: every type
 *   weightstream dequantizes (Q4_0 ... Q6_K, IQ types, F16, BF16) becomes
 *   BF16, F32 tensors are copied as they are;
 * - a Hugging Face checkpoint directory (config.json, tokenizer.model or
 *   tokenizer.json,
 *   safetensors shards in any format weightstream reads; tested: BF16,
 *   block FP8, NVFP4 (ModelOpt, compressed-tensors), compressed-tensors
 *   INT4): the metadata convert_hf_to_gguf.py
 *   --outtype bf16 would write is built in memory (llama, Mistral, Qwen2,
 *   Qwen3, Qwen3-MoE; SentencePiece tokenizers, and byte-level BPE ones
 *   of the Llama 3 and Qwen kind), weights BF16, norms and the MoE router F32.
 *
 * Anything else (an architecture, tensor, rope type or tokenizer the
 * adapter does not convert) is refused with a message naming it.
 *
 * Needs llama.cpp with llama_model_init_from_user (the copy vendored in
 * llama-cpp-python 0.3.36 has it) and libweightstream_c; compile
 * ws_llama.c, ws_llama_hf.c, ws_llama_vocab.c, ws_llama_special.c,
 * ws_llama_spm.c and ws_json.c with it.
 */
#ifndef WS_LLAMA_H
#define WS_LLAMA_H

#include "llama.h"
#include "weightstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Load the GGUF file or checkpoint directory at `path` as a llama_model
 * with BF16 weights. On failure
 * returns NULL, sets *status (if not NULL) and writes a message into
 * `error` (if not NULL, at most error_size bytes including the NUL). */
struct llama_model *ws_llama_model_load(const char *path, struct llama_model_params params,
                                        ws_status *status, char *error, size_t error_size);

#ifdef __cplusplus
}
#endif

#endif /* WS_LLAMA_H */
