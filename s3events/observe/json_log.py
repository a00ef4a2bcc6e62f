"""JSON log lines: one object per line, for log collectors (`s3events.log.format=json`).

Fields: time (UTC, ISO 8601), level, logger, message, then whatever the caller passed with `extra=`
(a cycle's counts, a batch's target), and `exception` (the traceback as one string) when there is one.
Every line is one line: json escapes newlines, and the Unicode line separators are escaped too.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

# What every LogRecord carries; anything else on a record came from `extra=`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
_SECRET_WORDS = ("secret", "password", "token", "credential", "access_key")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in vars(record).items():
            if name in _STANDARD or name.startswith("_") or name in doc:
                continue
            doc[name] = "***" if any(word in name.lower() for word in _SECRET_WORDS) else value
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        line = json.dumps(doc, ensure_ascii=False, default=str)
        return line.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def json_logging() -> bool:
    """Whether the root logger writes JSON lines (s3events.log.format=json): Spark's JVM then does too."""
    return any(isinstance(handler.formatter, JsonFormatter) for handler in logging.getLogger().handlers)
