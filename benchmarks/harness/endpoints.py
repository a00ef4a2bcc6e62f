"""The endpoints benchmarks run against: the embedded moto_server (`LocalEndpoint`, the demo's and the
tests'), ElasticMQ for SQS at depth (`benchmarks.harness.elasticmq`), and what both need."""

from __future__ import annotations

import ctypes
import signal
import sys

from s3events.dev.local_endpoint import LOCAL_ENV, LocalEndpoint, free_port

__all__ = ["LOCAL_ENV", "LocalEndpoint", "die_with_parent", "free_port"]

_LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """A `preexec_fn` (Linux): the child gets SIGTERM when this process dies, even by SIGKILL, so a
    killed benchmark leaves no server behind. Only a foreign call, which is what makes it safe between
    fork and exec in a process with threads; elsewhere a no-op."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
