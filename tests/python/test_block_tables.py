"""The lookup tables of the IQ, FP4 and ternary formats, in Rust and CUDA,
are what scripts/gen_block_tables.py makes from the pinned gguf-py: neither
can drift from the reference or from the other."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_tables_are_current():
    r = subprocess.run([sys.executable, ROOT / "scripts/gen_block_tables.py", "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_check_fails_on_a_changed_table(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "scripts"))
    import gen_block_tables as g

    rust = tmp_path / "t.rs"
    from importlib.metadata import version

    rust.write_text(g.rust(version("gguf")).replace("0x2b", "0x2c", 1))  # one grid value changed
    monkeypatch.setattr(g, "RUST", rust)
    monkeypatch.setattr(g, "CUDA", ROOT / "kernels/cuda/block_tables.cuh")
    monkeypatch.setattr(sys, "argv", ["gen_block_tables.py", "--check"])
    assert g.main() == 1
