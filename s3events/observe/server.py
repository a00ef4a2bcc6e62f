"""The /metrics HTTP endpoint of a running process (prometheus_client's server, our registry)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, start_http_server

from s3events.errors import FatalError

log = logging.getLogger(__name__)


class Registered(Protocol):
    """A process's metrics: every group in one registry."""

    registry: CollectorRegistry


@dataclass
class MetricsServer:
    host: str
    port: int  # the bound port (the one asked for, or the one the OS chose for 0 in tests)
    _server: Any
    _thread: threading.Thread

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def serve(metrics: Registered, *, host: str, port: int) -> MetricsServer:
    """Serve `metrics` on a daemon thread. A port in use is a fatal start-up error (exit 3)."""
    try:
        server, thread = start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        raise FatalError(
            f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}: check s3events.metrics.port "
            "and s3events.metrics.host"
        ) from exc
    bound = MetricsServer(host, int(server.server_port), server, thread)
    log.info("metrics at %s", bound.url)
    return bound
