"""A two-node Ray cluster on one machine for the Ray executor's tests: a
head raylet on this machine's address and a second raylet on 127.0.0.2,
each with one fake GPU (the Ray resource the test-only platform in
ray_platform/ asks for), so that vLLM's placement group of two workers
puts one on each node. Each node is started with its own environment:
the tests give each node its own S3 endpoint (a counting proxy), as each
machine of a real cluster reads the store over its own link.

    with RayCluster(tmp, {"head": env0, "second": env1}) as ray:
        ray.address        # for RAY_ADDRESS
        ray.worker_logs()  # every Ray worker's stdout, both nodes

Each node is a `ray start --block` process in a session of its own; on
exit its process group is killed (raylets, GCS, agents; the workers exit
when their raylet does). `ray stop` would stop every Ray on the machine.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The test-only CPU platform with a Ray device key (ray_platform/).
PLATFORM = HERE / "ray_platform"
_RAY = [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; sys.argv[0] = 'ray'; main()"]
SECOND_IP = "127.0.0.2"

sys.path.insert(0, str(HERE.parents[2] / "tests" / "s3"))
from localserver import free_ports  # noqa: E402




class RayCluster:
    def __init__(self, work: Path, envs: dict[str, dict]):
        """`work`: the nodes' Ray temp dirs go under it, one each, as on two
        machines (short: Ray's socket paths must fit 107 bytes). `envs`:
        {"head": env, "second": env}, each node's environment (its workers
        inherit it)."""
        self.work, self.envs = Path(work), envs
        self.procs: list[subprocess.Popen] = []
        self.address: str | None = None

    def _start(self, node: str, args: list[str]) -> str:
        env = dict(self.envs[node])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PLATFORM), env.get("PYTHONPATH", "")) if p)
        # Every port this node listens on chosen free (the defaults are
        # fixed: two nodes on one machine, or two test runs, would clash).
        ports = free_ports(4)
        cmd = _RAY + ["start", "--block", "--num-cpus=2", "--num-gpus=1", "--object-store-memory=100000000",
                      f"--temp-dir={self.work / node}", "--disable-usage-stats",
                      f"--dashboard-agent-listen-port={ports[0]}", f"--dashboard-agent-grpc-port={ports[1]}",
                      f"--metrics-export-port={ports[2]}", f"--runtime-env-agent-port={ports[3]}"] + args
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
        self.procs.append(p)
        out = []
        for line in p.stdout:  # `ray start` says so once the node is up
            out.append(line)
            if "Ray runtime started" in line:
                break
        else:
            raise RuntimeError(f"ray start ({node}) exited {p.wait()}:\n{''.join(out)[-3000:]}")
        # Drained from now on, so that the node never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()
        return "".join(out)

    def __enter__(self) -> "RayCluster":
        try:
            port, client, dashboard = free_ports(3)
            out = self._start("head", ["--head", f"--port={port}", "--include-dashboard=false",
                                       f"--ray-client-server-port={client}", f"--dashboard-port={dashboard}"])
            m = re.search(r"Local node IP: (\S+)", out)
            assert m, out[-3000:]
            self.address = f"{m.group(1)}:{port}"
            self._start("second", [f"--address={self.address}", f"--node-ip-address={SECOND_IP}"])
        except BaseException:
            self.close()
            raise
        return self

    def worker_logs(self) -> list[str]:
        """Each Ray worker's stdout (vLLM's log), both nodes: the files the
        workers write themselves, complete once a load returned (the
        driver's forwarded copy comes later, and deduplicated)."""
        logs = sorted(self.work.glob("*/session_latest/logs/worker-*.out"))
        return [p.read_text(errors="replace") for p in logs]

    def close(self) -> None:
        for p in reversed(self.procs):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        self.procs.clear()

    def __exit__(self, *exc) -> None:
        self.close()
