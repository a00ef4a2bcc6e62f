"""The endpoints benchmarks run against: the embedded moto_server (`LocalEndpoint`, the demo's and the
tests'), ElasticMQ for SQS at depth (`benchmarks.harness.elasticmq`), and what both need."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from s3events.dev.local_endpoint import LOCAL_ENV, LocalEndpoint, free_port

__all__ = ["LOCAL_ENV", "LocalEndpoint", "PatchedMotoServer", "die_with_parent", "free_port", "stop_process"]

_LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """A `preexec_fn` (Linux): the child gets SIGTERM when this process dies, even by SIGKILL, so a
    killed benchmark leaves no server behind. Only a foreign call, which is what makes it safe between
    fork and exec in a process with threads; elsewhere a no-op."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def stop_process(process: subprocess.Popen[bytes] | None, *, timeout: float = 20.0) -> None:
    """SIGTERM a server child (a JVM runs its shutdown hook), SIGKILL it after `timeout` seconds."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class PatchedMotoServer:
    """moto_server started from a Python script instead of its console script (`python -c BOOT -H
    127.0.0.1 -p PORT`), so a benchmark can patch moto in that process only (e.g. an indexed listing
    where moto's own walks the whole bucket). `BOOT` ends by calling `moto.server.main(sys.argv[1:])`.
    The same interface as `LocalEndpoint`: a context manager with `url`."""

    boot: str
    port: int = 0
    log_path: Path | None = None
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, timeout: float = 60.0) -> PatchedMotoServer:
        self.port = self.port or free_port()
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self._process = subprocess.Popen(
            [sys.executable, "-c", self.boot, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **LOCAL_ENV},
            preexec_fn=die_with_parent,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"moto_server exited at start-up with code {self._process.returncode}")
            try:
                with urllib.request.urlopen(f"{self.url}/moto-api/", timeout=1):
                    return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.1)  # polling a child process for readiness
        self.stop()
        raise RuntimeError(f"moto_server did not answer on {self.url} within {timeout:.0f}s")

    def stop(self) -> None:
        stop_process(self._process, timeout=10)
        self._process = None

    def __enter__(self) -> PatchedMotoServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
