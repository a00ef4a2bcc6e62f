"""A progress counter for `s3events backfill` on a terminal: one line redrawn with a carriage return.

Shown only when the stream is a terminal; redirected output never gets control characters.
"""

from __future__ import annotations

import time
from typing import TextIO

from s3events.backfill.model import BackfillReport


class TerminalProgress:
    def __init__(self, stream: TextIO, *, min_interval_seconds: float = 0.1) -> None:
        self._stream = stream
        self._min_interval = min_interval_seconds
        self._shown_at = 0.0
        self._width = 0
        self._started = time.monotonic()

    def update(self, report: BackfillReport) -> None:
        now = time.monotonic()
        if now - self._shown_at < self._min_interval:
            return
        self._shown_at = now
        text = (
            f"backfill: listed {report.listed:,}  known {report.already_known:,}  "
            f"new {report.new:,}  written {report.injected:,}  {now - self._started:.0f}s"
        )
        self._stream.write("\r" + text.ljust(self._width))
        self._stream.flush()
        self._width = len(text)

    def finish(self) -> None:
        """Clear the counter's line, so what follows (log lines, the summary) starts on a clean one."""
        if self._width:
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()
            self._width = 0


def terminal_progress(stream: TextIO) -> TerminalProgress | None:
    """A counter on `stream` when it is a terminal, else None (no progress output at all)."""
    isatty = getattr(stream, "isatty", None)
    return TerminalProgress(stream) if isatty is not None and isatty() else None
