#!/usr/bin/env python3
"""Turn a GPU round's outputs into the tables for docs/PERFORMANCE.md, and
print a short summary table last.

    python3 bench/gpu/report.py --sweep sweep.csv --e2e e2e.json --out report.md
    python3 bench/gpu/report.py --devcheck devcheck.json --out report.md
    python3 bench/gpu/report.py --sweep sweep.csv --e2e e2e.json --out report.md \
        --record record.json --commit abc1234 --date 2026-12-01 --driver 580.82

--record writes the round's record (issue 56 item 4), committed as
bench/gpu/records/DATE-COMMIT.json beside the tables in docs/PERFORMANCE.md:
{"commit", "date", "device", "driver", "sweep": {"d2d_gbs", "size_mib",
"kernels": {NAME: {"gbs", "fraction"}}}, "e2e": {FORMAT: {"seconds",
"vs_pinned_h2d", "file_gbs"}}}: every kernel of the sweep at its largest
size, and every e2e load.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
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
        lines += ["", "Each staging row is the fastest of its loads, each in its own process (so each pins its ring); phases in ms:", "",
                  "| staging slots | slot MiB | readers | write-combined | seconds | file GB/s | ring | first byte | pipeline | drain | readers busy (median) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sorted(e["staging_sweep"], key=lambda r: -r["file_gbps"]):
            lines.append(f"| {r['slots']} | {r['slot_mib']} | {r['readers']} | {'yes' if r.get('write_combined') else 'no'} | {r['seconds']:.3f} "
                         f"| {r['file_gbps']:.1f} | {phase_cells(r.get('phases'))} |")
    if e.get("in_process"):
        lines += ["", "In-process repeated loads of Q4_0 (one process, one open; the first load pins the staging ring):", "",
                  "| readers | first load s | warm loads s (median, min..max) | warm file GB/s |", "|---|---|---|---|"]
        for r in e["in_process"]:
            w = r["warm"]
            lines.append(f"| {r['readers']} | {r['first_s']:.3f} | {w['median']:.4f} ({w['min']:.4f}..{w['max']:.4f}) | {r['warm_file_gbps']:.1f} |")
            short.append(f"in-process q4_0, {r['readers']} readers: first {r['first_s']:.3f} s, warm {w['median']:.4f} s")
    for phase, err in e.get("errors", {}).items():
        lines += ["", f"Phase {phase} incomplete: {err.strip().splitlines()[-1] if err.strip() else err}"]
        short.append(f"e2e {phase}: incomplete")
    return lines, short


def phase_cells(p: dict | None) -> str:
    """A load's phases (`weightstream load --json`'s "phases") as table
    cells in ms: ring, first byte, pipeline, drain, median reader busy."""
    if not p:
        return "- | - | - | - | -"
    busy = sorted(p.get("readers_busy") or [])
    med = f"{busy[len(busy) // 2] * 1e3:.1f}" if busy else "-"
    return " | ".join(f"{p.get(k, 0) * 1e3:.1f}" for k in ("ring", "first_byte", "pipeline", "drain")) + f" | {med}"


def sweep_device(path: Path) -> str | None:
    """The 'Device Name' of nvbench's CSV, if it has the column."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if len(rows) < 2 or "Device Name" not in rows[0]:
        return None
    i = rows[0].index("Device Name")
    return rows[1][i] if i < len(rows[1]) else None


def record(sweep: Path | None, e2e: Path | None, commit: str, date: str, driver: str | None) -> dict:
    """The round's record (the schema in this module's docstring)."""
    out = {"commit": commit, "date": date, "device": None, "driver": driver}
    if sweep and sweep.exists():
        by = read_sweep(sweep)
        size = max(s for k, s in by if k == "d2d_copy")
        d2d = by[("d2d_copy", size)]
        out["device"] = sweep_device(sweep)
        out["sweep"] = {"d2d_gbs": round(d2d, 1), "size_mib": size,
                        "kernels": {k: {"gbs": round(by[(k, s)], 1), "fraction": round(by[(k, s)] / d2d, 3)}
                                    for k, s in by if s == size and k != "d2d_copy" and not math.isnan(by[(k, s)])}}
    if e2e and e2e.exists():
        e = json.loads(e2e.read_text())
        base = e.get("baselines", {})
        out["device"] = out["device"] or base.get("gpu")
        rows = {}
        for key, r in e.get("weightstream", {}).items():
            h2d = base.get("pinned_h2d", {}).get(r.get("format", key), {}).get("gbps")
            rows[key] = {"seconds": r["seconds"]["median"], "file_gbs": round(r["file_gbps"], 2),
                         "vs_pinned_h2d": round(r["file_gbps"] / h2d, 3) if h2d else None}
        out["e2e"] = rows
    return out


def devcheck_tables(path: Path) -> tuple[list[str], list[str]]:
    """bench/gpu/devcheck.cu's JSON as tables, and summary lines."""
    d = json.loads(path.read_text())
    lines, short = [f"{d.get('device')}, driver {d.get('driver')}", ""], []
    if "convert" in d:
        lines += ["| hardware conversion vs the kernels' rounding | " + " | ".join(CLASSES) + " |", "|---|" + "---|" * len(CLASSES)]
        for out, instr in (("bf16", "cvt.rn.bf16x2.f32"), ("f16", "cvt.rn.f16x2.f32")):
            c = d["convert"][out]
            lines.append(f"| {instr} | " + " | ".join(f"{c[k]['differ']} of {c[k]['compared']}" + (f" (first {c[k]['first']})" if c[k]["differ"] else "")
                                                    for k in CLASSES) + " |")
            same = [k for k in CLASSES if c[k]["compared"] and not c[k]["differ"]]
            short.append(f"{instr}: equal to the kernels' rounding on {', '.join(same) or 'no class'} inputs")
        lines += ["", f"(all 2^32 inputs in {d['convert']['seconds']:.1f} s; NaN: equal when both are NaN)", ""]
    if "ceiling" in d:
        c = d["ceiling"]
        lines += [f"Memory-bound ceiling at {c['out_mib']} MiB of output, D2D copy {c['d2d_gbs']:.0f} GB/s:", "",
                  "| bytes read per output | GB/s (read+written) | fraction of D2D |", "|---|---|---|"]
        for m in c["mixes"]:
            lines.append(f"| {m['read_per_output']:.4f} | {m['gbs']:.0f} | {m['fraction']:.3f} |")
            short.append(f"ceiling at {m['read_per_output']:.3f} B read per output: {m['fraction']:.2f} of D2D")
        lines.append("")
    if "pinning" in d:
        p = d["pinning"]
        lines += ["| pinning | MiB | seconds |", "|---|---|---|"]
        for r in p.get("host_alloc", []):
            lines.append(f"| cudaHostAlloc | {r['mib']} | {r['alloc_s']:.4f} (free {r['free_s']:.4f}) |")
        for r in p.get("register", []):
            lines.append(f"| malloc + 8-thread touch + cudaHostRegister | {r['mib']} | {r['malloc_s']:.4f} + {r['touch_8_threads_s']:.4f} + "
                         f"{r['register_s']:.4f} (unregister {r['unregister_s']:.4f}) |")
        lines.append("")
        lines.append(f"read-only registration supported: {bool(p.get('read_only_register_supported'))}"
                     + (f"; mmap'd file {p['file_mib']} MiB: pinned H2D {p['pinned_h2d_gbs']:.1f} GB/s" if "file_mib" in p else "")
                     + (f", registered mmap H2D {p['mmap_h2d_gbs']:.1f} GB/s (register {p['mmap_register_read_only_s']:.4f} s)"
                        if "mmap_h2d_gbs" in p else "")
                     + (f", registration refused: {p['mmap_register_read_only_error']}" if "mmap_register_read_only_error" in p else ""))
        if p.get("pread_pinned"):
            lines += ["", "| pread into pinned memory, threads | GB/s |", "|---|---|"]
            lines += [f"| {r['threads']} | {r['gbs']:.2f} |" for r in p["pread_pinned"]]
        lines.append("")
    return lines, short


CLASSES = ("zero", "subnormal", "normal", "infinity", "nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", type=Path)
    ap.add_argument("--e2e", type=Path)
    ap.add_argument("--storage", type=Path, help="bench/io/storage.py --out JSON")
    ap.add_argument("--devcheck", type=Path, help="bench/gpu/devcheck.cu's JSON")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--record", type=Path, help="write the round's record JSON here (needs --commit and --date)")
    ap.add_argument("--commit", help="the commit the round ran (for --record)")
    ap.add_argument("--date", help="the round's date, YYYY-MM-DD (for --record)")
    ap.add_argument("--driver", help="the driver version nvidia-smi reported (for --record)")
    args = ap.parse_args()
    if args.record and not (args.commit and args.date):
        ap.error("--record needs --commit and --date")
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
    if args.devcheck and args.devcheck.exists():
        lines, short = devcheck_tables(args.devcheck)
        md += ["### Device check (bench/gpu/devcheck.cu)", ""] + lines
        summary += short
    if args.record:
        args.record.write_text(json.dumps(record(args.sweep, args.e2e, args.commit, args.date, args.driver), indent=1) + "\n")
        summary.append(f"record: {args.record} (commit it as bench/gpu/records/{args.date}-{args.commit}.json)")
    args.out.write_text("\n".join(md) + "\n")
    print("\n".join(md))
    print("== summary")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
