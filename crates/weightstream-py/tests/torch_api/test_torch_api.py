"""The Python package with torch: load_file, open, iteration, errors,
concurrency, and (on a GPU) CUDA loads bitwise equal to CPU ones."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file as st_load_file

import weightstream
from harness import ROOT

WS_BIN = Path(os.environ.get("WEIGHTSTREAM_BIN", ROOT / "target/release/weightstream"))


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    d = tmp_path_factory.mktemp("samples")
    subprocess.run([sys.executable, ROOT / "tests/fixtures/sample_model.py", "--out", d, "--formats", "q4_0,q8_0,fp8,bf16"], check=True, capture_output=True)
    return {"q4_0": d / "tiny-llama-q4_0.gguf", "q8_0": d / "tiny-llama-q8_0.gguf", "fp8": d / "tiny-llama-fp8", "bf16": d / "tiny-llama-bf16"}


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int16).cpu()


@pytest.mark.parametrize("kind", ["q4_0", "q8_0", "fp8", "bf16"])
def test_load_file_matches_the_cli_convert_bitwise(samples, tmp_path, kind):
    got = weightstream.load_file(samples[kind])
    out = tmp_path / "ref.safetensors"
    subprocess.run([WS_BIN, "convert", samples[kind], "-o", out], check=True, capture_output=True)
    want = st_load_file(out)
    assert set(got) == set(want)
    for name, t in got.items():
        assert t.dtype == torch.bfloat16 and t.device.type == "cpu"
        assert list(t.shape) == list(want[name].shape), name
        assert torch.equal(bits(t), bits(want[name])), name


def test_open_keys_metadata_get_tensor_and_iteration(samples):
    with weightstream.open(samples["fp8"], batch_bytes=1 << 16) as ck:
        keys = ck.keys()
        assert "model.embed_tokens.weight" in keys and not any(k.endswith("_scale_inv") for k in keys)
        assert ck.config()["quantization_config"]["quant_method"] == "fp8"
        assert ck.dtype("model.embed_tokens.weight") == "F8_E4M3"
        one = ck.get_tensor("model.layers.1.mlp.down_proj.weight")
        streamed = dict(iter(ck))
        assert torch.equal(bits(ck["model.norm.weight"]), bits(streamed["model.norm.weight"]))
        assert list(streamed) == keys, "iteration follows file order"
        assert torch.equal(bits(streamed["model.layers.1.mlp.down_proj.weight"]), bits(one))
    meta = weightstream.open(samples["q4_0"]).metadata()
    assert meta["general.architecture"] == "llama"


def test_errors_are_python_exceptions_with_fields(samples, tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00[1, 2, 3]       ")
    with pytest.raises(weightstream.WeightstreamError) as e:
        weightstream.open(bad)
    assert e.value.kind == "not_an_object" and e.value.file == str(bad) and e.value.offset == 8
    with pytest.raises(KeyError):
        weightstream.open(samples["q4_0"]).get_tensor("nope")


def test_concurrent_loads_from_python_threads_equal_serial(samples):
    serial = {k: weightstream.load_file(p) for k, p in samples.items()}
    results, errors = {}, []

    def work(i, kind):
        try:
            results[i] = (kind, weightstream.load_file(samples[kind], threads=1))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i, k)) for i, k in enumerate(list(samples) * 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for kind, got in results.values():
        for name, t in got.items():
            assert torch.equal(bits(t), bits(serial[kind][name])), (kind, name)


def test_release_staging_frees_only_gpu_rings(samples):
    # CPU loads pin nothing: there is no ring to free.
    weightstream.load_file(samples["q4_0"])
    assert weightstream.release_staging() == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: scripts/gpu_round.sh runs it")
def test_a_dropped_checkpoints_ring_serves_the_next_until_released(samples):
    import gc
    weightstream.release_staging()
    cpu = weightstream.load_file(samples["q4_0"])
    for _ in range(2):
        # The second load in the process takes the first one's kept ring.
        gpu = weightstream.load_file(samples["q4_0"], device="cuda:0")
        gc.collect()
        for name, t in cpu.items():
            assert torch.equal(bits(gpu[name]), bits(t)), name
    assert weightstream.release_staging() == 1
    assert weightstream.release_staging() == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: scripts/gpu_round.sh runs it")
@pytest.mark.parametrize("kind", ["q4_0", "q8_0", "fp8", "bf16"])
def test_cuda_loads_equal_cpu_loads_bitwise(samples, kind):
    cpu = weightstream.load_file(samples[kind])
    gpu = weightstream.load_file(samples[kind], device="cuda:0")
    streamed = dict(iter(weightstream.open(samples[kind], device="cuda:0", batch_bytes=1 << 20)))
    for name, t in cpu.items():
        assert gpu[name].device.type == "cuda" and gpu[name].dtype == torch.bfloat16
        assert torch.equal(bits(gpu[name]), bits(t)), name
        assert torch.equal(bits(streamed[name]), bits(t)), name


@pytest.mark.parametrize("call", ["load_into", "get_slice"])
def test_torch_destinations_that_are_not_contiguous_bf16_are_refused(samples, call):
    """Issue 55 item 4, torch half (numpy's: tests/test_destinations.py):
    float16, int16 and float32 tensors, transposed, strided and (where
    there is a GPU) other-device ones are refused with a ValueError and
    left untouched; before, float16/int16 `out=` were filled with BF16 bit
    patterns."""
    name = "blk.0.ffn_down.weight"
    with weightstream.open(samples["q8_0"]) as ck:
        shape = tuple(ck.slice_shape(name))
        wide = torch.full((shape[0], shape[1] * 2), 3, dtype=torch.bfloat16)
        bad = {"float16": torch.full(shape, 3, dtype=torch.float16),
               "int16": torch.full(shape, 3, dtype=torch.int16),
               "float32 of the same bytes": torch.full((shape[0], shape[1] // 2), 3, dtype=torch.float32),
               "transposed": torch.full(shape[::-1], 3, dtype=torch.bfloat16).t(),
               "strided": wide[:, ::2]}
        if torch.cuda.is_available():
            bad["on the GPU"] = torch.full(shape, 3, dtype=torch.bfloat16, device="cuda")
        for what, out in bad.items():
            with pytest.raises(ValueError):
                if call == "load_into":
                    ck.load_into([name], [out])
                else:
                    ck.get_slice(name, out=out)
            assert bool((out == 3).all()), what
        good = torch.empty(shape, dtype=torch.bfloat16)
        if call == "load_into":
            ck.load_into([name], [good])
        else:
            assert ck.get_slice(name, out=good) is good
        assert torch.equal(bits(good), bits(ck.get_tensor(name)))
