"""What every flow's metric group shares (each flow declares its own, e.g. `capture/metrics.py`): the
histogram buckets and the clock of the *_timestamp_seconds gauges. Label values are bounded: target
names, table labels, AWS operation names and error codes, never object keys or bucket paths. A process's
groups share one registry (`s3events.process_metrics.Metrics`), which `server` serves.
"""

from __future__ import annotations

import time

# Seconds: from a quick commit to a batch of large files read on a cluster.
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0)
PASS_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0)


def now() -> float:
    """Wall-clock unix time for the *_timestamp_seconds gauges."""
    return time.time()
