#!/usr/bin/env python3
"""A speed model of the dequantization kernels that needs no GPU (issue 56):
each kernel's hot-loop instructions per output, by pipe, counted from its
sm_90 SASS, and the fraction of device-to-device copy bandwidth they allow.

    bench/gpu/sass_budget.py              # table for the current kernels
    bench/gpu/sass_budget.py --json       # {"kernels": {NAME: {alu_per_output, budget, predicted_fraction}}}
    bench/gpu/sass_budget.py --validate   # the kernels of 6609d34 against the 2026-11-27 H200 sweep
    bench/gpu/sass_budget.py --check      # the test command's gate (bench/gpu/sass_budget_below.json)
    bench/gpu/sass_budget.py --out f16    # the float16 instantiations (table or --json; never gated)

Needs WEIGHTSTREAM_NVCC (scripts/env.sh) and the pinned cuobjdump beside it
(requirements/cuda-toolchain.txt); takes about 10 s on 2 cores.

The model (/work/shared/gpu/DESK-CHECK.md §1.1-1.3; the counting is
sass_loop.py, the build sass_build.py):

- the kernels are bound by the 16-lane integer/logic (ALU) pipe. ws_q4_0
  spends 14.4 ALU instructions per output and moved 2543 GB/s (read +
  written) on the H200: 1.43e13 ALU lane-operations per second, 85 % of
  16 lanes x 528 sub-partitions x 1.98 GHz. So a kernel spending A ALU per
  output, moving B bytes per output, runs at 1.43e13 / A outputs per second,
  a fraction 1.43e13 * B / (A * D2D) of the copy (D2D 4161 GB/s, same run);
- the same 85 % of the other limits: issue (one warp-instruction per
  sub-partition per cycle, twice the ALU rate, all instructions), the FMA
  pipes (IMAD on the 16-lane heavy half: the ALU rate; FP32 on both halves),
  XU (I2F, MUFU: 16 lanes per SM, a quarter of the ALU rate);
- a latency ceiling: Q1_0 (6.2 ALU per output) and Q8_0 (11.4) measured 0.82
  and 0.80 where the ALU bound allows 1.18 and 0.92. Both do one 8-output
  group per thread per loop trip (one load round trip per 8 outputs, §1.3),
  while F32, with twice the bytes read than written per group, reached
  0.99. So a kernel that writes more than it reads is capped at 0.81 (their
  mean) times the outputs per trip / 8: two groups per trip doubles the bytes
  in flight. That scaling is the desk check's hypothesis, not yet measured;
- budget: the ALU instructions per output at which the ALU bound is 0.90,
  1.43e13 * B / (0.9 * D2D) = 3.8 * B.

Three of the sweep's kernels set the constants (q4_0 the ALU rate, q1_0 and
q8_0 the latency ceiling), so `--validate` is in-sample for those three;
every other kernel's prediction uses nothing measured about it.

Float16 output (issue 57): each kernel `ws_<name>` has a float16 twin
`ws_<name>_f16`, the same body with another final rounding (kernels/cuda/
common.cuh `Out`). The gate and its list are the BF16 kernels' (whose
machine code the twins left unchanged); `--out f16` models the twins, named
`<name>:f16` (plus `bf16:f16`, BF16 -> float16), for information only:
the constants were fitted to BF16 kernels, and no GPU has run a twin yet.

Bytes per output: the block table's BYTES / ELEMS read (block.rs, parsed by
sass_build.py) plus 2 written; the other kernels as sweep.py feeds them
(SCALED below, with the scale bytes it counts).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sass_build  # noqa: E402
import sass_loop  # noqa: E402

HERE = Path(__file__).resolve().parent
RECORD = HERE / "records/2026-11-27-sweep.json"
BELOW = HERE / "sass_budget_below.json"
VALIDATE_COMMIT = "6609d34"
TOLERANCE = 0.05
TARGET = 0.90
SLACK = 0.005  # rounding of the recorded predictions

ALU_RATE = 1.43e13  # ALU lane-ops per second at ws_q4_0's measured rate (§1.1)
# Relative to the ALU pipe: lanes per sub-partition / 16.
PIPE_SCALE = {"total": 2.0, "imad": 1.0, "fp32": 2.0, "xu": 0.25}
LATENCY_CEILING = (0.82 + 0.80) / 2  # Q1_0, Q8_0 measured, 8 outputs per trip
WRITTEN = 2  # BF16 (or float16) bytes per output

# Kernels that are not block formats: (function, bytes read per output), as
# bench/gpu/sweep.py `scaled_inputs` and `inputs` feed them (f32 scales
# counted; FP8 block scales one per 128 x 128, INT8 one per row of 8192).
# int8_channel_f16 runs with round_f16 = 1: its path is the one that rounds
# each output through F16 too (NaN-tests per output: 2, sass_loop.hot_path).
ROUND_F16 = {"int8_channel_f16"}
SCALED = {
    "fp8_e4m3_block": ("ws_fp8_e4m3", 1 + 4 / (128 * 128)),
    "fp8_e4m3_tensor": ("ws_fp8_e4m3", 1.0),
    "fp8_e5m2_block": ("ws_fp8_e5m2", 1 + 4 / (128 * 128)),
    "nvfp4_st": ("ws_e2m1", 0.5 + 4 / 16),
    "mxfp4_st": ("ws_e2m1", 0.5 + 4 / 32),
    "int4_g128_zp": ("ws_int4", 0.5 + 8 / 128),
    "int8_channel_f16": ("ws_int8", 1 + 4 / 8192),
    "f16": ("ws_f16", 2.0),
    "f32": ("ws_f32", 4.0),
}


def kernels(tree: Path, out: str = "bf16") -> dict[str, tuple[str, float]]:
    """{sweep kernel name: (CUDA function, bytes read per output)}; for
    `out` f16 the float16 twins (sweep.py's names, `<name>:f16`; ws_f16,
    F16 -> BF16, has none: F16 -> float16 is a copy)."""
    blocks = {f.module: (f"ws_{f.module}", f.bytes / f.elems) for f in sass_build.block_formats(tree).values()}
    every = {**blocks, **SCALED}
    if out == "bf16":
        return every
    twins = {f"{k}:f16": (f"{fn}_f16", read) for k, (fn, read) in every.items() if fn != "ws_f16"}
    return {**twins, "bf16:f16": ("ws_bf16_f16", 2.0)}


def predict(counts: dict[str, float], outputs: int, read: float, d2d: float) -> dict:
    """The bounds and the predicted fraction of D2D for one kernel."""
    moved = read + WRITTEN
    per = {"alu": counts["alu"], "total": counts["total"], "imad": counts["imad"],
           "fp32": counts["fma"] + counts["imad"], "xu": counts["xu"]}
    bounds = {}
    for pipe, n in per.items():
        rate = ALU_RATE * PIPE_SCALE.get(pipe, 1.0)
        bounds[pipe] = rate * moved / (n * d2d) if n else float("inf")
    bounds["latency"] = LATENCY_CEILING * outputs / 8 if read < WRITTEN else float("inf")
    fraction = min(1.0, *bounds.values())
    return {"alu_per_output": round(counts["alu"], 3), "total_per_output": round(counts["total"], 3),
            "budget": round(ALU_RATE * moved / (TARGET * d2d), 2), "predicted_fraction": round(fraction, 3),
            "bound": min(bounds, key=bounds.get) if fraction < 1 else "copy", "outputs_per_trip": outputs}


def model(tree: Path, d2d: float, output: str = "bf16") -> dict[str, dict]:
    """Compile `tree`'s kernels and predict every kernel the sweep measures
    (writing `output`: bf16, or f16 for the float16 twins)."""
    funcs = sass_loop.parse(sass_build.sass(tree))
    counted = {}
    out = {}
    for name, (fn, read) in kernels(tree, output).items():
        if fn not in funcs:
            raise SystemExit(f"sass_budget: no {fn} in the SASS of {tree}")
        rounds_f16 = name.partition(":")[0] in ROUND_F16
        key = (fn, rounds_f16)
        if key not in counted:
            path = sass_loop.hot_path(funcs[fn], 2 if rounds_f16 else 1)
            counted[key] = (sass_loop.per_output(path), path.outputs)
        counts, outputs = counted[key]
        out[name] = predict(counts, outputs, read, d2d)
    return out


def table(pred: dict[str, dict], measured: dict[str, float] | None = None) -> str:
    head = "| kernel | total/out | ALU/out | budget | bound | predicted |" + (" measured | diff |" if measured else "")
    lines = [head, "|---|---|---|---|---|---|" + ("---|---|" if measured else "")]
    for k, p in pred.items():
        if measured is not None and k not in measured:
            continue
        row = (f"| {k} | {p['total_per_output']:.1f} | {p['alu_per_output']:.1f} | {p['budget']:.1f} | {p['bound']} "
               f"| {p['predicted_fraction']:.3f} |")
        if measured:
            d = p["predicted_fraction"] - measured[k]
            row += f" {measured[k]:.3f} | {d:+.3f}{'' if abs(d) <= TOLERANCE + 1e-9 else ' *'} |"
        lines.append(row)
    return "\n".join(lines)


def validate(d2d: float, measured: dict[str, float]) -> int:
    """The kernels as they were at VALIDATE_COMMIT, against the sweep."""
    with tempfile.TemporaryDirectory(prefix="sass-validate-") as tmp:
        sass_build.archive(VALIDATE_COMMIT, Path(tmp))
        pred = model(Path(tmp), d2d)
    missing = sorted(set(measured) - set(pred))
    if missing:
        raise SystemExit(f"sass_budget: measured but not modeled: {missing}")
    print(f"The kernels at {VALIDATE_COMMIT} against {RECORD.relative_to(sass_build.ROOT)} (* : off by more than {TOLERANCE})\n")
    print(table(pred, measured))
    hits = sum(abs(pred[k]["predicted_fraction"] - v) <= TOLERANCE + 1e-9 for k, v in measured.items())
    print(f"\n{hits}/{len(measured)} kernels within {TOLERANCE}")
    return 0


def check(pred: dict[str, dict]) -> int:
    """The ratchet: every kernel predicted at TARGET or above, except those
    listed in BELOW; every listed one still below TARGET (an improved kernel
    must leave the list, so the list only shrinks) and at its recorded
    prediction (a listed kernel cannot regress unnoticed, and a gain is
    recorded when it is made; lower a number only with a reason in the
    commit)."""
    below = json.loads(BELOW.read_text())["kernels"]
    errors = []
    for k, p in pred.items():
        f = p["predicted_fraction"]
        if f < TARGET and k not in below:
            errors.append(f"{k}: predicted {f:.2f} of D2D, under {TARGET} and not in {BELOW.name}: make it faster "
                          f"(ALU {p['alu_per_output']:.1f} per output, budget {p['budget']:.1f})")
        if f >= TARGET and k in below:
            errors.append(f"{k}: predicted {f:.2f}, now at the target: remove it from {BELOW.name}")
        elif k in below and f < below[k] - SLACK:
            errors.append(f"{k}: predicted {f:.3f}, below the {below[k]:.3f} recorded in {BELOW.name}: a slower kernel")
        elif k in below and f > below[k] + SLACK:
            errors.append(f"{k}: predicted {f:.3f}, above the {below[k]:.3f} recorded in {BELOW.name}: "
                          "record the new number, so the gain cannot be lost unnoticed")
    errors += [f"{k}: listed in {BELOW.name} but not a kernel" for k in below if k not in pred]
    under = sum(1 for p in pred.values() if p["predicted_fraction"] < TARGET)
    for e in errors:
        print(f"sass_budget: {e}", file=sys.stderr)
    if not errors:
        print(f"sass_budget: {len(pred) - under}/{len(pred)} kernels predicted at {TARGET} of D2D or more; "
              f"{under} below, each listed in {BELOW.relative_to(sass_build.ROOT)}")
    return 1 if errors else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--json", action="store_true", help="the current kernels' predictions as JSON")
    mode.add_argument("--validate", action="store_true", help=f"the kernels at {VALIDATE_COMMIT} against the measured sweep")
    mode.add_argument("--check", action="store_true", help=f"fail on a kernel below {TARGET} not listed in {BELOW.name}")
    ap.add_argument("--out", choices=("bf16", "f16"), default="bf16",
                    help="the kernels' output: bf16 (default; what --check gates) or f16 (the float16 twins, reported only)")
    args = ap.parse_args()
    if args.out == "f16" and (args.check or args.validate):
        ap.error("--out f16 only reports: the gate and the validation are the BF16 kernels'")
    record = json.loads(RECORD.read_text())
    d2d = record["d2d_gb_s"] * 1e9
    if args.validate:
        # GB/s over the same run's D2D: the doc's fractions, unrounded.
        return validate(d2d, {k: v["gb_s"] * 1e9 / d2d for k, v in record["kernels"].items()})
    pred = model(sass_build.ROOT, d2d, args.out)
    if args.json:
        keep = ("alu_per_output", "budget", "predicted_fraction")
        print(json.dumps({"kernels": {k: {f: p[f] for f in keep} for k, p in pred.items()}}, indent=1))
        return 0
    if args.check:
        return check(pred)
    print(table(pred))
    return 0


if __name__ == "__main__":
    sys.exit(main())
