"""An embedded local S3/SQS endpoint: a `moto_server` child process on 127.0.0.1.

Used by `s3events demo`, the tests and the benchmarks. It runs as a separate process on purpose: an
in-process moto server shares our GIL and deadlocks delta-rs reads (see ARCHITECTURE.md).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from s3events.errors import FatalError

# Fixed fake credentials for the local endpoint only; moto accepts any.
LOCAL_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child between fork and exec (Linux): SIGTERM when the parent dies, even by SIGKILL, so a
    killed demo, test run or benchmark leaves no moto_server behind. Only a foreign call: no imports or
    locks, which is what makes preexec_fn safe in a process with threads. Elsewhere a no-op."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def _moto_server_command() -> list[str]:
    # Prefer the script beside our interpreter (the venv's), so no PATH set-up is needed.
    beside = Path(sys.executable).with_name("moto_server")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("moto_server")
    if found:
        return [found]
    raise FatalError("moto_server was not found; install the local extra: pip install 's3events[local]'")


@dataclass
class LocalEndpoint:
    """A running moto server. Use as a context manager, or call start()/stop()."""

    port: int = 0
    log_path: Path | None = None
    env: dict[str, str] = field(default_factory=dict)  # e.g. INITIAL_NO_AUTH_ACTION_COUNT: IAM enforced
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, timeout: float = 30.0) -> LocalEndpoint:
        if not self.port:
            self.port = free_port()
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self._process = subprocess.Popen(
            [*_moto_server_command(), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **LOCAL_ENV, **self.env},
            preexec_fn=_die_with_parent,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise FatalError(f"moto_server exited at start-up with code {self._process.returncode}")
            try:
                with urllib.request.urlopen(f"{self.url}/moto-api/", timeout=1):
                    return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.1)  # polling for readiness of a child process, not a test sleep
        self.stop()
        raise FatalError(f"moto_server did not answer on {self.url} within {timeout:.0f}s")

    def reset(self) -> None:
        """Forget every bucket and queue (moto's reset API)."""
        request = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass

    def stop(self) -> None:
        if self._process and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def __enter__(self) -> LocalEndpoint:
        return self.start() if self._process is None else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
