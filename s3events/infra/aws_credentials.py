"""The process's AWS credentials: one `CredentialChain` per process, resolved from the AWS credential chain
(environment variables, profiles, instance or container roles; never properties files, never logged).
Every boto3 client signs with its current credentials (`ChainProvider`), so when the chain is resolved
again (every 15 minutes, or at once after AWS rejected the credentials: `renew_credentials`) every client
and table opened afterwards follows. An executor judges a rejection by its own chain and the driver reads
the verdict from the job's failure (`judged_on_executor`, `rejected_on_executor`).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import boto3
import botocore.credentials
import botocore.exceptions

from s3events.errors import CredentialsRejected

log = logging.getLogger(__name__)


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
    rf"{re.escape(RejectedOnExecutor.__module__)}\.RejectedOnExecutor: (?P<rejection>[^\n]*?): (?P<verdict>"
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


class ChainProvider(botocore.credentials.CredentialProvider):
    """First in a session's chain: hands out `_ChainCredentials` while the process's chain has any."""

    METHOD = "s3events-credential-chain"

    def __init__(self, chain: CredentialChain) -> None:
        super().__init__()
        self._chain = chain

    def load(self) -> botocore.credentials.Credentials | None:
        return _ChainCredentials(self._chain) if self._chain.current() is not None else None


def signed_generation() -> int | None:
    """The generation of the credentials this thread last signed a request with (None: none yet)."""
    return getattr(_SIGNED, "generation", None)
