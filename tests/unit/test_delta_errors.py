"""delta-rs / object_store errors → one actionable line, fatal or transient. The texts are real delta-rs
1.x messages (colour codes included) as raised against a local S3 endpoint and a local file system."""

from __future__ import annotations

import pytest

from s3events.errors import CredentialsRejected, FatalError, TransientError
from s3events.infra.delta_errors import plain, recognised, translate

ARROW = "\x1b[31m↳\x1b[0m"
NO_SUCH_BUCKET = (
    "Kernel error -> Generic S3 error\n"
    f"          {ARROW} Error performing list request\n"
    f"           {ARROW} Error performing GET http://127.0.0.1:35499/nobucket?list-type=2&prefix=t%2F_delta_log"
    "%2F in 3.669728ms - Server returned non-2xx status code\n"
    f"            {ARROW} 404 Not Found\n"
    f"             {ARROW} <?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
    "<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message>"
    "<BucketName>nobucket</BucketName><RequestId>F4wPtbOnTm403x</RequestId><HostId>9Gjj/403+A=</HostId></Error>\n"
)
REFUSED = (
    "Kernel error -> Generic S3 error\n"
    f"          {ARROW} Error performing GET http://127.0.0.1:1/b/t/_delta_log/_last_checkpoint in "
    "2.902963001s, after 10 retries, max_retries\n"
    f"           {ARROW} 10, retry_timeout\n"
    f"            {ARROW} 180s  - HTTP error\n"
    f"             {ARROW} error sending request\n"
    f"              {ARROW} client error (Connect)\n"
    f"               {ARROW} tcp connect error\n"
    f"                {ARROW} Connection refused (os error 111)\n"
)
UNDER_A_FILE = (
    "Could not create local directory: /srv/blocker/x\n"
    'Error: Os { code: 20, kind: NotADirectory, message: "Not a directory" }'
)


def _one_line_without_colours(message: str) -> None:
    assert "\x1b" not in message
    assert "\n" not in message


def test_plain_strips_colour_codes_and_joins_the_chain_of_causes_on_one_line():
    text = plain(REFUSED)
    _one_line_without_colours(text)
    assert text.startswith("Kernel error -> Generic S3 error <- Error performing GET")
    assert text.endswith("Connection refused (os error 111)")
    assert "↳" not in text


def test_missing_bucket_is_fatal_and_names_the_bucket_the_table_and_what_to_check():
    error = translate(OSError(NO_SUCH_BUCKET), action="cannot open the metadata table", path="s3://nobucket/t")
    assert isinstance(error, FatalError)
    message = str(error)
    _one_line_without_colours(message)
    assert message.startswith("cannot open the metadata table at s3://nobucket/t: the bucket nobucket ")
    assert "does not exist" in message and "check the bucket name" in message
    assert "RequestId" not in message


def test_random_request_ids_in_an_error_body_do_not_read_as_a_status_code():
    body = NO_SUCH_BUCKET.replace("NoSuchBucket", "SomethingOdd").replace("404 Not Found", "409 Conflict")
    error = translate(OSError(body), action="cannot open the table", path="s3://b/t")
    assert "access denied" not in str(error)


def test_refused_connection_is_transient_and_points_at_the_endpoint():
    error = translate(OSError(REFUSED), action="cannot open the target table", path="s3://b/t")
    assert isinstance(error, TransientError)
    _one_line_without_colours(str(error))
    assert "Connection refused" in str(error) and "s3events.aws.endpoint.url" in str(error)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Generic S3 error: 403 Forbidden <Code>AccessDenied</Code>", "access denied (AccessDenied)"),
        ("Generic S3 error: Server returned 403 Forbidden", "access denied (403 Forbidden)"),
        ("Generic S3 error: <Code>InvalidAccessKeyId</Code>", "the credentials were rejected"),
        ("Generic S3 error: <Code>NoSuchBucket</Code>", "the bucket b does not exist"),
        (UNDER_A_FILE, "a parent of the path is a file"),
        ("Os { code: 13, kind: PermissionDenied, message: \"Permission denied\" }", "permission denied"),
        # An immutable directory (chattr +i) refuses even root, with EPERM rather than EACCES.
        ("Unable to open file /t/p.parquet#1: Operation not permitted (os error 1)", "permission denied"),
        ("Generic S3 error: 404 Not Found", "not found (404)"),
    ],
)
def test_problems_a_person_must_fix_are_fatal(text, reason):
    error = translate(OSError(text), action="cannot create the errors table", path="s3://b/t")
    assert isinstance(error, FatalError)
    assert reason in str(error)
    assert str(error).startswith("cannot create the errors table at s3://b/t: ")
    # Only rejected credentials may be retried, when the credential chain yields other ones.
    assert isinstance(error, CredentialsRejected) == (reason == "the credentials were rejected")


@pytest.mark.parametrize(
    "code", ["InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken"]
)
def test_credentials_delta_rs_was_refused_with_are_a_credentials_rejection(code):
    error = translate(OSError(f"Generic S3 error: <Code>{code}</Code>"), action="cannot open", path="s3://b/t")
    assert isinstance(error, CredentialsRejected)
    assert str(error) == (
        f"cannot open at s3://b/t: the credentials were rejected ({code}): check the AWS credential chain "
        "(environment, profile, instance or container role)"
    )


@pytest.mark.parametrize(
    "text",
    [
        "Generic S3 error: 503 Service Unavailable <Code>SlowDown</Code>",
        "Generic S3 error: <Code>ThrottlingException</Code>",
        "Generic S3 error: 500 Internal Server Error <Code>InternalError</Code>",
        "error sending request: operation timed out",
        "dns error: failed to lookup address information: Name or service not known",
    ],
)
def test_problems_that_may_clear_by_themselves_are_transient(text):
    error = translate(OSError(text), action="cannot open the table", path="s3://b/t")
    assert isinstance(error, TransientError)


@pytest.mark.parametrize(
    "text",
    [  # as delta-rs 1.x raised them from load_cdf through the fault proxy (a DeltaError, not an OSError)
        "External error: Generic DeltaTable error: Error interacting with object store: Generic S3 error: "
        "Error performing list request: Error performing GET http://127.0.0.1:45743/b?list-type=2&prefix=t"
        "%2F_delta_log%2F in 181.9s, after 5 retries, max_retries: 10, retry_timeout: 180s  - HTTP error: "
        "error sending request",
        "External error: Generic DeltaTable error: Error interacting with object store: Generic S3 error: "
        "Error getting list response body: HTTP error: request or response body error",
        "Generic S3 error: Error performing GET http://127.0.0.1:1/b/t/_delta_log/00000000000000000001.json "
        "in 2.1s, after 10 retries - error decoding response body",
    ],
)
def test_a_store_that_stopped_answering_after_object_stores_retries_is_transient_even_from_a_table_call(text):
    class DeltaError(Exception):  # stands in for deltalake's: not an OSError
        pass

    error = translate(DeltaError(text), action="cannot read the metadata table's changes", path="s3://b/t")
    assert isinstance(error, TransientError)
    assert "cannot reach the storage endpoint" in str(error)


def test_unknown_io_error_is_transient_and_unknown_table_error_is_fatal_both_on_one_line():
    class DeltaError(Exception):  # stands in for deltalake's: classification goes by text and OSError
        pass

    colourful = "Kernel error -> something\n  \x1b[31m↳\x1b[0m new"
    io = translate(OSError(colourful), action="cannot open", path="/t")
    broken = DeltaError("Generic delta kernel error: bad log\nmore")
    table = translate(broken, action="cannot open", path="/t")
    assert isinstance(io, TransientError) and isinstance(table, FatalError)
    for error in (io, table):
        _one_line_without_colours(str(error))
    assert str(table) == "cannot open at /t: Generic delta kernel error: bad log <- more"


def test_a_long_unknown_message_is_shortened():
    error = translate(OSError("x" * 5000), action="cannot open", path="/t")
    assert len(str(error)) < 400 and str(error).endswith("...")


def test_around_a_commit_a_lost_race_is_a_conflict_and_a_storage_error_is_translated():
    from deltalake.exceptions import CommitFailedError

    from s3events.errors import CommitConflict
    from s3events.infra.delta import committing

    with pytest.raises(CommitConflict), committing("s3://lake/t"):
        raise CommitFailedError("Transaction failed: version already exists")
    with pytest.raises(TransientError) as transient, committing("s3://lake/t", kind="metadata"):
        raise OSError(REFUSED)
    assert str(transient.value).startswith("cannot commit to the metadata table at s3://lake/t: cannot reach")
    with pytest.raises(FatalError) as fatal, committing("s3://nobucket/t"):
        raise OSError(NO_SUCH_BUCKET)
    _one_line_without_colours(str(fatal.value))


def test_an_error_no_rule_knows_is_not_recognised():
    assert recognised(OSError("something nobody has seen"), action="cannot commit", path="/t") is None
    assert isinstance(recognised(OSError(REFUSED), action="cannot commit", path="/t"), TransientError)


def test_a_loop_logs_an_outage_in_one_line_wherever_the_store_stopped_answering():
    from s3events.infra.delta_errors import transient_reason

    reason = transient_reason(OSError(REFUSED))
    assert reason is not None and "cannot reach the storage endpoint" in reason and "\n" not in reason
    assert transient_reason(TransientError("throttled")) == "throttled"
    assert transient_reason(OSError(NO_SUCH_BUCKET)) is None  # a person must act: keep the traceback
    assert transient_reason(KeyError("a bug")) is None


def test_a_side_task_meeting_rotated_keys_says_so_in_one_line_and_a_person_s_problem_keeps_its_traceback():
    from s3events.infra.delta_errors import expected_reason

    rejected = OSError("Generic S3 error: <Code>InvalidAccessKeyId</Code>")  # delta-rs, before translation
    reason = expected_reason(rejected)
    assert reason is not None and "the credentials were rejected (InvalidAccessKeyId)" in reason
    assert expected_reason(CredentialsRejected("refused")) == "refused"
    assert expected_reason(OSError(REFUSED)) is not None  # an outage, as transient_reason
    assert expected_reason(OSError(NO_SUCH_BUCKET)) is None
    assert expected_reason(KeyError("a bug")) is None


class _UnreachableTable:
    """A DeltaTable opened before the endpoint went away: every read of the log fails as delta-rs does."""

    def version(self) -> int:
        return 3

    def transaction_version(self, app_id: str) -> int | None:
        raise OSError(REFUSED)

    def history(self, limit: int | None = None) -> list[dict[str, object]]:
        raise OSError(REFUSED)


def test_reading_checkpoints_during_an_outage_is_one_transient_line_naming_the_table(monkeypatch):
    from s3events.infra import delta_commit

    monkeypatch.setattr(delta_commit, "open_table", lambda path, options: _UnreachableTable())
    with pytest.raises(TransientError) as read:
        delta_commit.transaction_versions("s3://lake/t", ["ingest"], {})
    with pytest.raises(TransientError) as checked:
        delta_commit.check_transactions(_UnreachableTable(), "s3://lake/t", {"ingest": 2})  # type: ignore[arg-type]
    for error in (read.value, checked.value):
        _one_line_without_colours(str(error))
        assert str(error).startswith(
            "cannot read the app transactions of the Delta table at s3://lake/t: cannot reach the storage"
        )


def test_reading_back_a_landed_commit_during_an_outage_says_it_landed_and_names_the_table(monkeypatch):
    from s3events.infra import delta, delta_commit

    monkeypatch.setattr(delta, "open_table", lambda path, options, kind: _UnreachableTable())
    with pytest.raises(TransientError) as error:
        delta_commit._version_of(delta.TableHandle("s3://lake/t", dict), "commit-1")
    _one_line_without_colours(str(error.value))
    assert str(error.value).startswith(
        "committed, but cannot read back the version of the table at s3://lake/t: cannot reach the storage"
    )


def test_a_real_delta_rs_error_reading_checkpoints_names_the_table(monkeypatch, tmp_path):
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    from s3events.infra import delta_commit

    path = str(tmp_path / "t")
    properties = CommitProperties(app_transactions=[Transaction("ingest", 2)])
    write_deltalake(path, pa.table({"a": [1]}), commit_properties=properties)
    table = DeltaTable(path)
    log = tmp_path / "t" / "_delta_log"
    for entry in log.iterdir():
        entry.unlink()
    log.rmdir()
    log.write_text("")  # the log is gone after the table was opened: delta-rs reads it again
    monkeypatch.setattr(delta_commit, "open_table", lambda path, options: table)

    with pytest.raises(FatalError) as error:
        delta_commit.transaction_versions(path, ["ingest"], {})
    _one_line_without_colours(str(error.value))
    assert str(error.value).startswith(f"cannot read the app transactions of the Delta table at {path}: ")
