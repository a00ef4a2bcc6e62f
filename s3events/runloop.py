"""One loop, one stop flag, one final flush — shared by the continuous processes.

Signal handlers only set the flag; the cycle in hand always finishes (commit, delete) before exit.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import TypeVar

from s3events.errors import ConfigError, CredentialsRejected, FatalError
from s3events.infra.delta_errors import transient_reason

log = logging.getLogger(__name__)

R = TypeVar("R")


class StopFlag:
    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking at once when the flag is set. True when stopping."""
        return self._event.wait(max(0.0, seconds))

    def install_signal_handlers(self) -> None:
        def handler(signum: int, _frame: FrameType | None) -> None:
            if self._event.is_set():
                log.warning("second %s: still finishing the batch in hand", signal.Signals(signum).name)
            else:
                log.info(
                    "%s received: finishing the batch in hand, then exiting", signal.Signals(signum).name
                )
            self._event.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)


def run_loop(
    step: Callable[[], R],
    *,
    once: bool,
    is_idle: Callable[[R], bool],
    stop: StopFlag,
    min_interval_seconds: float = 0.0,
    max_error_backoff_seconds: float = 60.0,
    idle_pause_seconds: float = 1.0,
    wait_for_work: Callable[[float], object] | None = None,
    clock: Callable[[], float] = time.monotonic,
    renew_credentials: Callable[[CredentialsRejected], bool] | None = None,
) -> int:
    """Run `step` until idle (--once) or until stopped (--continuous). Returns the number of cycles.

    --once: errors propagate (the command exits non-zero). --continuous: a failed cycle is logged and
    retried after an exponential backoff; only FatalError (a person must act) ends the loop.

    Pacing: two cycles start at least `min_interval_seconds` apart, and after an idle cycle the next
    starts `idle_pause_seconds` after its start at the earliest (a cycle that was itself a long poll
    waits no more). `wait_for_work(seconds)`, when given, spends that idle pause watching for new work and
    returns as soon as there is some (or when the stop flag is set), so the next cycle starts then.

    Credentials AWS rejected (CredentialsRejected, in either mode) are the one FatalError that may not
    end it: `renew_credentials(rejection)` resolves the credential chain again at once, and when it yields
    other credentials (True) the cycle runs again with them, at once unless cycles keep failing. When it
    yields the same ones, the rejection stands. A rejection a Spark executor met was judged there, by its
    own chain (`aws.RejectedOnExecutor`): its verdict is the answer. Cycles are safe to run again by
    design (nothing is acknowledged before its commit), so the retried cycle loses and duplicates nothing.
    """
    cycles = 0
    failures = 0
    while not stop.is_set():
        started = clock()
        try:
            result = step()
        except CredentialsRejected as exc:
            if renew_credentials is None or not renew_credentials(exc):
                raise
            failures += 1
            if failures > 1:  # other credentials, yet the cycles keep failing: do not spin
                stop.wait(_backoff(failures, max_error_backoff_seconds))
            continue
        except (FatalError, ConfigError):  # ConfigError: a mistake only a batch could show (exit 2)
            raise
        except Exception as exc:
            if once:
                raise
            failures += 1
            stop.wait(_failed(exc, failures, max_error_backoff_seconds))
            continue
        failures = 0
        cycles += 1
        idle = is_idle(result)
        if once and idle:
            break
        _pace(stop, idle, started, clock, min_interval_seconds, idle_pause_seconds, wait_for_work)
    return cycles


def _failed(exc: Exception, failures: int, max_backoff_seconds: float) -> float:
    """Log a failed cycle (the `failures`-th in a row) and return how long to back off."""
    backoff = _backoff(failures, max_backoff_seconds)
    reason = transient_reason(exc)
    if reason is not None:  # expected (throttling, an outage): one line, no traceback
        log.warning("cycle failed (%d in a row); retrying in %.1fs: %s", failures, backoff, reason)
        log.debug("the failed cycle's traceback", exc_info=True)
    else:  # a bug, or an error we do not know yet: the traceback helps whoever fixes it
        log.exception("cycle failed (%d in a row); retrying in %.1fs", failures, backoff)
    return backoff


def _pace(
    stop: StopFlag,
    idle: bool,
    started: float,
    clock: Callable[[], float],
    min_interval_seconds: float,
    idle_pause_seconds: float,
    wait_for_work: Callable[[float], object] | None,
) -> None:
    """Wait before the next cycle. An idle cycle pauses briefly even with no interval set, so a zero long
    poll cannot spin."""
    elapsed = clock() - started
    remaining = min_interval_seconds - elapsed
    if not idle:
        stop.wait(remaining)
    elif wait_for_work is None:
        stop.wait(max(remaining, idle_pause_seconds - elapsed))
    elif not stop.wait(remaining):  # the interval holds; then the pause ends early when work comes
        pause = idle_pause_seconds - (clock() - started)
        if pause > 0:
            wait_for_work(pause)


def _backoff(failures: int, max_seconds: float) -> float:
    return min(max_seconds, 2.0 ** min(failures, 10) / 4)
