"""gofakes3, a fast S3 stand-in in Go, as a child process on 127.0.0.1 for the benchmarks (`--s3 gofakes3`).

moto's S3 walks the whole bucket on every LIST, so its own cost grows with a table's history and hides
ours; gofakes3's memory backend keeps keys sorted and starts a LIST at `start-after`. It honours
`If-None-Match: *` (412 on an existing key), which delta-rs 1.6 commits with. Its limits: it sends no
S3 -> SQS notifications (a benchmark sends them itself) and checks no signatures.

Its memory backend's LIST, though, walks on past the prefix to the end of the bucket (a log listing pays
for every data file sorting after `_delta_log/`). So the benchmarks serve it through a wrapper of ours,
`gofakes3_seek/` beside this module: gofakes3 v1.2.0's memory backend with a `ListBucket` that stops at
the end of the prefix's key range, every other call the library's own. It is built with `go build` (the
Go toolchain on PATH, the module proxy reachable) on first use into `.tools/gofakes3_seek/<hash of its
sources>/` at the repository root (git-ignored). The benchmarks only: CI and the tests never need it.

    with GoFakeS3() as s3_server:
        client = boto3.client("s3", endpoint_url=s3_server.url, region_name="us-east-1")
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness.endpoints import free_port
from benchmarks.harness.server import ServerProcess, probe_client
from s3events.errors import FatalError

SOURCES = Path(__file__).resolve().parent / "gofakes3_seek"
CACHE = Path(__file__).resolve().parents[2] / ".tools" / "gofakes3_seek"
# The environment of a process that writes through pyarrow's S3 filesystem to gofakes3: the AWS SDK for
# C++ sends UploadPart as aws-chunked with a trailing checksum and no Content-Length unless checksums are
# only computed where an operation requires them, and gofakes3 answers 411 MissingContentLength.
CLIENT_ENV = {"AWS_REQUEST_CHECKSUM_CALCULATION": "when_required"}


def sources_hash(sources: Path = SOURCES) -> str:
    """A digest of the wrapper's sources: a changed source builds a new binary beside the old."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "main.go"):
        digest.update(name.encode() + b"\0" + (sources / name).read_bytes())
    return digest.hexdigest()[:16]


def binary(cache: Path = CACHE, sources: Path = SOURCES) -> Path:
    """The wrapper's executable, built with `go build` into `cache/<hash>/` the first time. The build
    lands in a temporary directory beside it and is renamed into place whole, so an interrupted build
    leaves nothing that looks complete."""
    target = cache / sources_hash(sources) / "gofakes3"
    if target.exists():
        return target
    go = shutil.which("go")
    if not go:
        raise FatalError("go was not found on PATH; --s3 gofakes3 builds its server with the Go toolchain")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".build-") as tmp:
        work = Path(tmp)
        env = {
            **os.environ,
            "GOPATH": str(work / "gopath"),  # the module cache stays inside the build, removed after
            "GOFLAGS": "-modcacherw -mod=readonly",
            "CGO_ENABLED": "0",
        }
        env.setdefault("GOCACHE", str(work / "cache"))
        built = work / "gofakes3"
        done = subprocess.run(
            [go, "build", "-o", str(built), "."],
            cwd=sources,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if done.returncode != 0 or not built.exists():
            raise FatalError(f"go build in {sources} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
        target.parent.mkdir(exist_ok=True)
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
        command = [str(program), "-host", f"127.0.0.1:{self.port}"]
        # it logs a line or two per LIST and PUT: only when a log is kept
        command += [] if self.log_path else ["-quiet"]
        probe = probe_client("s3", self.url)
        self._launch(command, probe.list_buckets, "ListBuckets", timeout=timeout, every=0.1)
        return self
