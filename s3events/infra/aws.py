"""boto3 sessions and clients, and the one place that decides which AWS errors are fatal or transient.

Credentials come only from the AWS credential chain (environment variables, profiles, instance or
container roles). They are never read from properties files and never logged.
"""

from __future__ import annotations

import functools
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import boto3
import botocore.config
import botocore.exceptions
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from s3events.config import Settings, keys
from s3events.errors import FatalError, TransientError

T = TypeVar("T")

# Error codes a person has to act on. Retrying them only hides the problem.
_FATAL_CODES = {
    "AccessDenied": "access denied",
    "AccessDeniedException": "access denied",
    "AWS.SimpleQueueService.NonExistentQueue": "the queue does not exist",
    "QueueDoesNotExist": "the queue does not exist",
    "NoSuchBucket": "the bucket does not exist",
    "InvalidClientTokenId": "the access key is not valid",
    "InvalidAccessKeyId": "the access key is not valid",
    "UnrecognizedClientException": "the credentials are not recognised",
    "SignatureDoesNotMatch": "the secret key does not match",
    "ExpiredToken": "the session token has expired",
    "KMS.AccessDeniedException": "access to the queue's KMS key is denied",
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


_DELTA_RS_NATIVE_CREDENTIALS = {"env", "iam-role", "container-role", "assume-role-with-web-identity"}


@dataclass(frozen=True, slots=True)
class AwsOptions:
    region: str | None = None
    endpoint_url: str | None = None


def options_from(settings: Settings) -> AwsOptions:
    return AwsOptions(region=settings.get(keys.AWS_REGION), endpoint_url=settings.get(keys.AWS_ENDPOINT_URL))


def session(options: AwsOptions) -> boto3.Session:
    return boto3.Session(region_name=options.region)


def client(options: AwsOptions, service: str, *, read_timeout: float = 60.0) -> Any:
    """A boto3 client, one per (process, options, service, timeout): creating one re-reads botocore's
    service models (~0.1-0.3 s of CPU), which executors reading many objects cannot afford per object.
    boto3 clients are thread-safe; creating one is not, hence the lock."""
    with _CLIENTS_LOCK:
        return _cached_client(os.getpid(), options, service, read_timeout)


_CLIENTS_LOCK = threading.Lock()


@functools.lru_cache(maxsize=64)
def _cached_client(_pid: int, options: AwsOptions, service: str, read_timeout: float) -> Any:
    config = botocore.config.Config(
        # botocore's own retries cover single calls; tenacity covers our steps around them.
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=10,
        read_timeout=read_timeout,
        max_pool_connections=50,
    )
    try:
        return session(options).client(service, endpoint_url=options.endpoint_url, config=config)
    except botocore.exceptions.NoRegionError as exc:
        raise FatalError(
            "no AWS region configured: set s3events.aws.region or AWS_REGION / AWS_DEFAULT_REGION"
        ) from exc


def delta_storage_options(options: AwsOptions) -> dict[str, str]:
    """Storage options for delta-rs on s3:// paths, resolved from the same chain as boto3.

    Called whenever a table is (re)opened, so refreshed role credentials are picked up.
    """
    sess = session(options)
    opts: dict[str, str] = {}
    region = options.region or sess.region_name
    if region:
        opts["AWS_REGION"] = region
    if options.endpoint_url:
        opts["AWS_ENDPOINT_URL"] = options.endpoint_url
        if options.endpoint_url.startswith("http://"):
            opts["AWS_ALLOW_HTTP"] = "true"
    credentials = sess.get_credentials()
    # delta-rs resolves (and refreshes) environment, web-identity, container and instance credentials
    # itself; only credentials it cannot find on its own (profiles, SSO) are handed over.
    if credentials is not None and getattr(credentials, "method", "") not in _DELTA_RS_NATIVE_CREDENTIALS:
        frozen = credentials.get_frozen_credentials()
        opts["AWS_ACCESS_KEY_ID"] = frozen.access_key
        opts["AWS_SECRET_ACCESS_KEY"] = frozen.secret_key
        if frozen.token:
            opts["AWS_SESSION_TOKEN"] = frozen.token
    return opts


StorageOptions = Mapping[str, str] | Callable[[], Mapping[str, str]]


class FreshStorageOptions:
    """`delta_storage_options(options)`, resolved again once older than `max_age_seconds`.

    Long-running processes call this on every table open: credentials handed over to delta-rs (profile,
    SSO) expire, and a process started with them would otherwise fail hours later.
    """

    def __init__(self, options: AwsOptions, *, max_age_seconds: float = 900.0) -> None:
        self._options = options
        self._max_age = max_age_seconds
        self._resolved: dict[str, str] | None = None
        self._at = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> dict[str, str]:
        with self._lock:
            if self._resolved is None or time.monotonic() - self._at >= self._max_age:
                self._resolved = delta_storage_options(self._options)
                self._at = time.monotonic()
            return dict(self._resolved)


def resolve(storage_options: StorageOptions) -> dict[str, str]:
    """The storage options to open a table with now."""
    return dict(storage_options() if callable(storage_options) else storage_options)


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
