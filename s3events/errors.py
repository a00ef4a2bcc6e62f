"""The whole exception hierarchy. Adapters decide what is retryable and what is fatal."""

from __future__ import annotations


class S3EventsError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigError(S3EventsError):
    """A configuration mistake found at start-up. The message names the key, the value and what is allowed."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class FatalError(S3EventsError):
    """A condition a person has to fix (access denied, missing queue, no Java). Stops the process."""


class CredentialsRejected(FatalError):
    """AWS refused the credentials themselves (an unknown or deleted access key, a wrong secret, an expired
    token). Fatal unless the credential chain, resolved again at once, yields other credentials: then the
    run loop retries with them (`runloop.run_loop`, `infra.aws.renew_credentials`).

    `generation`: which of the process's credentials signed the rejected request, when known (boto3 calls):
    another thread may have renewed them since, and then a retry uses other credentials already."""

    def __init__(self, message: str, *, generation: int | None = None) -> None:
        super().__init__(message)
        self.generation = generation


class TransientError(S3EventsError):
    """A condition that retrying later may clear (throttling, a dropped connection, a commit conflict)."""


class CommitConflict(TransientError):
    """Another writer committed first; re-read the table state and try again."""


class CheckpointError(S3EventsError):
    """A target's checkpoint would move backwards; committing it would ingest files a second time."""
