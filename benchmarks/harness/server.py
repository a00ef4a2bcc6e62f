"""A local server the benchmarks start as a child process (gofakes3, ElasticMQ): launched, probed with
one AWS call until it answers, measured, stopped. One home for what each server would otherwise repeat."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import boto3
import botocore.config
import botocore.exceptions

from benchmarks.harness.endpoints import LOCAL_ENV, die_with_parent, stop_process
from benchmarks.harness.procs import rss_bytes
from s3events.errors import FatalError


def probe_client(service: str, url: str) -> Any:
    """A client that fails fast (one attempt, short timeouts): readiness is polled, not retried."""
    return boto3.client(
        service,
        endpoint_url=url,
        region_name=LOCAL_ENV["AWS_REGION"],
        aws_access_key_id=LOCAL_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=LOCAL_ENV["AWS_SECRET_ACCESS_KEY"],
        config=botocore.config.Config(
            connect_timeout=1, read_timeout=5, retries={"mode": "standard", "max_attempts": 1}
        ),
    )


@dataclass
class ServerProcess:
    """A server child on 127.0.0.1:`port`; a subclass's `start` builds its command and calls `_launch`."""

    port: int = 0
    log_path: Path | None = None
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    name = "server"
    stop_timeout = 20.0  # seconds between SIGTERM and SIGKILL

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def _launch(
        self, command: list[str], probe: Callable[[], object], what: str, *, timeout: float, every: float
    ) -> None:
        """Start `command` and call `probe` (an AWS call named `what`) until it answers or `timeout`."""
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self._process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code = self._process.returncode
                self.stop()
                raise FatalError(f"{self.name} exited at start-up with code {code}")
            try:
                probe()
                return
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
                time.sleep(every)  # polling a child process for readiness
        self.stop()
        raise FatalError(f"{self.name} did not answer {what} on {self.url} within {timeout:.0f}s")

    def rss_mib(self) -> float:
        """The server's resident memory, MiB; nan when it is not running."""
        held = rss_bytes(self._process.pid) if self._process else 0
        return held / 2**20 if held else float("nan")

    def stop(self) -> None:
        stop_process(self._process, timeout=self.stop_timeout)
        self._process = None

    def start(self) -> Self:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start() if self._process is None else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
