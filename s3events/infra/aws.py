"""boto3 sessions and clients, and the storage options delta-rs opens tables with, signed by this
process's credentials (`aws_credentials`). AWS errors are classified in `aws_errors`; both are re-exported
here, so that a caller needs one import for AWS.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import boto3
import botocore.config
import botocore.exceptions
import botocore.session

from s3events.config import Settings, keys
from s3events.errors import FatalError
from s3events.infra.aws_credentials import (
    ChainProvider,
    CredentialChain,
    RejectedOnExecutor,
    credential_chain,
    judged_on_executor,
    rejected_on_executor,
    renew_credentials,
)
from s3events.infra.aws_errors import call, classify, retrying

__all__ = [
    "AwsOptions",
    "CredentialChain",
    "FreshStorageOptions",
    "RejectedOnExecutor",
    "StorageOptions",
    "call",
    "classify",
    "client",
    "credential_chain",
    "delta_storage_options",
    "judged_on_executor",
    "options_from",
    "rejected_on_executor",
    "renew_credentials",
    "resolve",
    "retrying",
    "session",
]

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
    core.get_component("credential_provider").providers.insert(0, ChainProvider(credential_chain()))
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
