"""Hostile input at volume. Malformed messages mixed into good ones: each becomes one quarantine row
with its reason and the good events land. Corrupt and hostile files for ingest (a truncated gzip, a zstd
bomb, invalid UTF-8, deeply nested JSON, NUL bytes, a very long line, a CSV with very many columns):
each becomes error rows with its reason, or lands when it is valid, and the good files land beside them.

CI runs a small size; `S3EVENTS_LONG_RUN=1` runs the issue's sizes (thousands of messages, a 4 GiB bomb,
a 200 MiB line, 20,000 columns)."""

from __future__ import annotations

import gzip
import json
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from s3events.capture.service import run_capture
from s3events.config import load_settings
from s3events.ingest.files.lines import DEFAULT_MAX_LINE_BYTES
from s3events.ingest.service import run_ingest
from tests.conftest import read_table
from tests.integration.test_ingest import capture, jsonl, settings_for, target_conf

LONG = os.environ.get("S3EVENTS_LONG_RUN") == "1"
# The full size takes longer than the suite's 300 s per test: 5,000 PUTs through moto's notifications alone
# outlast it on a shared 2-vCPU machine.
pytestmark = [pytest.mark.integration, *([pytest.mark.timeout(3600)] if LONG else [])]
GOOD_MESSAGES, BAD_PER_KIND = (5000, 200) if LONG else (150, 6)
# Captured in rounds at full size: moto's SQS calls take time in proportion to the queue's depth (3 s for
# one GetQueueAttributes at 6,000 messages), so one capture of the whole queue would take hours.
ROUNDS = 10 if LONG else 1
BOMB_BYTES = (4 << 30) if LONG else (320 << 20)  # zeros, no newline: one line longer than any limit
LONG_LINE_BYTES = (200 << 20) if LONG else (8 << 20)
CSV_COLUMNS = 20_000 if LONG else 2_000
NESTING = 100_000


# ------------------------------------------------------------------------------------ poison messages


def _bad_messages() -> list[str]:
    """One body per kind of malformed message."""
    return [
        "not json {",
        json.dumps({"Records": "not a list"}),
        json.dumps({"something": "else"}),
        json.dumps({"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "s3": {}}]}),
        json.dumps({"Type": "Notification", "Message": "not json either"}),
        "[" * NESTING + "]" * NESTING,  # deeper than any JSON parser recurses (and too large)
        "[" * 1020 + "]" * 1020,  # deeper than Python's recursion limit, within the size limit
        json.dumps({"Records": [{"s3": {"object": {"key": "x" * 3000}}}]}),  # over the size limit
    ]


def test_malformed_messages_mixed_into_good_ones_become_one_quarantine_row_each(make_stack, s3, sqs):
    stack = make_stack()
    bad = _bad_messages()
    good_keys = [f"good/{n}.json" for n in range(GOOD_MESSAGES)]
    sent: dict[str, str] = {}  # message id -> body
    conf = stack.conf(source__message__max__bytes=2048, source__queue__long__poll__wait=0)
    settings = load_settings(None, conf)
    started = time.monotonic()

    for round_ in range(ROUNDS):  # each round: good and malformed messages interleaved, then one capture
        def send_bad() -> None:
            for _ in range(BAD_PER_KIND // ROUNDS):
                for body in bad:
                    sent[sqs.send_message(QueueUrl=stack.queue_url, MessageBody=body)["MessageId"]] = body

        sender = threading.Thread(target=send_bad)
        sender.start()
        try:
            for key in good_keys[round_::ROUNDS]:  # the notifications interleave with the poison in the queue
                s3.put_object(Bucket=stack.bucket, Key=key, Body=b'{"a": 1}\n')
        finally:
            sender.join()

        run_capture(settings, once=True)

    assert Counter(r["key"] for r in read_table(stack.metadata_path)) == Counter(good_keys)
    quarantined = read_table(stack.metadata_path + "_quarantine")
    by_id = Counter(q["message_id"] for q in quarantined)
    assert by_id == Counter(sent.keys()), "each malformed message exactly one quarantine row"
    for row in quarantined:
        assert row["reason"], row
    reasons = Counter(row["reason"].split(":")[0][:60] for row in quarantined)
    print(f"\n{len(good_keys) + len(sent)} messages ({len(good_keys)} good, {len(sent)} malformed) in "
          f"{ROUNDS} round(s), {time.monotonic() - started:.0f}s: {len(good_keys)} events landed, "
          f"{len(quarantined)} quarantine rows: {dict(reasons)}")


# ------------------------------------------------------------------------------------- hostile files


def _put_stream(s3: Any, bucket: str, key: str, path: Path) -> None:
    with path.open("rb") as body:
        s3.put_object(Bucket=bucket, Key=key, Body=body)


def _zstd_bomb(path: Path, size: int) -> None:
    """`size` zero bytes, zstd-compressed (a few dozen KiB), written without holding them in memory."""
    chunk = bytes(16 << 20)
    with pa.output_stream(str(path), compression="zstd") as out:
        for _ in range(size // len(chunk)):
            out.write(chunk)


def _peak_rss_of_descendants(stop: threading.Event, peaks: dict[str, int]) -> None:
    """Sample /proc: the peak RSS (VmHWM) of every process under this one, by kind (python worker, JVM)."""
    while not stop.wait(0.2):
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(int(entry.name))
        todo, seen = list(children.get(os.getpid(), [])), []
        while todo:
            pid = todo.pop()
            seen.append(pid)
            todo.extend(children.get(pid, []))
        for pid in seen:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            kind = "jvm" if b"java" in cmd.split(b"\0")[0] else "python worker" if b"pyspark" in cmd or \
                b"daemon" in cmd or b"worker" in cmd else "other"
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    peaks[kind] = max(peaks.get(kind, 0), int(line.split()[1]) << 10)


def test_corrupt_and_hostile_files_become_error_rows_with_reasons_and_the_rest_lands(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    good = [{"id": n, "v": f"value {n}"} for n in range(50)]
    s3.put_object(Bucket=stack.bucket, Key="j/good.json", Body=jsonl(good))
    s3.put_object(Bucket=stack.bucket, Key="j/good.json.gz", Body=gzip.compress(jsonl(good)))
    truncated = gzip.compress(jsonl([{"id": n, "v": "x" * 50} for n in range(2000)]))
    s3.put_object(Bucket=stack.bucket, Key="j/truncated.json.gz", Body=truncated[: len(truncated) // 2])
    bomb = tmp_path / "bomb.zst"
    _zstd_bomb(bomb, BOMB_BYTES)
    _put_stream(s3, stack.bucket, "j/bomb.json.zst", bomb)
    s3.put_object(Bucket=stack.bucket, Key="j/not-utf8.json",
                  Body=jsonl(good[:3]) + b'{"id": 100, "v": "\xff\xfe"}\n' + jsonl(good[3:5]))
    s3.put_object(Bucket=stack.bucket, Key="j/nested.json",
                  Body=jsonl(good[:2]) + ('{"id": 101, "v": ' + '{"a": ' * NESTING + "1" + "}" * NESTING
                                          + "}\n").encode() + jsonl(good[2:4]))
    s3.put_object(Bucket=stack.bucket, Key="j/nul.json",
                  Body=jsonl(good[:2]) + b'{"id": 102, "v": "a\x00b"}\n\x00\x00\x00\n' + jsonl(good[2:4]))
    long_line = tmp_path / "long.json"
    long_line.write_bytes(b'{"id": 103, "v": "' + b"y" * LONG_LINE_BYTES + b'"}\n' + jsonl(good[:2]))
    _put_stream(s3, stack.bucket, "j/long-line.json", long_line)
    header = ",".join(f"c{i}" for i in range(CSV_COLUMNS))
    wide = "\n".join([header, *(",".join(str(r * i) for i in range(CSV_COLUMNS)) for r in range(3))]) + "\n"
    s3.put_object(Bucket=stack.bucket, Key="c/wide.csv", Body=wide.encode())
    capture(stack)
    json_target, csv_target = str(tmp_path / "j"), str(tmp_path / "c")
    settings = settings_for(stack, {
        "j": target_conf("j", json_target, "json", key__prefix="j/", schema="id BIGINT, v STRING"),
        "c": target_conf("c", csv_target, "csv", key__prefix="c/", reader__options="header=true"),
    })

    peaks: dict[str, int] = {}
    stop = threading.Event()
    sampler = threading.Thread(target=_peak_rss_of_descendants, args=(stop, peaks), daemon=True)
    sampler.start()
    started = time.monotonic()
    try:
        totals = run_ingest(settings, once=True, spark=spark)
    finally:
        stop.set()
        sampler.join()
    elapsed = time.monotonic() - started
    assert not totals.failed, totals.failed

    rows = Counter((r["_source_file"].rsplit("/", 1)[-1], r["id"]) for r in read_table(json_target))
    errors = read_table(json_target + "_errors")
    by_file: dict[str, list[str]] = {}
    for e in errors:
        by_file.setdefault(e["_source_file"].rsplit("/", 1)[-1], []).append(str(e["error"])[:120])
    landed = Counter(name for name, _ in rows)
    # The good files land whole; the good lines of a file with a bad line land beside its error row.
    assert landed["good.json"] == landed["good.json.gz"] == len(good)
    assert landed["not-utf8.json"] == 5 and len(by_file["not-utf8.json"]) == 1, by_file
    assert landed["nested.json"] == 4 and len(by_file["nested.json"]) == 1, by_file
    assert landed["nul.json"] == 4 and 1 <= len(by_file["nul.json"]) <= 2, by_file
    # A broken or oversized compressed stream: the file contributes no rows, one error row says why.
    assert landed["truncated.json.gz"] == 0 and len(by_file["truncated.json.gz"]) == 1, by_file
    assert landed["bomb.json.zst"] == 0 and len(by_file["bomb.json.zst"]) == 1, by_file
    if LONG_LINE_BYTES < DEFAULT_MAX_LINE_BYTES:  # a long but valid line is data
        assert landed["long-line.json"] == 3, (landed, by_file.get("long-line.json"))
    else:  # longer than the line path takes (and over the fast path's size): one error row says so
        assert landed["long-line.json"] == 0 and len(by_file["long-line.json"]) == 1, by_file
        assert "longer than" in by_file["long-line.json"][0], by_file
    assert all(reason for reasons in by_file.values() for reason in reasons)
    # Alone in its target (a CSV file of other columns in the same batch turns its rows into error rows:
    # the inferred CSV schema is the first file's), every row lands with every column.
    wide_rows = read_table(csv_target)
    assert len(wide_rows) == 3 and len(wide_rows[0]) >= CSV_COLUMNS, len(wide_rows)
    mib = {kind: round(peak / (1 << 20)) for kind, peak in peaks.items()}
    print(f"\ningest of hostile files in {elapsed:.0f}s; error rows by file {by_file}; peak RSS (MiB) of "
          f"the processes under the test, sampled every 0.2 s: {mib} (bomb {BOMB_BYTES >> 20} MiB of zeros, "
          f"line {LONG_LINE_BYTES >> 20} MiB, {CSV_COLUMNS} columns; line limit "
          f"{DEFAULT_MAX_LINE_BYTES >> 20} MiB)")


def test_csv_files_whose_headers_differ_keep_their_own_columns_in_one_batch(make_stack, s3, spark, tmp_path):
    # from_csv maps fields by position: each file must be parsed by its own header, not the batch's first.
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="c/1-ab.csv", Body=b"a,b\n1,2\n")
    s3.put_object(Bucket=stack.bucket, Key="c/2-ba.csv", Body=b"b,a\n20,10\n")  # the same columns, swapped
    s3.put_object(Bucket=stack.bucket, Key="c/3-ac.csv", Body=b"a,c\n7,x\n")  # another column
    capture(stack)
    target = str(tmp_path / "c")
    settings = settings_for(stack, {"c": target_conf("c", target, "csv", reader__options="header=true")})

    totals = run_ingest(settings, once=True, spark=spark)

    assert not totals.failed, totals.failed
    rows = sorted((r["a"], r["b"], r["c"]) for r in read_table(target))
    assert rows == [(1, 2, None), (7, None, "x"), (10, 20, None)], rows
