"""bench/gpu/report.py reads the kernel sweep in nvbench's own CSV format.

The sample below follows nvbench's csv_printer.cu (NVIDIA/nvbench, tag
python-0.3.0, the cuda-bench release the round installs) and the summaries
nvbench/detail/measure_cold.cu and measure_hot.cu add: a header row, then
one unquoted row per state; 'Benchmark', 'Device', 'Device Name', the axis
columns ('kernel' for a string axis, 'out_MiB' for an int64 axis that is not
power-of-two), 'Skipped', then each visible summary as header + a unit for
its hint ('(sec)' for durations, '(elem/sec)', '(bytes/sec)' for byte
rates) and its value as fmt's shortest "{}" of the raw float64: seconds,
elements/s, bytes/s, fractions for percentages. Two columns are called
'Noise' (CPU and GPU) and two 'Samples' (cold and batch). A skipped state
has 'Yes' under 'Skipped' and empty cells after it.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "gpu"))

import report  # noqa: E402

HEADER = ("Benchmark,Device,Device Name,kernel,out_MiB,Skipped,Samples,CPU Time (sec),Noise,GPU Time (sec),Noise,"
          "Elem/s (elem/sec),GlobalMem BW (bytes/sec),BWUtil,Samples,Batch GPU (sec)")
# GB/s: d2d copy 2000 at 1 MiB, 2800 at 256 MiB; q4_0 1500 and 2660 (0.95
# of the copy); q8_0 2240 at 256 MiB (0.80); f16 at 1 MiB skipped.
SAMPLE = f"""{HEADER}
dequant,0,NVIDIA H100 80GB HBM3,d2d_copy,1,No,1234,1.0486e-05,0.0312,1.048576e-06,0.0051,500000000000,2000000000000,0.5965,20000,1.04e-06
dequant,0,NVIDIA H100 80GB HBM3,q4_0,1,No,980,9.1e-06,0.041,8.564e-07,0.0081,612257060000,1.5e+12,0.4474,18000,8.5e-07
dequant,0,NVIDIA H100 80GB HBM3,f16,1,Yes,,,,,,,,,,
dequant,0,NVIDIA H100 80GB HBM3,d2d_copy,256,No,57,0.0001932,0.0042,0.00019173,0.0008,700000000000,2800000000000.5,0.8352,3000,0.0001917
dequant,0,NVIDIA H100 80GB HBM3,q4_0,256,No,54,0.0001221,0.0037,0.000120868,0.0009,1110578000000,2660000000000,0.7935,3100,0.0001207
dequant,0,NVIDIA H100 80GB HBM3,q8_0,256,No,50,0.0001651,0.0031,0.0001641,0.0007,817000000000,2.24e+12,0.6682,2900,0.000164
"""


def test_parse_bw_reads_raw_bytes_per_second_and_text():
    assert report.parse_bw("2845000000000") == pytest.approx(2845.0)
    assert report.parse_bw("2.845e+12") == pytest.approx(2845.0)
    assert report.parse_bw("2.845 TB/s") == pytest.approx(2845.0)
    assert report.parse_bw("812.500 GB/s") == pytest.approx(812.5)
    assert report.parse_bw("1.250 PB/s") == pytest.approx(1.25e6)
    assert report.parse_bw("950.000 MB/s") == pytest.approx(0.95)
    assert math.isnan(report.parse_bw(""))
    assert math.isnan(report.parse_bw("fast"))


def test_sweep_csv_in_nvbench_format(tmp_path):
    p = tmp_path / "sweep.csv"
    p.write_text(SAMPLE)
    by = report.read_sweep(p)
    assert abs(by[("d2d_copy", 256)] - 2800.0) < 1e-6
    assert by[("q4_0", 1)] == 1500.0
    assert by[("q8_0", 256)] == 2240.0
    assert math.isnan(by[("f16", 1)])
    lines, summary = report.sweep_table(p)
    assert lines[2] == "| d2d copy (GB/s) | 2000 | 2800 |"
    assert "| q4_0 | 1500 (0.75) | 2660 (0.95) |" in lines
    assert round(summary["q4_0"], 3) == 0.95
    assert round(summary["q8_0"], 3) == 0.8


def test_sweep_markdown_style_text_cells_still_read(tmp_path):
    p = tmp_path / "sweep.csv"
    p.write_text("kernel,out_MiB,GlobalMem BW\nd2d_copy,256,2.800 TB/s\nq4_0,256,2.660 TB/s\n")
    _, summary = report.sweep_table(p)
    assert round(summary["q4_0"], 3) == 0.95


def test_report_cli_summarises_the_sweep(tmp_path):
    p = tmp_path / "sweep.csv"
    p.write_text(SAMPLE)
    r = subprocess.run([sys.executable, ROOT / "bench/gpu/report.py", "--sweep", p, "--out", tmp_path / "report.md"],
                       capture_output=True, text=True, check=True)
    assert "q4_0: >= 0.95 of D2D copy at >= 256 MiB" in r.stdout
    md = (tmp_path / "report.md").read_text()
    assert "| d2d copy (GB/s) | 2000 | 2800 |" in md
    assert "| q8_0 | nan (nan) | 2240 (0.80) |" in md


def e2e_sample() -> dict:
    """bench/gpu/e2e.py's JSON, as it writes it."""
    s = {"median": 1.0, "min": 1.0, "max": 1.0, "runs": [1.0]}
    e = {"preset": "7b", "device": "cuda", "date": "2026-01-01 00:00:00", "dir_fs": "ext4",
         "weightstream": {
             "q4_0": {"format": "q4_0", "source": "auto", "file_bytes": 40e9, "bf16_bytes": 13.5e9, "seconds": dict(s, median=2.0),
                      "file_gbps": 20.0, "bf16_gbps": 6.75, "detail": {}},
             "q4_0 (read)": {"format": "q4_0", "source": "read", "file_bytes": 40e9, "bf16_bytes": 13.5e9, "seconds": dict(s, median=4.0),
                             "file_gbps": 10.0, "bf16_gbps": 3.4, "detail": {}}},
         "baselines": {"gpu": "NVIDIA H100", "torch": "2.9",
                       "pinned_h2d": {"q4_0": {"bytes": 40e9, "seconds": s, "gbps": 25.0}},
                       "safetensors_bf16": {"bytes": 13.5e9, "seconds": dict(s, median=6.0), "gbps": 2.25},
                       "gguf_py_q4_0": {"bytes": 1e9, "seconds": s, "gbps": 1.0, "tensors": 10, "of_tensors": 291, "complete": False}},
         "in_process": [{"readers": 8, "first_s": 0.5, "warm": dict(s, median=0.03, min=0.029, max=0.031), "file_bytes": 3e9,
                         "warm_file_gbps": 100.0}],
         "errors": {"staging_sweep": "stopped: --budget 300 s spent before loading 7b-llama-q4_0.gguf"}}
    return e


def test_e2e_tables_per_format_and_source(tmp_path):
    """bench/gpu/e2e.py's JSON: entries keyed by format, or 'format (source)',
    each compared with the pinned H2D copy of its format's bytes; the
    speedup over safetensors from the q4_0 entry; a partial gguf-py run and
    a phase stopped early are said so."""
    p = tmp_path / "e2e.json"
    p.write_text(json.dumps(e2e_sample()))
    lines, short = report.e2e_tables(p)
    text = "\n".join(lines)
    assert "| weightstream q4_0 | 40.00 GB | 2.000 (1.000..1.000) | 20.0 | 6.8 | 0.80 |" in text
    assert "| weightstream q4_0 (read) |" in text and "| 10.0 | 3.4 | 0.40 |" in text
    assert "3.00x faster" in text
    assert "(10 of 291 tensors)" in text
    assert "Phase staging_sweep incomplete: stopped: --budget 300 s" in text
    assert "| 8 | 0.500 | 0.0300 (0.0290..0.0310) | 100.0 |" in text
    assert "in-process q4_0, 8 readers: first 0.500 s, warm 0.0300 s" in short
    assert "e2e staging_sweep: incomplete" in short


def test_the_record_holds_every_kernel_and_load_in_the_issue_schema(tmp_path):
    """Issue 56 item 4: bench/gpu/records/DATE-COMMIT.json."""
    (tmp_path / "sweep.csv").write_text(SAMPLE)
    (tmp_path / "e2e.json").write_text(json.dumps(e2e_sample()))
    r = subprocess.run([sys.executable, ROOT / "bench/gpu/report.py", "--sweep", tmp_path / "sweep.csv", "--e2e", tmp_path / "e2e.json",
                        "--out", tmp_path / "report.md", "--record", tmp_path / "record.json", "--commit", "abc1234",
                        "--date", "2026-12-01", "--driver", "580.82"], capture_output=True, text=True, check=True)
    assert "bench/gpu/records/2026-12-01-abc1234.json" in r.stdout
    rec = json.loads((tmp_path / "record.json").read_text())
    assert rec == {
        "commit": "abc1234", "date": "2026-12-01", "device": "NVIDIA H100 80GB HBM3", "driver": "580.82",
        "sweep": {"d2d_gbs": 2800.0, "size_mib": 256,
                  "kernels": {"q4_0": {"gbs": 2660.0, "fraction": 0.95}, "q8_0": {"gbs": 2240.0, "fraction": 0.8}}},
        "e2e": {"q4_0": {"seconds": 2.0, "file_gbs": 20.0, "vs_pinned_h2d": 0.8},
                "q4_0 (read)": {"seconds": 4.0, "file_gbs": 10.0, "vs_pinned_h2d": 0.4}}}
    r = subprocess.run([sys.executable, ROOT / "bench/gpu/report.py", "--sweep", tmp_path / "sweep.csv", "--out", tmp_path / "r.md",
                        "--record", tmp_path / "x.json"], capture_output=True, text=True)
    assert r.returncode == 2 and "--record needs --commit and --date" in r.stderr


DEVCHECK = {
    "device": "NVIDIA H200", "driver": 13000,
    "convert": {"bf16": {"zero": {"compared": 2, "differ": 0, "first": "0x00000000"},
                         "subnormal": {"compared": 16777214, "differ": 0, "first": "0x00000000"},
                         "normal": {"compared": 4261412864, "differ": 0, "first": "0x00000000"},
                         "infinity": {"compared": 2, "differ": 0, "first": "0x00000000"},
                         "nan": {"compared": 16777214, "differ": 0, "first": "0x00000000"}},
                "f16": {"zero": {"compared": 2, "differ": 0, "first": "0x00000000"},
                        "subnormal": {"compared": 16777214, "differ": 0, "first": "0x00000000"},
                        "normal": {"compared": 4261412864, "differ": 3, "first": "0x477ff000"},
                        "infinity": {"compared": 2, "differ": 0, "first": "0x00000000"},
                        "nan": {"compared": 16777214, "differ": 0, "first": "0x00000000"}},
                "seconds": 0.8},
    "ceiling": {"out_mib": 256, "d2d_gbs": 4161.0, "mixes": [{"read_per_output": 0.5625, "gbs": 3900.0, "fraction": 0.937}]},
    "pinning": {"host_alloc": [{"mib": 32, "alloc_s": 0.015, "free_s": 0.004}],
                "register": [{"mib": 32, "malloc_s": 0.0001, "touch_8_threads_s": 0.003, "register_s": 0.01, "unregister_s": 0.002}],
                "read_only_register_supported": 1, "file_mib": 1024, "pinned_h2d_gbs": 55.1,
                "mmap_register_read_only_s": 0.2, "mmap_h2d_gbs": 52.0, "mmap_unregister_s": 0.05,
                "pread_pinned": [{"threads": 1, "gbs": 5.9}, {"threads": 8, "gbs": 30.2}]},
}


def test_devcheck_tables(tmp_path):
    """bench/gpu/devcheck.cu's JSON (the keys it prints) as tables: a
    class of inputs the hardware conversion gets wrong even once is not
    one the kernels may use it for."""
    p = tmp_path / "devcheck.json"
    p.write_text(json.dumps(DEVCHECK))
    lines, short = report.devcheck_tables(p)
    text = "\n".join(lines)
    assert "| cvt.rn.f16x2.f32 | 0 of 2 | 0 of 16777214 | 3 of 4261412864 (first 0x477ff000) | 0 of 2 | 0 of 16777214 |" in text
    assert "cvt.rn.bf16x2.f32: equal to the kernels' rounding on zero, subnormal, normal, infinity, nan inputs" in short
    assert "cvt.rn.f16x2.f32: equal to the kernels' rounding on zero, subnormal, infinity, nan inputs" in short
    assert "| 0.5625 | 3900 | 0.937 |" in text
    assert "registered mmap H2D 52.0 GB/s" in text and "| 8 | 30.20 |" in text
    # Every class's count adds up to all 2^32 inputs.
    assert sum(c["compared"] for c in DEVCHECK["convert"]["bf16"].values()) == 1 << 32


def test_staging_rows_show_write_combined_and_phases(tmp_path):
    """The staging sweep's rows: the write-combined column and each row's
    phases in ms (ring, first byte, pipeline, drain, median reader busy),
    a row from before the phases existed shown with dashes."""
    e = e2e_sample()
    del e["errors"]
    phases = {"alloc": 0.001, "ring": 0.012, "first_byte": 0.0005, "pipeline": 0.03, "drain": 0.002,
              "readers_busy": [0.02, 0.01, 0.03]}
    e["staging_sweep"] = [
        {"slots": 8, "slot_mib": 4, "readers": 8, "write_combined": True, "seconds": 0.05, "file_gbps": 60.0, "phases": phases},
        {"slots": 4, "slot_mib": 4, "readers": 2, "seconds": 0.1, "file_gbps": 30.0}]
    p = tmp_path / "e2e.json"
    p.write_text(json.dumps(e))
    text = "\n".join(report.e2e_tables(p)[0])
    assert "| 8 | 4 | 8 | yes | 0.050 | 60.0 | 12.0 | 0.5 | 30.0 | 2.0 | 20.0 |" in text
    assert "| 4 | 4 | 2 | no | 0.100 | 30.0 | - | - | - | - | - |" in text
