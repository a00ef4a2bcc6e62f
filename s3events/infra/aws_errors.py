"""The one place that decides which AWS (botocore) errors are fatal or transient, and says so in one line,
as `delta_errors` does for delta-rs; `call` and `retrying` apply it around boto3 calls."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import botocore.exceptions
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from s3events.errors import CredentialsRejected, FatalError, TransientError
from s3events.infra.aws_credentials import signed_generation

T = TypeVar("T")

# Error codes a person has to act on. Retrying them only hides the problem.
_FATAL_CODES = {
    "AccessDenied": "access denied",
    "AccessDeniedException": "access denied",
    "AWS.SimpleQueueService.NonExistentQueue": "the queue does not exist",
    "QueueDoesNotExist": "the queue does not exist",
    "NoSuchBucket": "the bucket does not exist",
    "KMS.AccessDeniedException": "access to the queue's KMS key is denied",
}
# Error codes that reject the credentials themselves: fatal too, unless the chain now yields other ones.
_CREDENTIAL_CODES = {
    "InvalidClientTokenId": "the access key is not valid",
    "InvalidAccessKeyId": "the access key is not valid",
    "UnrecognizedClientException": "the credentials are not recognised",
    "SignatureDoesNotMatch": "the secret key does not match",
    "ExpiredToken": "the session token has expired",
    "ExpiredTokenException": "the session token has expired",
    "InvalidToken": "the session token is not valid",
}
_BODY_CODE = re.compile(r"<Code>([^<]+)</Code>")
_BODY_MESSAGE = re.compile(r"<Message>([^<]*)</Message>")
_TRANSIENT_CODES = {
    "Throttling",
    "ThrottlingException",
    "RequestThrottled",
    "RequestThrottledException",
    "SlowDown",
    "ServiceUnavailable",
    "InternalError",
    "InternalFailure",
    "RequestTimeout",
    "RequestTimeoutException",
    "KMS.ThrottlingException",
}


def classify(exc: BaseException, *, action: str) -> FatalError | TransientError:
    """Turn a botocore error into FatalError (stop, tell a person) or TransientError (retry)."""
    if isinstance(exc, botocore.exceptions.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = " ".join(str(error.get("Message", "")).split())  # one line
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        body_code = _BODY_CODE.search(message)
        if code.isdigit() and body_code:  # a body botocore could not parse (XML for a JSON protocol)
            code = body_code.group(1)
            message = body_message.group(1) if (body_message := _BODY_MESSAGE.search(message)) else ""
        if code in _CREDENTIAL_CODES:
            return CredentialsRejected(
                f"{action}: {_CREDENTIAL_CODES[code]} ({code}: {message})",
                generation=signed_generation(),
            )
        if code in _FATAL_CODES:
            return FatalError(f"{action}: {_FATAL_CODES[code]} ({code}: {message})")
        if code in _TRANSIENT_CODES or status >= 500:
            return TransientError(f"{action}: {code or status} {message}".strip())
        return FatalError(f"{action}: {code}: {message}")
    if isinstance(exc, botocore.exceptions.NoCredentialsError):
        return FatalError(
            f"{action}: no AWS credentials found in the credential chain "
            "(environment, profile, instance or container role)"
        )
    if isinstance(
        exc,
        botocore.exceptions.EndpointConnectionError
        | botocore.exceptions.ConnectionClosedError
        | botocore.exceptions.ReadTimeoutError
        | botocore.exceptions.ConnectTimeoutError,
    ):
        return TransientError(f"{action}: {exc}")
    if isinstance(exc, botocore.exceptions.BotoCoreError):
        return FatalError(f"{action}: {exc}")
    return TransientError(f"{action}: {exc!r}")


def call(action: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Call a boto3 method, translating its errors through classify()."""
    try:
        return fn(*args, **kwargs)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        raise classify(exc, action=action) from exc


def retrying(attempts: int = 5, max_wait: float = 10.0) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Retry a step on TransientError with exponential backoff and jitter; fatal errors pass through."""
    return retry(
        retry=retry_if_exception_type(TransientError),
        wait=wait_exponential_jitter(multiplier=0.2, max=max_wait, jitter=0.5),
        stop=stop_after_attempt(attempts),
        reraise=True,
    )
