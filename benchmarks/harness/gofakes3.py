"""gofakes3, a fast S3 stand-in in Go, as a child process on 127.0.0.1 for the benchmarks (`--s3 gofakes3`).

moto's S3 walks the whole bucket on every LIST, so its own cost grows with a table's history and hides
ours; gofakes3's memory backend keeps keys sorted and starts a LIST at `start-after` (measured with boto3:
2.0 / 2.3 / 2.8 ms at 1k / 20k / 50k keys, moto 20.8 / 86.1 / 204 ms). It honours `If-None-Match: *`
(412 on an existing key), which delta-rs 1.6 commits with. Its limits: it sends no S3 -> SQS
notifications (a benchmark sends them itself), checks no signatures, and its LIST scans on past the
prefix to the end of the bucket, so a benchmark keeps one bucket per table.

The binary is built with `go install` (the Go toolchain on PATH, the module proxy reachable) on first use
into `.tools/gofakes3/<version>/` at the repository root (git-ignored). The benchmarks only: CI and the
tests never need it.

    with GoFakeS3() as s3_server:
        client = boto3.client("s3", endpoint_url=s3_server.url, region_name="us-east-1")
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness.endpoints import free_port
from benchmarks.harness.server import ServerProcess, probe_client
from s3events.errors import FatalError

VERSION = "v1.2.0"
MODULE = "github.com/johannesboyne/gofakes3/cmd/gofakes3"
CACHE = Path(__file__).resolve().parents[2] / ".tools" / "gofakes3"
# The environment of a process that writes through pyarrow's S3 filesystem to gofakes3: the AWS SDK for
# C++ sends UploadPart as aws-chunked with a trailing checksum and no Content-Length unless checksums are
# only computed where an operation requires them, and gofakes3 answers 411 MissingContentLength.
CLIENT_ENV = {"AWS_REQUEST_CHECKSUM_CALCULATION": "when_required"}


def binary(cache: Path = CACHE) -> Path:
    """The gofakes3 executable, built with `go install` into `cache/<version>/` the first time. The build
    lands in a temporary directory beside it and is renamed into place whole, so an interrupted build
    leaves nothing that looks complete."""
    target = cache / VERSION / "gofakes3"
    if target.exists():
        return target
    go = shutil.which("go")
    if not go:
        raise FatalError("go was not found on PATH; --s3 gofakes3 builds gofakes3 with the Go toolchain")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".build-") as tmp:
        work = Path(tmp)
        env = {
            **os.environ,
            "GOBIN": str(work / "bin"),
            "GOPATH": str(work / "gopath"),  # the module cache stays inside the build, removed after
            "GOFLAGS": "-modcacherw",
            "CGO_ENABLED": "0",
        }
        env.setdefault("GOCACHE", str(work / "cache"))
        done = subprocess.run(
            [go, "install", f"{MODULE}@{VERSION}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        built = work / "bin" / "gofakes3"
        if done.returncode != 0 or not built.exists():
            raise FatalError(
                f"go install {MODULE}@{VERSION} failed (exit {done.returncode}):\n{done.stderr[-2000:]}"
            )
        (cache / VERSION).mkdir(exist_ok=True)
        built.rename(target)
    return target


@dataclass
class GoFakeS3(ServerProcess):
    """A running gofakes3 (memory backend). Use as a context manager, or call start()/stop()."""

    name = "gofakes3"
    stop_timeout = 10.0

    def start(self, *, timeout: float = 60.0) -> GoFakeS3:
        """Start the server and wait until it answers an S3 call (ListBuckets)."""
        program = binary()
        self.port = self.port or free_port()
        command = [str(program), "-backend", "memory", "-host", f"127.0.0.1:{self.port}"]
        # it logs a line or two per LIST and PUT: only when a log is kept
        command += [] if self.log_path else ["-quiet"]
        probe = probe_client("s3", self.url)
        self._launch(command, probe.list_buckets, "ListBuckets", timeout=timeout, every=0.1)
        return self
