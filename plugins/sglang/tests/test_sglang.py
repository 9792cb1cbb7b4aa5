"""weightstream in real SGLang (0.5.23) on the CPU: the plugin registers
`--load-format weightstream`, and it generates exactly the greedy tokens of
SGLang's default loader on the BF16 checkpoint of the exact dequantization,
for GGUF Q8_0 and Q4_0 (llama.cpp's q/k permutation), the real
llama-quantize's Q4_K_M, a llama-gguf-split set, block FP8, from local
files and from a real SeaweedFS (tests/s3/seaweed.py).

Engine starts are what costs (about 25-40 s each on 2 cores), so one engine
serves every checkpoint of one model shape: it starts with weightstream on
one checkpoint, then `update_weights_from_disk` puts each other checkpoint
into it, through weightstream or, for the references, through SGLang's
default loader ("auto"). Two engines in all (sglang_run.py)."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT

import real_quants
from seaweed import SeaweedS3

RUNNER = ROOT / "plugins" / "sglang" / "tests" / "sglang_run.py"
# The references (SGLang's default loader, a BF16 safetensors checkpoint)
# and what must give their tokens, in the order the shared engine loads them.
KINDS = ["q8_0", "q4_0", "fp8"]


@pytest.fixture(scope="module")
def results(variants, q4_k_m, tmp_path_factory):
    """{name: tokens} of every load, from one sglang_run.py process."""
    # A checkpoint cut short: the update must fail and leave the weights.
    truncated = tmp_path_factory.mktemp("truncated")
    whole = (q4_k_m[0] / "model.gguf").read_bytes()
    (truncated / "model.gguf").write_bytes(whole[: len(whole) * 2 // 3])
    (truncated / "config.json").write_bytes((q4_k_m[0] / "config.json").read_bytes())
    split = tmp_path_factory.mktemp("split") / "q4_0"
    real_quants.split(variants["q4_0"][0] / "model.gguf", split)
    (split / "config.json").write_bytes((variants["q4_0"][0] / "config.json").read_bytes())
    with SeaweedS3(tmp_path_factory.mktemp("seaweed")) as s3:
        s3.make_bucket("models")
        s3.put_tree("models", "fp8/", variants["fp8"][0])
        s3.put_file("models", "q4_0/model.gguf", variants["q4_0"][0] / "model.gguf")
        # Each load's neighbours are other checkpoints (other tokens), so a
        # reload that changed nothing could not pass (test_each_load_changed_the_weights).
        q8_0, q4_0, fp8 = (variants[k] for k in KINDS)
        # The start is the FP8 checkpoint: its quantization_config is dropped
        # before SGLang builds the model (a GGUF start: the Q4_K_M engine's).
        loads = [("fp8", fp8[0], "weightstream"), ("q4_0-ref", q4_0[1], "auto"), ("q8_0-ref", q8_0[1], "auto"),
                 ("q4_0", q4_0[0], "weightstream"), ("fp8-ref", fp8[1], "auto"), ("q4_0-split", split, "weightstream"),
                 ("q8_0", q8_0[0], "weightstream"), ("q4_0-s3", "s3://models/q4_0/model.gguf", "weightstream"),
                 ("fp8-s3", "s3://models/fp8/", "weightstream")]
        # The start also writes its load's JSON record (load_record.py).
        record = tmp_path_factory.mktemp("records") / "load-{rank}.json"
        specs = [
            {"model": str(loads[0][1]), "load_format": "weightstream",
             "model_loader_extra_config": json.dumps({"stats": str(record)}),
             "reload": [{"model": str(m), "load_format": f} for _, m, f in loads[1:]]},
            {"model": str(q4_k_m[0]), "load_format": "weightstream",
             "reload": [{"model": str(truncated), "load_format": "weightstream", "fails": True}, {"model": str(q4_k_m[1])}]},
        ]
        names = [[n for n, _, _ in loads], ["Q4_K_M", "Q4_K_M-after-failed", "Q4_K_M-ref"]]
        env = {**s3.env(), "SGLANG_USE_CPU_ENGINE": "1"}
        r = subprocess.run([sys.executable, str(RUNNER), json.dumps(specs)], capture_output=True, text=True,
                           timeout=900, env=env)
    out, log = {}, r.stdout + r.stderr
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            _, i, body = line.split(" ", 2)
            res = json.loads(body)
            assert "error" not in res, f"engine {i}: {res['error']}\n{log[-6000:]}"
            print(f"engine {i}: started in {res['start_s']} s")
            for name, toks in zip(names[int(i)], [res["tokens"]] + res["reloads"]):
                out[name] = toks
            out.setdefault("failed", []).extend(res.get("failed", []))
    assert len(out) == sum(map(len, names)) + 1, f"runner exited {r.returncode}\n{log[-6000:]}"
    out["log"] = log
    out["record"] = str(record).format(rank=0)
    out["order"] = names[0]
    return out


def test_the_plugin_registers_the_load_format():
    code = (
        "from sglang.srt.plugins import load_plugins; load_plugins(); load_plugins()\n"
        "from sglang.srt.configs.load_config import LoadConfig\n"
        "from sglang.srt.model_loader.loader import get_model_loader\n"
        "from sglang.srt.server_args import LOAD_FORMAT_CHOICES\n"
        "from weightstream_sglang.loader import WeightstreamModelLoader\n"
        "assert LOAD_FORMAT_CHOICES.count('weightstream') == 1, LOAD_FORMAT_CHOICES\n"
        "l = get_model_loader(LoadConfig(load_format='weightstream', model_loader_extra_config={'threads': 2}))\n"
        "assert isinstance(l, WeightstreamModelLoader), type(l)\n"
        "assert l.options.threads == 2\n"
        "assert LoadConfig(load_format='auto').load_format == 'auto'\n"
        "for extra, want in (({'keep': 'quantized'}, 'keep=quantized'), ({'nope': 1}, 'unknown option')):\n"
        "    try:\n"
        "        get_model_loader(LoadConfig(load_format='weightstream', model_loader_extra_config=extra))\n"
        "        raise SystemExit(f'{extra} was accepted')\n"
        "    except ValueError as e:\n"
        "        assert want in str(e), e\n"
        # The rollback that follows a failed update (test_a_failed_update_keeps_the_weights_and_the_server
        # runs the case where nothing was written): refused where weights were already replaced.
        "import types, torch\n"
        "from sglang.srt.model_loader.loader import DefaultModelLoader\n"
        "from weightstream_sglang.loader import FAILED_UPDATE\n"
        "m, src = torch.nn.Linear(2, 2), DefaultModelLoader.Source('/m', None, model_config=types.SimpleNamespace(model_path='/m'))\n"
        "m.__dict__[FAILED_UPDATE] = {'path': '/m', 'wrote': True}\n"
        "try:\n"
        "    l.load_weights_and_postprocess(m, src, torch.device('cpu'))\n"
        "    raise SystemExit('a rollback over replaced weights was taken')\n"
        "except RuntimeError as e:\n"
        "    assert 'refusing to serve a mix' in str(e) and FAILED_UPDATE not in m.__dict__, e\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


@pytest.mark.parametrize("kind", KINDS)
def test_same_greedy_tokens_as_the_default_loader(results, kind):
    assert results[kind] == results[f"{kind}-ref"], kind


def test_each_load_changed_the_weights(results):
    """Consecutive loads of the shared engine give other tokens: every
    reload really replaced the weights (else the token checks could pass on
    the previous checkpoint's). (The Q4_K_M engine's weightstream load is
    its start: there are no earlier weights to keep.)"""
    names = results["order"]
    for a, b in zip(names, names[1:]):
        assert results[a] != results[b], (a, b)


def test_q4_k_m_from_llama_quantize(results):
    assert results["Q4_K_M"] == results["Q4_K_M-ref"]


def test_a_split_set(results):
    assert results["q4_0-split"] == results["q4_0-ref"]


@pytest.mark.parametrize("kind", ["q4_0", "fp8"])
def test_from_seaweedfs(results, kind):
    """A GGUF (one key) and FP8 safetensors (a prefix), read with ranged GETs."""
    assert results[f"{kind}-s3"] == results[f"{kind}-ref"]
    assert re.search(rf"weightstream: loaded s3://models/{kind}\S* on cpu .* fetched \d+ bytes in \d+ ranged GETs", results["log"])


def test_the_start_writes_its_load_record(results, variants):
    """model_loader_extra_config {"stats": PATH}: the load's JSON record
    says what the log line says (the start's load: FP8, local)."""
    from pathlib import Path

    rec = json.loads(Path(results["record"]).read_text())
    line = re.search(r"weightstream: loaded (\S+) on cpu in [\d.]+ s \((\d+) tensors: (\d+) dequantized into their "
                     r"parameters, (\d+) through the model's loaders\), (\d+) file bytes read", results["log"])
    assert line, results["log"][-3000:]
    assert rec["checkpoint"] == line.group(1) and Path(rec["checkpoint"]).resolve() == variants["fp8"][0].resolve(), rec
    t = rec["tensors"]
    assert (t["planned"], t["into_parameters"], t["through_model"]) == tuple(int(g) for g in line.group(2, 3, 4)), t
    assert rec["bytes"]["read"] == int(line.group(5)) and rec["bytes"]["share"] == rec["bytes"]["whole"] > 0, rec
    assert rec["fetched"] is None and rec["device"] == "cpu" and rec["layout"]["tp_size"] == 1, rec


def test_a_failed_update_keeps_the_weights_and_the_server(results):
    """update_weights_from_disk from a truncated GGUF: refused with the
    file's error before any weight is written, and SGLang's rollback (which
    loads the failed path again) leaves the weights as they were, where it
    used to fail again and take the server down. The engine then serves
    the same tokens and takes the next update."""
    (failed,) = results["failed"]
    assert failed["ok"] is False, failed
    assert "lies outside the" in failed["message"] and failed["model"] in failed["message"], failed
    assert results["Q4_K_M-after-failed"] == results["Q4_K_M"]
    assert f"the failed update from {failed['model']} wrote no weight" in results["log"], results["log"][-3000:]
