"""Ctrl-C during a long load from Python raises KeyboardInterrupt during
the load, not after it. (Ctrl-C in the CLI's load and convert:
tests/python/test_robustness.py and test_convert.py.)"""
from __future__ import annotations

import signal
import subprocess
import sys
import time

from harness import ROOT


def test_ctrl_c_interrupts_a_python_load(tmp_path):
    """A long weightstream.load in Python stops on Ctrl-C with
    KeyboardInterrupt, promptly (issue 14: it ran to the end of the load)."""
    src = tmp_path / "m"
    subprocess.run([sys.executable, ROOT / "tests/fixtures/sample_model.py", "--out", src, "--preset", "small", "--formats", "q4_0"],
                   check=True, capture_output=True)
    model = next(src.glob("*.gguf"))
    script = (
        "import signal, sys, time, weightstream\n"
        # Python leaves SIGINT ignored when it starts with it ignored (a
        # test command started in the background from a script: the shell
        # ignores SIGINT for it), and then no Ctrl-C reaches the load.
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        f"ck = weightstream.open({str(model)!r}, threads=1)\n"
        "names = [n for n in ck.keys() if 'ffn_down' in n] * 10\n"
        "t0 = time.time(); ck.load(names); print('whole', time.time() - t0, flush=True)\n"
        "print('started', flush=True)\n"
        "t0 = time.time()\n"
        "try:\n"
        "    ck.load(names * 40)\n"
        "    print('finished', time.time() - t0, flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', time.time() - t0, flush=True)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    whole = float(p.stdout.readline().split()[1])  # one load of `names`
    assert p.stdout.readline().strip() == "started"
    time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert out.startswith("interrupted"), (out, err[-2000:])
    took = float(out.split()[1])
    # The second load is 40x the first (about 2.3 GB of BF16, allocated
    # up front, written as it goes): stopping before a quarter of it means
    # the signal was acted on during the load, not after it. (With 4x and
    # a 2x bound this failed on a busy machine; the cause was a Ctrl-C
    # swallowed while the Python side retried `import torch` for every
    # tensor it allocated, fixed in weightstream/__init__.py.)
    assert took < 10 * whole, (took, whole)
