#!/usr/bin/env python3
"""Turn a GPU round's outputs into the tables for docs/PERFORMANCE.md, and
print a short summary table last.

    python3 bench/gpu/report.py --sweep sweep.csv --e2e e2e.json --out report.md
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "io"))
import storage  # noqa: E402  (bench/io/storage.py)


def parse_bw(s: str) -> float:
    """A 'GlobalMem BW' cell in GB/s: nvbench's CSV holds the raw rate in
    bytes/s ('2845123456789.5', column 'GlobalMem BW (bytes/sec)'); its
    markdown holds text ('2.845 TB/s', decimal units). Either is read."""
    s = (s or "").strip()
    m = re.fullmatch(r"([\d.]+(?:[eE][-+]?\d+)?)\s*([KMGTP]?)B/s", s)
    if m:
        return float(m.group(1)) * {"": 1e-9, "K": 1e-6, "M": 1e-3, "G": 1.0, "T": 1e3, "P": 1e6}[m.group(2)]
    try:
        return float(s) / 1e9
    except ValueError:
        return float("nan")


def read_sweep(path: Path) -> dict:
    """{(kernel, out_MiB): GB/s} from nvbench's --csv output (nvbench/csv_printer.cu:
    one header row, then one unquoted row per state; axis columns named after
    the axes ('kernel', 'out_MiB'; a power-of-two axis adds 'out_MiB (pow2)'),
    then 'Skipped' and the visible summaries, 'GlobalMem BW (bytes/sec)' among
    them). Headers repeat ('Noise', 'Samples'), so columns are found by
    position, not read into a dict. Skipped states (no BW cell) are NaN."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return {}
    header = [h.strip() for h in rows[0]]
    bw = next((i for i, h in enumerate(header) if h.startswith("GlobalMem BW")), None)
    kernel, size = header.index("kernel"), header.index("out_MiB")
    by = {}
    for r in rows[1:]:
        if len(r) <= max(kernel, size):
            continue
        by[(r[kernel], int(r[size]))] = parse_bw(r[bw]) if bw is not None and bw < len(r) else float("nan")
    return by


def sweep_table(path: Path) -> tuple[list[str], dict]:
    by = read_sweep(path)
    sizes = sorted({s for _, s in by})
    kernels = [k for k in dict.fromkeys(k for k, _ in by) if k != "d2d_copy"]
    lines = ["| kernel | " + " | ".join(f"{s} MiB" for s in sizes) + " |", "|---|" + "---|" * len(sizes)]
    lines.append("| d2d copy (GB/s) | " + " | ".join(f"{by.get(('d2d_copy', s), float('nan')):.0f}" for s in sizes) + " |")
    summary = {}
    for k in kernels:
        cells = []
        for s in sizes:
            bw, copy = by.get((k, s), float("nan")), by.get(("d2d_copy", s), float("nan"))
            cells.append(f"{bw:.0f} ({bw / copy:.2f})")
            if s >= 256:
                summary.setdefault(k, []).append(bw / copy)
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return lines, {k: min(v) for k, v in summary.items()}


def e2e_tables(path: Path) -> tuple[list[str], list[str]]:
    e = json.loads(path.read_text())
    ws, base = e.get("weightstream", {}), e.get("baselines", {})
    lines = [f"Preset {e['preset']}, {e['device']}, {e['date']}" + (f", {base['gpu']}, torch {base['torch']}" if base else "")
             + (f", checkpoints on {e['dir_fs']}" if e.get("dir_fs") else ""), ""]
    lines += ["| load | file bytes | seconds (median, min..max) | file GB/s | BF16 GB/s | vs pinned H2D of same bytes |", "|---|---|---|---|---|---|"]
    short = []
    for key, r in ws.items():
        s = r["seconds"]
        h2d = base.get("pinned_h2d", {}).get(r.get("format", key), {}).get("gbps")
        frac = f"{r['file_gbps'] / h2d:.2f}" if h2d else "-"
        lines.append(f"| weightstream {key} | {r['file_bytes'] / 1e9:.2f} GB | {s['median']:.3f} ({s['min']:.3f}..{s['max']:.3f}) | {r['file_gbps']:.1f} | {r['bf16_gbps']:.1f} | {frac} |")
        short.append(f"{key}: {r['file_gbps']:.1f} GB/s file ({frac} of H2D)")
    for fmt, r in base.get("pinned_h2d", {}).items():
        lines.append(f"| pinned H2D copy, {fmt} bytes | {r['bytes'] / 1e9:.2f} GB | {r['seconds']['median']:.3f} | {r['gbps']:.1f} | - | 1.00 |")
    st = base.get("safetensors_bf16")
    if st:
        lines.append(f"| safetensors.torch.load_file BF16 | {st['bytes'] / 1e9:.2f} GB | {st['seconds']['median']:.3f} | {st['gbps']:.1f} | {st['gbps']:.1f} | - |")
    g = base.get("gguf_py_q4_0")
    if g:
        part = "" if g.get("complete", True) else f" ({g['tensors']} of {g['of_tensors']} tensors)"
        lines.append(f"| gguf-py dequantize + .to(cuda), Q4_0{part} | {g['bytes'] / 1e9:.2f} GB | {g['seconds']['median']:.1f} | {g['gbps']:.2f} | - | - |")
    if st and "q4_0" in ws:
        speedup = st["seconds"]["median"] / ws["q4_0"]["seconds"]["median"]
        lines += ["", f"Q4_0 to BF16 on the GPU vs loading the BF16 checkpoint with safetensors: {speedup:.2f}x faster (target 2.8x)."]
        short.append(f"Q4_0 vs safetensors BF16: {speedup:.2f}x")
    if e.get("staging_sweep"):
        lines += ["", "| staging slots | slot MiB | readers | seconds | file GB/s |", "|---|---|---|---|---|"]
        for r in sorted(e["staging_sweep"], key=lambda r: -r["file_gbps"]):
            lines.append(f"| {r['slots']} | {r['slot_mib']} | {r['readers']} | {r['seconds']:.3f} | {r['file_gbps']:.1f} |")
    for phase, err in e.get("errors", {}).items():
        lines += ["", f"Phase {phase} incomplete: {err.strip().splitlines()[-1] if err.strip() else err}"]
        short.append(f"e2e {phase}: incomplete")
    return lines, short


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", type=Path)
    ap.add_argument("--e2e", type=Path)
    ap.add_argument("--storage", type=Path, help="bench/io/storage.py --out JSON")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    md, summary = [], []
    if args.sweep and args.sweep.exists():
        lines, fr = sweep_table(args.sweep)
        md += ["### Kernel sweep (GB/s read+written; fraction of the same run's D2D copy)", ""] + lines + [""]
        summary += [f"{k}: >= {v:.2f} of D2D copy at >= 256 MiB" for k, v in fr.items()]
    if args.e2e and args.e2e.exists():
        lines, short = e2e_tables(args.e2e)
        md += ["### End to end, warm page cache", ""] + lines + [""]
        summary += short
    if args.storage and args.storage.exists():
        results = json.loads(args.storage.read_text())
        md += ["### Storage: cold and warm page cache, each source against dd iflag=direct", ""] + storage.render(results) + [""]
        for r in results:
            for e, v in r["entries"].items():
                if e.startswith("cold:") and v["ratio"]:
                    summary.append(f"{Path(r['model']).name} {e} ({v['source_used']}): {v['ratio']['median']:.2f} of dd")
    args.out.write_text("\n".join(md) + "\n")
    print("\n".join(md))
    print("== summary")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
