#!/usr/bin/env bash
# The C API and the llama.cpp adapter, against real llama.cpp:
#   - llama.cpp built from the pinned llama-cpp-python sdist (scripts/build_llama_cpp.sh);
#   - weightstream.h compiles as C11 and as C++;
#   - crates/weightstream-capi/tests/test_capi.c: every C API function,
#     error path and cancellation, under valgrind (definite or indirect
#     leaks fail);
#   - the packed safetensors fixtures (tests/fixtures/packed.py) through the
#     C API under valgrind: BF16 names and the CLI convert's bits;
#   - plugins/llamacpp/tests/test_adapter.c: tiny Llama GGUFs (Q4_0, Q8_0,
#     Q8_0 with tied embeddings, and a Q4_K_M and an IQ4_XS written by the real
#     llama-quantize) loaded through the adapter give logits identical to
#     llama.cpp's normal load of the gguf-py-dequantized BF16 GGUF; a GGUF
#     with a type no reference dequantizes (Q8_K) is refused with a message
#     naming the tensor;
#   - Hugging Face checkpoints (tiny llama, qwen2, qwen3, qwen3moe; BF16 and
#     FP8/NVFP4/INT4 of the same weights; a Mistral with a SentencePiece
#     tokenizer, BF16 and FP8; a Phi-3 with fused q/k/v and gate/up and
#     Phi-3's SentencePiece vocabulary, BF16 and FP8, with longrope
#     factors, and with Phi-4's byte-level BPE) through the adapter: metadata and
#     logits identical to llama.cpp's load of what the vendored
#     convert_hf_to_gguf.py writes from the reference BF16 checkpoint; an
#     unknown architecture and an unknown tensor refused, named;
#   - `weightstream convert --to gguf` of the same 27 checkpoints: every key
#     and every tensor's bytes of convert_hf_to_gguf.py's GGUF; the refused
#     ones refused, named, nothing written; llama-quantize's Q4_K_M of the
#     output equal to that of the reference, run by llama.cpp;
#   - the adapter under valgrind (GGUF, split set, Hugging Face, refusals);
#   - a split set made by the real llama-gguf-split loads through the C API
#     with the unsplit file's checksums, and (the Q4_K_M file in 3+ parts)
#     through the adapter with the unsplit reference's logits.
# Run scripts/setup.sh and scripts/setup_vllm.sh first.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/env.sh
# "valgrind": also the AVX2 libggml-cpu (lib-valgrind/) the adapter runs with under valgrind.
LLAMA=$(scripts/build_llama_cpp.sh valgrind | tail -1)
LIB=$ROOT/target/release
INC="-I$ROOT/crates/weightstream-capi/include -I$ROOT/plugins/llamacpp -I$LLAMA/include"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "test_c: the header as C11 and C++"
echo '#include "weightstream.h"' | cc -std=c11 -Wall -Wextra -Werror -x c -fsyntax-only $INC -
echo '#include "weightstream.h"' | c++ -std=c++17 -Wall -Wextra -Werror -x c++ -fsyntax-only $INC -

echo "test_c: C API under valgrind"
"$WS_VENV/bin/python" tests/fixtures/generate.py "$tmp/fx" >/dev/null
"$WS_VENV/bin/python" crates/weightstream-capi/tests/expected.py "$tmp/fx/all_types.gguf" "$tmp/expected"
cc -std=c11 -O1 -g -Wall -Wextra -Werror -pthread -o "$tmp/test_capi" crates/weightstream-capi/tests/test_capi.c $INC \
  -L"$LIB" -lweightstream_c -Wl,-rpath,"$LIB"
valgrind -q --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
  --error-exitcode=99 "$tmp/test_capi" "$tmp/fx" "$tmp/expected"

echo "test_c: the example in docs/c-api.md"
cc -std=c11 -Wall -Wextra -Werror -o "$tmp/load_gguf" docs/examples/load_gguf.c $INC -L"$LIB" -lweightstream_c -Wl,-rpath,"$LIB"
valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=99 \
  "$tmp/load_gguf" "$tmp/fx/all_types.gguf" 2>/dev/null | tail -3

echo "test_c: packed safetensors (NVFP4, MXFP4, INT4/INT8) through the C API: BF16 names, the CLI's bits"
"$WS_VENV/bin/python" tests/fixtures/packed.py "$tmp/packed"
for d in "$tmp/packed"/*/; do
  valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=99 \
    "$tmp/load_gguf" "$d" 2>/dev/null >"$tmp/capi.txt"
  target/release/weightstream convert "$d" -o "$tmp/packed.safetensors" --force >/dev/null
  "$WS_VENV/bin/python" - "$tmp/packed.safetensors" "$tmp/capi.txt" "$d" <<'PY'
import sys
import numpy as np
import safetensors
got = {line.split()[0]: line.split()[-1] for line in open(sys.argv[2])}
want = {}
for name, t in safetensors.deserialize(open(sys.argv[1], "rb").read()):
    s = 0
    for v in np.frombuffer(bytes(t["data"]), np.uint16).tolist():
        s = (s * 31 + v) & (2**64 - 1)
    want[name] = f"{s:016x}"
assert got == want and len(want) > 1, (sys.argv[3], got, want)
PY
done

echo "test_c: the llama.cpp adapter against llama.cpp"
"$WS_VENV/bin/python" plugins/llamacpp/tests/make_models.py "$tmp/models" "$LLAMA/bin/llama-quantize" >/dev/null
echo "test_c: a llama-gguf-split set through the C API gives the unsplit file's checksums"
mkdir "$tmp/split"
"$LLAMA/bin/llama-gguf-split" --split --split-max-tensors 8 "$tmp/models/tiny-llama-q4_0.gguf" "$tmp/split/tiny" \
  >"$tmp/split.log" 2>&1 || { tail -20 "$tmp/split.log"; exit 1; }
"$tmp/load_gguf" "$tmp/models/tiny-llama-q4_0.gguf" 2>/dev/null >"$tmp/whole.txt"
for start in "$tmp/split/tiny-00001-of-"*.gguf "$tmp/split"; do
  "$tmp/load_gguf" "$start" 2>/dev/null >"$tmp/split.txt"
  [ "$(grep -c checksum "$tmp/whole.txt")" -gt 30 ] && cmp "$tmp/whole.txt" "$tmp/split.txt" \
    || { echo "test_c: $start differs from the unsplit file"; diff "$tmp/whole.txt" "$tmp/split.txt" | head; exit 1; }
done
ADAPTER=(plugins/llamacpp/ws_llama.c plugins/llamacpp/ws_llama_hf.c)
cc -std=c11 -O1 -g -Wall -Wextra -Werror -o "$tmp/test_adapter" plugins/llamacpp/tests/test_adapter.c "${ADAPTER[@]}" $INC \
  -L"$LLAMA/lib" -L"$LIB" -lllama -lggml -lggml-base -lweightstream_c \
  -Wl,--disable-new-dtags -Wl,-rpath,"$LLAMA/lib" -Wl,-rpath,"$LIB"
for m in q4_0 q8_0 q4_k_m iq4_xs q8_0-tied; do
  printf 'test_c: %-10s ' "$m"
  "$tmp/test_adapter" "$tmp/models/tiny-llama-$m.gguf" "$tmp/models/tiny-llama-$m.ref-bf16.gguf" \
    "$tmp/models/tiny-llama-unsupported.gguf" 2>"$tmp/adapter.log" | tr '\n' ' ' || { echo; cat "$tmp/adapter.log" | grep -v "^llama_\|^load\|^print_info\|^graph\|^sched" | tail -20; exit 1; }
  echo
done
# A split set: the adapter reads the first file's metadata, which lists
# only that file's tensors; the others must reach llama.cpp as BF16 too.
echo "test_c: a llama-gguf-split set of the Q4_K_M file through the adapter"
"$LLAMA/bin/llama-gguf-split" --split --split-max-tensors 8 "$tmp/models/tiny-llama-q4_k_m.gguf" "$tmp/split/m" \
  >"$tmp/split.log" 2>&1 || { tail -20 "$tmp/split.log"; exit 1; }
shards=("$tmp/split/m-"*.gguf)
[ "${#shards[@]}" -ge 3 ] || { echo "test_c: llama-gguf-split wrote ${#shards[@]} files, expected 3 or more"; exit 1; }
"$tmp/test_adapter" "${shards[0]}" "$tmp/models/tiny-llama-q4_k_m.ref-bf16.gguf" 2>"$tmp/adapter.log" \
  || { grep -v "^llama_\|^load\|^print_info\|^graph\|^sched" "$tmp/adapter.log" | tail -20; exit 1; }
# Hugging Face checkpoints: the tiny models of plugins/llamacpp/tests/make_hf_models.py
# (BF16, FP8, NVFP4 twice, INT4 of each architecture), their references
# written by the vendored convert_hf_to_gguf.py (needs torch and
# transformers: the vLLM venv).
VLLM_PY=${WEIGHTSTREAM_VLLM_VENV:-$ROOT/.venv-vllm}/bin/python
[ -x "$VLLM_PY" ] || { echo "test_c: $VLLM_PY is missing: run scripts/setup_vllm.sh (convert_hf_to_gguf.py needs torch)"; exit 1; }
echo "test_c: Hugging Face checkpoints through the adapter: metadata and logits of convert_hf_to_gguf.py's GGUF"
"$VLLM_PY" plugins/llamacpp/tests/make_hf_models.py "$tmp/hf" "$LLAMA/../src" >"$tmp/hf.list" 2>"$tmp/hf.log" \
  || { tail -30 "$tmp/hf.log"; exit 1; }
n=0
while read -r model; do
  printf 'test_c: %-26s ' "$(basename "$model")"
  "$tmp/test_adapter" "$model" "$model.ref-bf16.gguf" 2>"$tmp/adapter.log" \
    || { echo; grep -v "^llama_\|^load\|^print_info\|^graph\|^sched" "$tmp/adapter.log" | tail -20; exit 1; }
  n=$((n + 1))
done < <(grep "^$tmp/hf/" "$tmp/hf.list")
# 4 architectures x 5 formats, Mistral (SentencePiece) in BF16 and FP8, Llama 3.1's rope; Phi-3 in BF16 and FP8, its longrope, Phi-4's BPE tokenizer
[ "$n" -eq 27 ] || { echo "test_c: $n Hugging Face checkpoints tested, expected 27"; exit 1; }
for refused in "unsupported-arch Gemma2ForCausalLM" "unsupported-reranker Qwen3 reranker" "unsupported-pooling modules.json"; do
  printf 'test_c: refused:  '
  # shellcheck disable=SC2086
  set -- $refused
  "$tmp/test_adapter" "$tmp/hf/qwen2-bf16" "$tmp/hf/qwen2-bf16.ref-bf16.gguf" "$tmp/hf/$1" "${*:2}" 2>/dev/null | tail -1
done

# The same checkpoints through `weightstream convert --to gguf` (crate
# weightstream-hf2gguf): the GGUF convert_hf_to_gguf.py writes, key for key
# and tensor for tensor. The quantized variants' references were converted
# from another directory (NAME/fp8-ref, ...), so their general.name differs.
echo "test_c: weightstream convert --to gguf against convert_hf_to_gguf.py: every key, every tensor's bytes"
mkdir -p "$tmp/conv"
n=0
: >"$tmp/conv/pairs"
while read -r model; do
  name=$(basename "$model")
  target/release/weightstream convert "$model" -o "$tmp/conv/$name.gguf" >/dev/null
  ignore=""
  [[ $name == *-bf16 ]] || ignore=general.name
  echo "$tmp/conv/$name.gguf $model.ref-bf16.gguf $ignore" >>"$tmp/conv/pairs"
  n=$((n + 1))
done < <(grep "^$tmp/hf/" "$tmp/hf.list")
[ "$n" -eq 27 ] || { echo "test_c: $n checkpoints converted to GGUF, expected 27"; exit 1; }
# Every pair in one process (gguf-py imported once).
PYTHONPATH="$LLAMA/../src/gguf-py" "$VLLM_PY" plugins/llamacpp/tests/compare_gguf.py --pairs "$tmp/conv/pairs" \
  || { echo "test_c: a convert --to gguf differs from convert_hf_to_gguf.py's (above)"; exit 1; }
for refused in "unsupported-arch Gemma2ForCausalLM" "unsupported-reranker reranker" "unsupported-pooling modules.json" \
               "unsupported-tensor model.layers.0.mlp.extra_proj.weight" "hostile-heads num_attention_heads" "hostile-vocab tokens" \
               "hostile-experts num_experts"; do
  # shellcheck disable=SC2086
  set -- $refused
  if target/release/weightstream convert "$tmp/hf/$1" -o "$tmp/conv/$1.gguf" 2>"$tmp/refused.log"; then
    echo "test_c: convert --to gguf of $1 succeeded; it must be refused"; exit 1
  fi
  grep -q "$2" "$tmp/refused.log" || { echo "test_c: the refusal of $1 does not name $2:"; cat "$tmp/refused.log"; exit 1; }
  [ ! -e "$tmp/conv/$1.gguf" ] || { echo "test_c: a refused convert left $tmp/conv/$1.gguf"; exit 1; }
done
# llama.cpp's own llama-quantize takes the output: its Q4_K_M of ours is
# the Q4_K_M of the reference, and llama.cpp runs it (llama-imatrix: two
# chunks of text through the quantized MoE model).
echo "test_c: llama-quantize Q4_K_M of the converted Qwen3-MoE FP8, run by llama.cpp"
"$LLAMA/bin/llama-quantize" "$tmp/conv/qwen3moe-fp8.gguf" "$tmp/conv/q4km.gguf" Q4_K_M >"$tmp/quantize.log" 2>&1 \
  || { tail -20 "$tmp/quantize.log"; exit 1; }
"$LLAMA/bin/llama-quantize" "$tmp/hf/qwen3moe-fp8.ref-bf16.gguf" "$tmp/conv/q4km-ref.gguf" Q4_K_M >/dev/null 2>&1
PYTHONPATH="$LLAMA/../src/gguf-py" "$VLLM_PY" plugins/llamacpp/tests/compare_gguf.py "$tmp/conv/q4km.gguf" "$tmp/conv/q4km-ref.gguf" --ignore general.name
python3 -c 'print("the quick brown fox jumps over the lazy dog. " * 40)' >"$tmp/text.txt"
"$LLAMA/bin/llama-imatrix" -m "$tmp/conv/q4km.gguf" -f "$tmp/text.txt" -o "$tmp/conv/imatrix.gguf" -c 64 --chunks 2 >"$tmp/imatrix.log" 2>&1 \
  || { tail -20 "$tmp/imatrix.log"; exit 1; }
grep -q "Final estimate: PPL" "$tmp/imatrix.log" || { tail -20 "$tmp/imatrix.log"; exit 1; }

echo "test_c: docs/examples/llama_next_token.c on the Qwen3 FP8 checkpoint"
cc -std=c11 -Wall -Wextra -Werror -o "$tmp/llama_next_token" docs/examples/llama_next_token.c "${ADAPTER[@]}" $INC \
  -L"$LLAMA/lib" -L"$LIB" -lllama -lggml -lggml-base -lweightstream_c \
  -Wl,--disable-new-dtags -Wl,-rpath,"$LLAMA/lib" -Wl,-rpath,"$LIB"
"$tmp/llama_next_token" "$tmp/hf/qwen3-fp8" 1 17 42 2>"$tmp/example.log" | grep -E '^next token: [0-9]+$' \
  || { tail -20 "$tmp/example.log"; exit 1; }
# Hostile checkpoints the former C builder let through to llama.cpp, which
# aborted the host process: the adapter returns a status, naming the field.
for hostile in "hostile-heads num_attention_heads" "hostile-vocab tokens" "hostile-experts num_experts"; do
  # shellcheck disable=SC2086
  set -- $hostile
  rc=0
  "$tmp/llama_next_token" "$tmp/hf/$1" 1 2 >"$tmp/hostile.log" 2>&1 || rc=$?
  if [ "$rc" -ne 1 ] || ! grep -q "$2" "$tmp/hostile.log"; then
    echo "test_c: $1 through the adapter: exit $rc, expected 1 and a message naming $2:"; tail -5 "$tmp/hostile.log"; exit 1
  fi
  echo "test_c: refused: $(grep -o "cannot load.*" "$tmp/hostile.log")"
done

# The adapter under valgrind: the same llama.cpp with its CPU backend built
# for AVX2 (valgrind cannot run the native build's AVX-512), first in the rpath.
echo "test_c: the adapter under valgrind (split set, tied embeddings, Hugging Face llama/qwen3moe/mistral/phi3, the refused ones)"
cc -std=c11 -O1 -g -Wall -Wextra -Werror -o "$tmp/test_adapter_vg" plugins/llamacpp/tests/test_adapter.c "${ADAPTER[@]}" $INC \
  -L"$LLAMA/lib" -L"$LIB" -lllama -lggml -lggml-base -lweightstream_c \
  -Wl,--disable-new-dtags -Wl,-rpath,"$LLAMA/lib-valgrind" -Wl,-rpath,"$LLAMA/lib" -Wl,-rpath,"$LIB"
VG=(valgrind -q --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect --error-exitcode=99)
pairs=("${shards[0]} $tmp/models/tiny-llama-q4_k_m.ref-bf16.gguf $tmp/models/tiny-llama-unsupported.gguf"
       "$tmp/models/tiny-llama-q8_0-tied.gguf $tmp/models/tiny-llama-q8_0-tied.ref-bf16.gguf $tmp/models/tiny-llama-unsupported.gguf"
       "$tmp/hf/llama-nvfp4-ct $tmp/hf/llama-nvfp4-ct.ref-bf16.gguf $tmp/hf/unsupported-tensor model.layers.0.mlp.extra_proj.weight"
       "$tmp/hf/qwen3moe-fp8 $tmp/hf/qwen3moe-fp8.ref-bf16.gguf $tmp/hf/unsupported-arch Gemma2ForCausalLM"
       "$tmp/hf/mistral-fp8 $tmp/hf/mistral-fp8.ref-bf16.gguf $tmp/hf/unsupported-reranker reranker"
       "$tmp/hf/phi3-fp8 $tmp/hf/phi3-fp8.ref-bf16.gguf $tmp/hf/unsupported-pooling modules.json")
# (Not phi3longrope: with partial rotary, ggml's rope_cache_init reads
# freq_factors for the whole head, past the rope_factors tensor, into the
# unwritten rest of the adapter's buffer; those lanes are not rotated.)
# valgrind runs a program on one core: one run per core at a time, each
# with its own output, log and exit status, reported in order.
for i in "${!pairs[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  # shellcheck disable=SC2086
  ( "${VG[@]}" "$tmp/test_adapter_vg" ${pairs[$i]} >"$tmp/vg$i.out" 2>"$tmp/vg$i.log"; echo $? >"$tmp/vg$i.rc" ) &
done
wait
for i in "${!pairs[@]}"; do
  tr '\n' ' ' <"$tmp/vg$i.out"
  echo
  [ "$(cat "$tmp/vg$i.rc")" = 0 ] \
    || { echo "test_c: under valgrind, failed ($(cat "$tmp/vg$i.rc")): ${pairs[$i]}"
         grep -v "^llama_\|^load\|^print_info\|^graph\|^sched" "$tmp/vg$i.log" | tail -40; exit 1; }
done
echo "test_c: passed"
