"""boto3 sessions and clients, the process's credentials, and the one place that decides which AWS
errors are fatal or transient.

Credentials come only from the AWS credential chain (environment variables, profiles, instance or
container roles). They are never read from properties files and never logged. One `CredentialChain` per
process holds them: every boto3 client signs with its current credentials and the storage options handed
to delta-rs carry them, so when the chain is resolved again (every 15 minutes, or at once after AWS
rejected the credentials: `renew_credentials`) every client and table opened afterwards follows.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import boto3
import botocore.config
import botocore.credentials
import botocore.exceptions
import botocore.session
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from s3events.config import Settings, keys
from s3events.errors import CredentialsRejected, FatalError, TransientError

T = TypeVar("T")
log = logging.getLogger(__name__)

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


_DELTA_RS_NATIVE_CREDENTIALS = {"env", "iam-role", "container-role", "assume-role-with-web-identity"}


@dataclass(frozen=True, slots=True)
class AwsOptions:
    region: str | None = None
    endpoint_url: str | None = None


def options_from(settings: Settings) -> AwsOptions:
    return AwsOptions(region=settings.get(keys.AWS_REGION), endpoint_url=settings.get(keys.AWS_ENDPOINT_URL))


def session(options: AwsOptions) -> boto3.Session:
    """A boto3 session whose clients sign with this process's `credential_chain()`."""
    core = botocore.session.get_session()
    # First in the chain (an explicit AWS_PROFILE takes the environment provider out of botocore's list).
    core.get_component("credential_provider").providers.insert(0, _ChainProvider(credential_chain()))
    return boto3.Session(botocore_session=core, region_name=options.region)


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


def _resolve_chain() -> Any:
    """The credentials the AWS credential chain yields now (botocore Credentials, or None): a new session
    reads the environment and the profile files again."""
    return boto3.Session().get_credentials()


def _frozen(credentials: Any) -> tuple[str, str, str | None] | None:
    if credentials is None:
        return None
    frozen = credentials.get_frozen_credentials()
    return (frozen.access_key, frozen.secret_key, frozen.token)


class CredentialChain:
    """The credentials of this process, resolved from the AWS credential chain; resolved again once older
    than `max_age_seconds` (a profile's keys rotated, a credential process's renewed), or at once by
    `renew()`. Refreshable credentials (roles, SSO) also refresh themselves, as botocore does.

    `generation` counts the times the chain yielded other credentials than before."""

    def __init__(
        self,
        resolve: Callable[[], Any] = _resolve_chain,
        *,
        max_age_seconds: float = 900.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._resolve = resolve
        self._max_age = max_age_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._credentials: Any = None
        self._resolved_at: float | None = None
        self.generation = 0

    def current(self) -> Any:
        """The credentials to sign with now (botocore Credentials), or None when the chain has none."""
        return self.current_with_generation()[0]

    def current_with_generation(self) -> tuple[Any, int]:
        with self._lock:
            if self._resolved_at is None:
                self._replace(self._resolve())  # a broken chain at start-up says so (e.g. ProfileNotFound)
            elif self._clock() - self._resolved_at >= self._max_age:
                self._resolve_again()
            return self._credentials, self.generation

    def renew(self, rejected: int | None = None) -> bool:
        """Resolve the chain now. True when the credentials in use differ from the rejected ones (those of
        generation `rejected`; unknown: those in use until now), which are used from now on; False when
        they are the same (or there are none, or the chain cannot be read)."""
        with self._lock:
            changed = self._resolve_again()
            if rejected is not None and rejected != self.generation:
                return self._credentials is not None  # another thread renewed them since the rejection
            return changed

    def _resolve_again(self) -> bool:
        try:
            fresh = self._resolve()
        except botocore.exceptions.BotoCoreError:  # e.g. the profile is gone: keep what works, if anything
            log.debug("resolving the AWS credential chain again failed", exc_info=True)
            self._resolved_at = self._clock()
            return False
        return self._replace(fresh) and fresh is not None

    def _replace(self, fresh: Any) -> bool:
        try:
            held = _frozen(self._credentials)  # refreshable credentials may refresh here
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
            held = None  # the ones in use cannot even be refreshed any more: the fresh ones differ
        changed = self._resolved_at is not None and _frozen(fresh) != held
        self._credentials, self._resolved_at = fresh, self._clock()
        if changed:
            self.generation += 1
        return changed


_CHAINS: dict[int, CredentialChain] = {}
_CHAINS_LOCK = threading.Lock()


def credential_chain() -> CredentialChain:
    """This process's credentials (one chain per process: a forked child resolves its own)."""
    with _CHAINS_LOCK:
        return _CHAINS.setdefault(os.getpid(), CredentialChain())


def renew_credentials(rejection: CredentialsRejected, *, chain: CredentialChain | None = None) -> bool:
    """After AWS rejected this process's credentials: resolve the chain again at once. True when it yields
    other credentials than the rejected ones, which every client and table opened from now on uses (the
    caller retries with them), said in one line; False when they are the same (the rejection stands:
    fatal). Never logs key material."""
    if isinstance(rejection, RejectedOnExecutor):
        return rejection.renewed  # the executor's chain was refused, and it has judged (and said so)
    chain = chain or credential_chain()
    before = chain.generation
    if not chain.renew(rejection.generation):
        return False
    if chain.generation == before:
        return True  # another thread renewed them since this request was signed, and said so
    method = getattr(chain.current(), "method", None) or "unknown source"
    log.warning(
        "credentials refreshed after a rejection: the credential chain (%s) now yields other "
        "credentials; retrying with them (rejected: %s)",
        method,
        rejection,
    )
    return True


class RejectedOnExecutor(CredentialsRejected):
    """Credentials refused to a Spark executor (another process, with a credential chain of its own; or
    the driver, when it reads a small batch's objects on its own threads) and judged there by
    `renew_credentials`: `renewed` is its verdict, which the driver's run loop acts on
    (`renew_credentials` answers it): the cycle runs again (other credentials) or the process stops.
    The verdict is in the message too: Spark hands the driver an executor's error as text only."""

    def __init__(self, rejection: str, *, renewed: bool) -> None:
        super().__init__(f"{rejection}: {_EXECUTOR_VERDICTS[renewed]}")
        self.renewed = renewed


_EXECUTOR_VERDICTS = {
    True: "the reading process's credential chain, resolved again at once, now yields other credentials",
    False: (
        "the reading process's credential chain, resolved again at once, yields the same credentials: "
        "check the AWS credentials of the processes that read objects (Spark's executors; the driver for "
        "a batch read on its threads): environment, profile, instance or container role"
    ),
}
# How the executor's error reads in the text of the Spark job's failure, on the driver.
_ON_EXECUTOR = re.compile(
    r"s3events\.infra\.aws\.RejectedOnExecutor: (?P<rejection>[^\n]*?): (?P<verdict>"
    + "|".join(re.escape(verdict) for verdict in _EXECUTOR_VERDICTS.values())
    + ")"
)


def judged_on_executor(rejection: CredentialsRejected) -> RejectedOnExecutor:
    """In an executor: the rule (`renew_credentials`) applied to this process's own chain, which puts
    other credentials, if any, into use here; raise the answer and the driver acts on its verdict."""
    return RejectedOnExecutor(str(rejection), renewed=renew_credentials(rejection))


def rejected_on_executor(exc: BaseException) -> RejectedOnExecutor | None:
    """On the driver: the executors' `judged_on_executor` error inside a Spark job's failure, or None."""
    found = _ON_EXECUTOR.search(str(exc))
    if found is None:
        return None
    renewed = found.group("verdict") == _EXECUTOR_VERDICTS[True]
    return RejectedOnExecutor(f"on an executor: {found.group('rejection')}", renewed=renewed)


# The generation of the credentials this thread last signed a request with: botocore signs and sends in
# the calling thread, so a rejection classified right after knows which credentials were refused.
_SIGNED = threading.local()


class _ChainCredentials(botocore.credentials.Credentials):
    """What boto3 clients sign with: always the chain's current credentials."""

    def __init__(self, chain: CredentialChain) -> None:  # no super().__init__: nothing is stored here
        self._chain = chain

    def get_frozen_credentials(self) -> botocore.credentials.ReadOnlyCredentials:
        credentials, _SIGNED.generation = self._chain.current_with_generation()
        if credentials is None:
            raise botocore.exceptions.NoCredentialsError()
        frozen: botocore.credentials.ReadOnlyCredentials = credentials.get_frozen_credentials()
        return frozen

    @property
    def access_key(self) -> str:
        return self.get_frozen_credentials().access_key

    @property
    def secret_key(self) -> str:
        return self.get_frozen_credentials().secret_key

    @property
    def token(self) -> str | None:
        return self.get_frozen_credentials().token

    @property
    def account_id(self) -> str | None:  # an endpoint rule input (botocore reads it lazily)
        return self.get_frozen_credentials().account_id

    @property
    def method(self) -> str:
        return str(getattr(self._chain.current(), "method", "") or "")


class _ChainProvider(botocore.credentials.CredentialProvider):
    """First in a session's chain: hands out `_ChainCredentials` while the process's chain has any."""

    METHOD = "s3events-credential-chain"

    def __init__(self, chain: CredentialChain) -> None:
        super().__init__()
        self._chain = chain

    def load(self) -> botocore.credentials.Credentials | None:
        return _ChainCredentials(self._chain) if self._chain.current() is not None else None


def _base_storage_options(options: AwsOptions) -> dict[str, str]:
    opts: dict[str, str] = {}
    region = options.region or boto3.Session().region_name
    if region:
        opts["AWS_REGION"] = region
    if options.endpoint_url:
        opts["AWS_ENDPOINT_URL"] = options.endpoint_url
        if options.endpoint_url.startswith("http://"):
            opts["AWS_ALLOW_HTTP"] = "true"
    return opts


def _credential_options(credentials: Any) -> dict[str, str]:
    # delta-rs resolves (and refreshes) environment, web-identity, container and instance credentials
    # itself; only credentials it cannot find on its own (profiles, SSO) are handed over.
    if credentials is None or getattr(credentials, "method", "") in _DELTA_RS_NATIVE_CREDENTIALS:
        return {}
    frozen = credentials.get_frozen_credentials()
    opts = {"AWS_ACCESS_KEY_ID": frozen.access_key, "AWS_SECRET_ACCESS_KEY": frozen.secret_key}
    if frozen.token:
        opts["AWS_SESSION_TOKEN"] = frozen.token
    return opts


def delta_storage_options(options: AwsOptions) -> dict[str, str]:
    """Storage options for delta-rs on s3:// paths, with this process's current credentials."""
    return {**_base_storage_options(options), **_credential_options(credential_chain().current())}


StorageOptions = Mapping[str, str] | Callable[[], Mapping[str, str]]


class FreshStorageOptions:
    """`delta_storage_options(options)` as of now: the credentials are the chain's current ones (resolved
    again every 15 minutes, and at once after a rejection), so long-running processes that call this on
    every table open follow rotated, renewed or refreshed credentials without a restart."""

    def __init__(self, options: AwsOptions, *, chain: CredentialChain | None = None) -> None:
        self._options = options
        self._chain = chain
        self._base: dict[str, str] | None = None
        self._lock = threading.Lock()

    def __call__(self) -> dict[str, str]:
        with self._lock:
            if self._base is None:
                self._base = _base_storage_options(self._options)
            base = dict(self._base)
        return {**base, **_credential_options((self._chain or credential_chain()).current())}


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
        if code in _CREDENTIAL_CODES:
            return CredentialsRejected(
                f"{action}: {_CREDENTIAL_CODES[code]} ({code}: {message})",
                generation=getattr(_SIGNED, "generation", None),
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
