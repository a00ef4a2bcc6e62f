"""Counting the AWS SDK's own retries of one boto3 client, by operation and error code.

botocore decides retries inside a call (standard mode) and tells no one; its `needs-retry` event is where
it decides, so a listener there sees every failed attempt. This one counts the attempts botocore's
standard mode retries: throttling and transient error codes, 5xx and connection errors, while attempts
remain. Codes outside a fixed set count as `5xx` or `connection`, so the labels stay bounded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# botocore's standard-mode transient and throttling codes (botocore/retries/standard.py), plus SQS's.
RETRIED_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
        "RequestTimeout",
        "RequestTimeoutException",
        "InternalError",
        "InternalFailure",
        "ServiceUnavailable",
        "KMS.ThrottlingException",
        "AWS.SimpleQueueService.RequestThrottled",
    }
)

Record = Callable[[str, str], None]  # (operation, code)


def retried_code(response: Any, caught_exception: BaseException | None) -> str | None:
    """The label for an attempt botocore retries, or None when it does not (success, a 4xx)."""
    if caught_exception is not None:
        return "connection"
    if not response:
        return None
    http, parsed = response
    code = str((parsed or {}).get("Error", {}).get("Code", ""))
    if code in RETRIED_CODES:
        return code
    status = int(getattr(http, "status_code", 0) or 0)
    if status >= 500:
        return "5xx"
    if status == 429:
        return "Throttling"
    return None


def watch_retries(client: Any, record: Record) -> Callable[[], None]:
    """Call `record(operation, code)` for each attempt of `client` that botocore retries; returns the
    function that stops watching (the client is shared and outlives one run)."""
    retries = dict(getattr(client.meta.config, "retries", None) or {})
    total = int(retries.get("total_max_attempts") or int(retries.get("max_attempts", 2)) + 1)
    event = f"needs-retry.{client.meta.service_model.service_id.hyphenize()}"

    def listener(
        response: Any = None,
        attempts: int = 1,
        caught_exception: BaseException | None = None,
        operation: Any = None,
        **_: Any,
    ) -> None:
        code = retried_code(response, caught_exception)
        if code is not None and attempts < total:
            record(getattr(operation, "name", "unknown"), code)
        # None: this listener never decides the retry itself

    client.meta.events.register(event, listener)
    return lambda: client.meta.events.unregister(event, listener)
