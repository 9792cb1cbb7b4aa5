#!/usr/bin/env python3
"""Expected outputs for test_capi.c beside this file, from the independent
references (gguf-py + ml_dtypes, tests/python/reference.py): for each
tensor of a GGUF fixture, NAME.bf16 (BF16 bits), NAME.f16out (float16
bits: the exact value rounded once by numpy), and NAME.f32 / NAME.f16 (the
stored bytes) for F32 and F16 tensors.

    python crates/weightstream-capi/tests/expected.py FIXTURE.gguf OUT_DIR
"""
import sys
from pathlib import Path

import gguf

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "python"))
import reference  # noqa: E402


def main(src: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for t in gguf.GGUFReader(src).tensors:
        raw = t.data.tobytes()
        kind = t.tensor_type.name
        if kind in ("F32", "F16", "BF16"):
            (out / f"{t.name}.bf16").write_bytes(reference.floats(raw, kind).tobytes())
            (out / f"{t.name}.f16out").write_bytes(reference.floats(raw, kind, out="F16").tobytes())
            if kind != "BF16":
                (out / f"{t.name}.{kind.lower()}").write_bytes(raw)
            continue
        try:
            (out / f"{t.name}.bf16").write_bytes(reference.gguf_quant(raw, t.tensor_type).tobytes())
            (out / f"{t.name}.f16out").write_bytes(reference.gguf_quant(raw, t.tensor_type, out="F16").tobytes())
        except NotImplementedError:
            pass  # no reference (Q8_K): the test checks it is refused


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
