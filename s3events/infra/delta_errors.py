"""The one place that decides which delta-rs / object_store errors are fatal or transient, and says so in
one line.

delta-rs raises OSError or DeltaError whose text is a multi-line chain of causes decorated with terminal
colour codes (ANSI escapes); only that text tells what went wrong, so the classification reads it, as
`aws.classify` reads botocore's error codes. Pure (no deltalake import): unit-tested on message text.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from s3events.errors import CredentialsRejected, FatalError, TransientError

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_BUCKET_IN_BODY = re.compile(r"<BucketName>([^<]+)</BucketName>")
# Random ids in S3 error bodies: noise in a message, and they could look like a status code ("/403+").
_REQUEST_IDS = re.compile(r"<(RequestId|HostId)>[^<]*</\1>")
_DETAIL_LIMIT = 300


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str]
    fatal: bool
    reason: str  # may use {bucket} and {match}
    hint: str  # may use {bucket} and {path}
    credentials: bool = False  # the credentials themselves were rejected (CredentialsRejected)


def _rule(pattern: str, fatal: bool, reason: str, hint: str, *, credentials: bool = False) -> _Rule:
    return _Rule(re.compile(pattern, re.IGNORECASE), fatal, reason, hint, credentials)


_ENDPOINT_HINT = "check s3events.aws.endpoint.url / the region and that the network reaches the endpoint"
# First match wins: the specific S3 codes before the bare HTTP statuses that accompany them.
_RULES = (
    _rule(r"NoSuchBucket", True, "the bucket {bucket} does not exist (NoSuchBucket)",
          "check the bucket name in the table path and the region"),
    _rule(r"InvalidAccessKeyId|SignatureDoesNotMatch|ExpiredToken|InvalidToken|InvalidClientTokenId",
          True, "the credentials were rejected ({match})",
          "check the AWS credential chain (environment, profile, instance or container role)",
          credentials=True),
    _rule(r"AccessDenied|\b403\b(?: Forbidden)?|Forbidden", True, "access denied ({match})",
          "check that the credentials may list, read and write under {path}"),
    # object_store gives up with "error sending request" once its retries ran out (a DeltaError, not an
    # OSError, from e.g. load_cdf); a body cut mid-stream reads "request or response body error" or "error
    # decoding response body".
    _rule(r"Connection refused|tcp connect error|dns error|failed to lookup address|"
          r"Name or service not known|Connection reset|connection closed|Network is unreachable|"
          r"error sending request|request or response body error|error decoding response body|"
          r"IncompleteMessage",
          False, "cannot reach the storage endpoint ({match})", _ENDPOINT_HINT),
    _rule(r"SlowDown|Throttl\w*|TooManyRequests|\b429\b|\b503\b|ServiceUnavailable|\b500\b|InternalError",
          False, "the storage service is throttling or unavailable ({match})", "retry later"),
    _rule(r"timed out|\btimeout\b|RequestTimeout", False, "the request timed out ({match})", _ENDPOINT_HINT),
    _rule(r"Not a directory|NotADirectory", True, "a parent of the path is a file, not a directory",
          "check the table path"),
    _rule(r"Permission denied|PermissionDenied|Operation not permitted", True, "permission denied ({match})",
          "check that this user may write the directory of the table path"),
    _rule(r"Read-only file system|ReadOnlyFilesystem", True, "the file system is read-only",
          "check the table path"),
    _rule(r"No space left|StorageFull", True, "no space left on the device", "free space or move the table"),
    _rule(r"\b404\b|Not Found", True, "not found (404)",
          "check the bucket in the table path, the region and s3events.aws.endpoint.url"),
)


def plain(text: str) -> str:
    """`text` without colour codes, its chain of causes joined on one line."""
    text = _REQUEST_IDS.sub("", _ANSI.sub("", text))
    lines = (line.strip().lstrip("↳").strip() for line in text.splitlines())
    return " <- ".join(line for line in lines if line)


def _short(text: str) -> str:
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 3] + "..."


def _bucket(path: str, text: str) -> str:
    found = _BUCKET_IN_BODY.search(text)
    if found:
        return found.group(1)
    if path.startswith("s3://"):
        return path[len("s3://") :].split("/", 1)[0]
    return "(unknown)"


def translate(exc: BaseException, *, action: str, path: str) -> FatalError | TransientError:
    """FatalError (a person must act) or TransientError (retry) for an error of a delta-rs call on the
    table at `path`; the message reads "{action} at {path}: {what went wrong}: {what to check}".

    `action` says what was attempted, e.g. "cannot open the metadata table". Errors the rules do not know
    are transient when they are I/O errors (OSError: the store may answer next time), fatal otherwise (the
    table itself is not what it should be)."""
    known = recognised(exc, action=action, path=path)
    if known is not None:
        return known
    text = plain(str(exc))
    message = f"{action} at {path}: {_short(text) or type(exc).__name__}"
    return TransientError(message) if isinstance(exc, OSError) else FatalError(message)


def recognised(exc: BaseException, *, action: str, path: str) -> FatalError | TransientError | None:
    """`translate(exc)` when one of the rules knows the error, else None (an error nobody has seen yet:
    the caller may rather let it through with its traceback)."""
    text = plain(str(exc))
    for rule in _RULES:
        matches = list(rule.pattern.finditer(text))
        if matches:
            bucket = _bucket(path, text)
            innermost = matches[-1].group(0)  # the chain reads outermost cause first
            reason = rule.reason.format(bucket=bucket, match=innermost)
            hint = rule.hint.format(bucket=bucket, path=path)
            message = f"{action} at {path}: {reason}: {hint}"
            if rule.credentials:
                return CredentialsRejected(message)
            return FatalError(message) if rule.fatal else TransientError(message)
    return None


def transient_reason(exc: BaseException) -> str | None:
    """One line for an error a retry may clear: our TransientError, or a storage error (OSError) of a
    delta-rs call that the rules call transient (an outage, throttling). None for anything else: a bug, or
    something a person must fix, which keeps its traceback. The loops log with this, so that an outage is
    one line per attempt wherever in a cycle the store stopped answering."""
    if isinstance(exc, TransientError):
        return str(exc)
    if isinstance(exc, OSError):
        known = recognised(exc, action="a storage request failed", path="the store")
        if isinstance(known, TransientError):
            return str(known)
    return None


def expected_reason(exc: BaseException) -> str | None:
    """`transient_reason`, or one line for credentials AWS rejected (CredentialsRejected, or a delta-rs
    storage error the rules read as such): a side task (maintenance, a periodic backfill) that meets
    rotated keys says so in one line and tries again later, while the run loop resolves the credential
    chain again at its own next request. None for anything else, which keeps its traceback."""
    reason = transient_reason(exc)
    if reason is not None:
        return reason
    if isinstance(exc, OSError):
        exc = recognised(exc, action="a storage request failed", path="the store") or exc
    return str(exc) if isinstance(exc, CredentialsRejected) else None


def log_side_failure(logger: logging.Logger, what: str, retry_in: float, exc: BaseException) -> None:
    """A side task's failure (`<what>, next attempt in Ns`): one line for an expected error (the
    traceback at DEBUG), the traceback for anything else. Call it inside the `except` block."""
    reason = expected_reason(exc)
    if reason is not None:
        logger.warning("%s, next attempt in %.0fs: %s", what, retry_in, reason)
        logger.debug("%s: the traceback", what, exc_info=True)
    else:
        logger.exception("%s, next attempt in %.0fs", what, retry_in)
