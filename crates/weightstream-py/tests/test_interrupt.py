"""Ctrl-C during a long load from Python raises KeyboardInterrupt during
the load, not after it. (Ctrl-C in the CLI's load and convert:
tests/python/test_robustness.py and test_convert.py.)"""
from __future__ import annotations

import signal
import subprocess
import sys

from harness import ROOT


def test_ctrl_c_interrupts_a_python_load(tmp_path):
    """A long weightstream load in Python stops on Ctrl-C with
    KeyboardInterrupt, during the load, not after it (issue 14: it ran to
    the end of the load). Deterministic, whatever the machine's load: the
    load's first finished tensor reports to the test and then waits, inside
    the load, until the child's SIGINT handler has run; the load cannot
    finish before Ctrl-C arrives, and if Ctrl-C were missed the load would
    wait forever (the test's timeout)."""
    src = tmp_path / "m"
    subprocess.run([sys.executable, ROOT / "tests/fixtures/sample_model.py", "--out", src, "--preset", "tiny", "--formats", "q4_0"],
                   check=True, capture_output=True)
    model = next(src.glob("*.gguf"))
    script = (
        "import signal, sys, threading, time, weightstream\n"
        "got = threading.Event()\n"
        # The default handler's KeyboardInterrupt, noting that it ran.
        # (Python leaves SIGINT ignored when it starts with it ignored: a
        # test command started in the background from a script.)
        "def on_sigint(signum, frame):\n"
        "    got.set()\n"
        "    raise KeyboardInterrupt\n"
        "signal.signal(signal.SIGINT, on_sigint)\n"
        f"ck = weightstream.open({str(model)!r}, threads=1)\n"
        "idx = list(range(len(ck.keys()))) * 20\n"
        "outs = [weightstream._empty(ck.shape(ck.keys()[i]), 'cpu', 0) for i in idx]\n"
        "done = []\n"
        "def finished(i):\n"
        "    done.append(i)\n"
        "    if len(done) == 1:\n"
        "        print('started', flush=True)\n"
        "        got.wait()\n"
        "try:\n"
        "    ck._run(idx, outs, 'cpu', 0, 0, finished)\n"
        "    print('finished', len(done), len(idx), flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', len(done), len(idx), flush=True)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "started", p.stderr.read()[-2000:]
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    word, done, total = out.split()
    assert word == "interrupted" and int(done) < int(total), (out, err[-2000:])


def test_a_panicking_load_thread_raises_and_never_hangs():
    """A worker that panics ends the call with a WeightstreamError (issue 27:
    once it left Python waiting forever, deaf to Ctrl-C). Run in a child so
    that a hang is the timeout, not a stuck test run."""
    script = (
        "import weightstream\n"
        "from weightstream import _native\n"
        "try:\n"
        "    _native._panic_in_a_load_thread()\n"
        "except weightstream.WeightstreamError as e:\n"
        "    print('raised', e.kind, flush=True)\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "raised internal", (r.stdout, r.stderr[-2000:])
