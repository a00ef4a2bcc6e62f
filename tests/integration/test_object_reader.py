"""Reading event-referenced objects the way executors do, against the moto_server process."""

from __future__ import annotations

import dataclasses
import gzip
import uuid
from datetime import UTC, datetime
from typing import Any

import botocore.exceptions
import pyarrow as pa
import pytest

from s3events.errors import FatalError
from s3events.infra import aws
from s3events.ingest.files.objects import (
    CHANGED,
    LINE_SCHEMA,
    NOT_FOUND,
    fetch,
    read_lines,
)
from s3events.ingest.model import FileRef

pytestmark = pytest.mark.integration

EVENT_TIME = datetime(2026, 5, 1, 12, 30, 45, 123456, tzinfo=UTC)


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"reader-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=name)
    return name


def put(s3: Any, bucket: str, key: str, body: bytes) -> FileRef:
    """Upload `body` and return the FileRef an event for that upload would produce."""
    response = s3.put_object(Bucket=bucket, Key=key, Body=body)
    return FileRef(
        bucket=bucket,
        key=key,
        etag=response["ETag"].strip('"'),
        version_id=response.get("VersionId"),
        size=len(body),
        event_time=EVENT_TIME,
        event_id=uuid.uuid4().hex,
        event_kind="created",
        commit_version=1,
    )


def lines_of(file: FileRef, options: aws.AwsOptions, **kwargs: Any) -> pa.Table:
    batches = list(read_lines(file, options, **kwargs))
    for batch in batches:
        assert batch.schema.equals(LINE_SCHEMA)
    return pa.Table.from_batches(batches, schema=LINE_SCHEMA)


def values(table: pa.Table) -> list[tuple[int | None, str | None]]:
    return list(zip(table["_source_line"].to_pylist(), table["value"].to_pylist(), strict=True))


def only_error(table: pa.Table) -> str:
    assert table.num_rows == 1
    row = table.to_pylist()[0]
    assert row["_source_line"] is None and row["value"] is None
    return str(row["_error"])


def test_plain_lines_carry_lineage_and_keep_empty_lines(s3, bucket, aws_options):
    file = put(s3, bucket, "logs/a.jsonl", b'{"a": 1}\n\n{"a": 3}\n')
    table = lines_of(file, aws_options)
    assert values(table) == [(1, '{"a": 1}'), (2, ""), (3, '{"a": 3}')]
    assert set(table["_source_file"].to_pylist()) == {f"s3://{bucket}/logs/a.jsonl"}
    assert set(table["_source_etag"].to_pylist()) == {file.etag}
    assert set(table["_event_time"].to_pylist()) == {EVENT_TIME}
    assert table["_error"].null_count == table.num_rows


def test_an_object_larger_than_its_event_states_is_not_fetched_whole_but_the_line_path_reads_it(
    s3, bucket, aws_options
):
    body = b'{"a": 1}\n{"a": 2}\n'
    stated = put(s3, bucket, "stated.json", body)
    understated = dataclasses.replace(stated, size=len(body) - 1)  # a forged or corrupt event

    assert fetch(stated, aws_options).data == body
    refused = fetch(understated, aws_options)
    assert refused.data is None and refused.reason == "18 bytes, more than its event states (17)"
    # The fast path leaves it to the line path, which lands every line all the same.
    assert lines_of(understated, aws_options).column("_source_line").to_pylist() == [1, 2]


def test_crlf_line_endings_are_stripped_once(s3, bucket, aws_options):
    file = put(s3, bucket, "crlf.csv", b"a,b\r\n1,2\r\nlone\r\r\nmixed\n")
    assert values(lines_of(file, aws_options)) == [(1, "a,b"), (2, "1,2"), (3, "lone\r"), (4, "mixed")]


def test_last_line_without_trailing_newline_is_still_a_line(s3, bucket, aws_options):
    file = put(s3, bucket, "no-newline.txt", b"first\nsecond")
    assert values(lines_of(file, aws_options)) == [(1, "first"), (2, "second")]


def test_empty_file_yields_no_rows(s3, bucket, aws_options):
    file = put(s3, bucket, "empty.txt", b"")
    assert list(read_lines(file, aws_options)) == []


def test_byte_order_mark_is_not_part_of_the_first_line(s3, bucket, aws_options):
    file = put(s3, bucket, "bom.csv", "\ufeffh1,h2\n1,2\n".encode())
    assert values(lines_of(file, aws_options)) == [(1, "h1,h2"), (2, "1,2")]


def test_gzip_object_is_decompressed_including_concatenated_members(s3, bucket, aws_options):
    body = gzip.compress(b"one\ntwo\n") + gzip.compress(b"three\n")
    file = put(s3, bucket, "data/part-0.json.GZ", body)
    assert values(lines_of(file, aws_options)) == [(1, "one"), (2, "two"), (3, "three")]


def test_zstd_object_is_decompressed_with_pyarrow_codec(s3, bucket, aws_options):
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as out:
        out.write(b"".join(f"row {i}\n".encode() for i in range(1, 10001)))
    file = put(s3, bucket, "data/part-1.jsonl.zst", sink.getvalue().to_pybytes())
    table = lines_of(file, aws_options, batch_rows=4096)
    assert table.num_rows == 10000
    assert values(table)[-1] == (10000, "row 10000")


def test_truncated_gzip_ends_with_an_error_row_naming_the_problem(s3, bucket, aws_options):
    body = gzip.compress(b"".join(f"line {i}\n".encode() for i in range(5000)))
    file = put(s3, bucket, "broken.gz", body[: len(body) // 2])
    table = lines_of(file, aws_options, chunk_bytes=1024)
    last = table.to_pylist()[-1]
    assert last["_source_line"] is None and last["value"] is None
    assert "corrupt gzip data" in last["_error"]
    good = table.filter(pa.compute.is_valid(table["_source_line"]))
    assert good["_source_line"].to_pylist() == list(range(1, good.num_rows + 1))  # no partial line


def test_garbage_in_a_gz_key_is_one_error_row(s3, bucket, aws_options):
    file = put(s3, bucket, "not-really.gz", b"plain text, not gzip\n" * 10)
    assert "corrupt gzip data" in only_error(lines_of(file, aws_options))


def test_invalid_utf8_line_is_kept_with_an_error_and_neighbours_are_fine(s3, bucket, aws_options):
    file = put(s3, bucket, "latin1.txt", b"ok one\ncaf\xe9 au lait\nok three\n")
    rows = lines_of(file, aws_options).to_pylist()
    assert [(r["_source_line"], r["value"]) for r in rows] == [
        (1, "ok one"),
        (2, "caf\ufffd au lait"),
        (3, "ok three"),
    ]
    assert rows[0]["_error"] is None and rows[2]["_error"] is None
    assert rows[1]["_error"].startswith("line is not valid UTF-8")


def test_header_skip_keeps_true_line_numbers(s3, bucket, aws_options):
    file = put(s3, bucket, "with-header.csv", b"id,name\n1,a\n2,b\n")
    assert values(lines_of(file, aws_options, skip_header=True)) == [(2, "1,a"), (3, "2,b")]


def test_header_only_file_with_header_skip_yields_no_rows(s3, bucket, aws_options):
    file = put(s3, bucket, "header-only.csv", b"id,name\n")
    assert list(read_lines(file, aws_options, skip_header=True)) == []


@pytest.mark.parametrize("chunk_bytes", [1, 2, 3, 4, 5, 6, 7, 9, 64])
def test_lines_split_across_chunk_boundaries_are_rejoined(s3, bucket, aws_options, chunk_bytes):
    # With 5-byte chunks "abc\r|\ndefg|h\nij\r|\n\nk": a boundary falls between \r and \n, right
    # after a newline, and inside lines; batch_rows=2 also splits the numbering across batches.
    body = b"abc\r\ndefgh\nij\r\n\nk"
    file = put(s3, bucket, f"chunks-{chunk_bytes}.txt", body)
    table = lines_of(file, aws_options, chunk_bytes=chunk_bytes, batch_rows=2)
    assert values(table) == [(1, "abc"), (2, "defgh"), (3, "ij"), (4, ""), (5, "k")]


def test_gzip_lines_split_across_small_decompressed_chunks(s3, bucket, aws_options):
    text = b"".join(f"{i:05d} {'x' * (i % 37)}\n".encode() for i in range(3000))
    file = put(s3, bucket, "small-chunks.gz", gzip.compress(text))
    table = lines_of(file, aws_options, chunk_bytes=97, batch_rows=1000)
    assert table["value"].to_pylist() == text.decode().splitlines()
    assert table["_source_line"].to_pylist() == list(range(1, 3001))


@pytest.mark.parametrize(
    "key",
    [
        "with space/and more spaces.txt",
        "plus+sign/a+b.txt",
        "percent%25/100%.txt",
        "ünïcødé/日本語/файл.txt",
        "equals/dt=2026-11-22/x=y&z.txt",
    ],
)
def test_keys_needing_url_encoding_are_read_and_named_verbatim(s3, bucket, aws_options, key):
    file = put(s3, bucket, key, b"hello\n")
    table = lines_of(file, aws_options)
    assert values(table) == [(1, "hello")]
    assert table["_source_file"].to_pylist() == [f"s3://{bucket}/{key}"]


def test_object_deleted_before_ingest_is_one_404_error_row(s3, bucket, aws_options):
    file = put(s3, bucket, "gone.txt", b"soon gone\n")
    s3.delete_object(Bucket=bucket, Key="gone.txt")
    assert only_error(lines_of(file, aws_options)) == NOT_FOUND


def test_object_overwritten_after_the_event_is_one_412_error_row(s3, bucket, aws_options):
    old = put(s3, bucket, "overwritten.txt", b"old content\n")
    put(s3, bucket, "overwritten.txt", b"new content\n")
    table = lines_of(old, aws_options)
    assert only_error(table) == CHANGED
    assert table["_source_etag"].to_pylist() == [old.etag]


def test_versioned_object_reads_the_events_version_after_an_overwrite(s3, bucket, aws_options):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    old = put(s3, bucket, "versioned.txt", b"version one\n")
    put(s3, bucket, "versioned.txt", b"version two\n")
    assert old.version_id
    assert values(lines_of(old, aws_options)) == [(1, "version one")]


# --- transient and per-object failures, injected around the real client ---------------------------


class _BreakingBody:
    """A response body that fails once after `after` bytes, like a reset connection."""

    def __init__(self, body: Any, after: int) -> None:
        self._body, self._left = body, after

    def read(self, amt: int | None = None) -> bytes:
        if self._left <= 0:
            raise botocore.exceptions.ResponseStreamingError(error="connection reset by peer")
        data: bytes = self._body.read(min(amt or self._left, self._left))
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._body.close()


class _FlakyS3:
    """Wraps a real client: plays the scripted failures on get_object, then behaves."""

    def __init__(self, real: Any, script: list[Any]) -> None:
        self._real, self._script = real, script
        self.calls: list[dict[str, Any]] = []

    def get_object(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        step = self._script.pop(0) if self._script else None
        if isinstance(step, Exception):
            raise step
        response = self._real.get_object(**kwargs)
        if isinstance(step, int):
            response["Body"] = _BreakingBody(response["Body"], after=step)
        return response


def client_error(code: str, status: int) -> botocore.exceptions.ClientError:
    return botocore.exceptions.ClientError(
        {
            "Error": {"Code": code, "Message": f"injected {code}"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        "GetObject",
    )


@pytest.fixture
def flaky(monkeypatch: pytest.MonkeyPatch, aws_options: aws.AwsOptions) -> Any:
    real_client = aws.client

    def install(*script: Any) -> _FlakyS3:
        fake = _FlakyS3(real_client(aws_options, "s3"), list(script))
        monkeypatch.setattr(aws, "client", lambda *args, **kwargs: fake)
        return fake

    return install


def test_throttling_is_retried_and_the_read_succeeds(s3, bucket, aws_options, flaky):
    file = put(s3, bucket, "throttled.txt", b"a\nb\n")
    fake = flaky(client_error("SlowDown", 503))
    assert values(lines_of(file, aws_options)) == [(1, "a"), (2, "b")]
    assert len(fake.calls) == 2


def test_connection_reset_mid_object_resumes_with_range_under_the_same_etag(s3, bucket, aws_options, flaky):
    body = b"".join(f"line {i}\n".encode() for i in range(1, 2001))
    file = put(s3, bucket, "reset.txt", body)
    fake = flaky(1000)  # the first response breaks after 1000 bytes
    table = lines_of(file, aws_options, chunk_bytes=256)
    assert table["value"].to_pylist() == [f"line {i}" for i in range(1, 2001)]
    assert table["_error"].null_count == table.num_rows
    resumed = fake.calls[1]
    assert resumed["Range"] == "bytes=1000-"
    assert resumed["IfMatch"] == f'"{file.etag}"'


def test_access_denied_is_one_error_row_for_that_object(s3, bucket, aws_options, flaky):
    file = put(s3, bucket, "secret.txt", b"x\n")
    flaky(client_error("AccessDenied", 403))
    assert only_error(lines_of(file, aws_options)).startswith("access denied (403)")


def test_transient_errors_that_outlast_the_retries_become_an_error_row(s3, bucket, aws_options, flaky):
    file = put(s3, bucket, "unavailable.txt", b"x\n")
    fake = flaky(*[client_error("ServiceUnavailable", 503)] * 10)
    assert only_error(lines_of(file, aws_options, attempts=2)).startswith("gave up after 2 attempts")
    assert len(fake.calls) == 2


def test_invalid_credentials_fail_the_task_instead_of_one_object(s3, bucket, aws_options, flaky):
    file = put(s3, bucket, "any.txt", b"x\n")
    flaky(client_error("InvalidAccessKeyId", 403))
    with pytest.raises(FatalError, match="access key is not valid"):
        list(read_lines(file, aws_options))


