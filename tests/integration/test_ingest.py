"""Ingest against moto_server, local Spark and real delta-rs tables (issue must-shows 1, 3-7)."""

from __future__ import annotations

import gzip
import io
import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from s3events.capture.service import run_capture
from s3events.config import load_settings
from s3events.errors import CheckpointError
from s3events.ingest.model import Checkpoint
from s3events.ingest.service import build_ingest, run_ingest
from s3events.status.gather import gather_status
from tests.conftest import Stack, put_objects, read_table, write_metadata_version

pytestmark = pytest.mark.integration


def target_conf(name: str, path: str, fmt: str, **extra: object) -> dict[str, object]:
    conf: dict[str, object] = {f"ingest__target__{name}__path": path, f"ingest__target__{name}__format": fmt}
    conf.update({f"ingest__target__{name}__{k}": v for k, v in extra.items()})
    return conf


def settings_for(stack: Stack, targets: dict[str, dict[str, object]], **extra: object) -> Any:
    conf: dict[str, object] = {"ingest__targets": ",".join(targets)}
    for t in targets.values():
        conf.update(t)
    conf.update(extra)
    settings = load_settings(None, stack.conf(**conf))
    settings.validate_for("ingest")
    return settings


def capture(stack: Stack) -> None:
    settings = load_settings(None, stack.conf())
    run_capture(settings, once=True)


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def test_every_format_lands_exactly_once_with_lineage(make_stack, s3, spark, tmp_path):
    stack = make_stack()
    json_key = "in/json/day one/orders+1 %.json"
    s3.put_object(Bucket=stack.bucket, Key=json_key, Body=jsonl([{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]))
    gz_key = "in/json/ünï/orders 2.json.gz"
    s3.put_object(Bucket=stack.bucket, Key=gz_key, Body=gzip.compress(jsonl([{"id": 3, "v": "c"}])))
    s3.put_object(Bucket=stack.bucket, Key="in/csv/a b.csv", Body=b"id,name\n1,x\n2,y\n")
    s3.put_object(Bucket=stack.bucket, Key="in/text/log 1.txt", Body=b"first line\nsecond line\n")
    sink = io.BytesIO()
    pq.write_table(pa.table({"id": [10, 11, 12], "name": ["p", "q", "r"]}), sink)
    s3.put_object(Bucket=stack.bucket, Key="in/parquet/part=1/f 1.parquet", Body=sink.getvalue())
    capture(stack)
    targets = {
        "j": target_conf("j", str(tmp_path / "j"), "json", key__prefix="in/json/"),
        "c": target_conf("c", str(tmp_path / "c"), "csv", key__prefix="in/csv/"),
        "t": target_conf("t", str(tmp_path / "t"), "text", key__prefix="in/text/"),
        "p": target_conf("p", str(tmp_path / "p"), "parquet", key__prefix="in/parquet/"),
    }
    settings = settings_for(stack, targets)

    run_ingest(settings, once=True, spark=spark)
    run_ingest(settings, once=True, spark=spark)  # a second run finds nothing new

    j = sorted(read_table(str(tmp_path / "j")), key=lambda r: r["id"])
    assert [(r["id"], r["v"]) for r in j] == [(1, "a"), (2, "b"), (3, "c")]
    assert [r["_source_file"] for r in j] == [f"s3://{stack.bucket}/{json_key}"] * 2 + [
        f"s3://{stack.bucket}/{gz_key}"
    ]
    assert [r["_source_line"] for r in j] == [1, 2, 1]
    assert all(r["_source_etag"] and r["_event_time"] and r["_ingested_at"] for r in j)
    c = sorted(read_table(str(tmp_path / "c")), key=lambda r: r["id"])
    assert [(r["id"], r["name"], r["_source_line"]) for r in c] == [(1, "x", 2), (2, "y", 3)]
    t = sorted(read_table(str(tmp_path / "t")), key=lambda r: r["_source_line"])
    assert [r["value"] for r in t] == ["first line", "second line"]
    p = sorted(read_table(str(tmp_path / "p")), key=lambda r: r["id"])
    assert [(r["id"], r["name"], r["_source_line"]) for r in p] == [(10, "p", 0), (11, "q", 1), (12, "r", 2)]


def test_one_version_of_500_files_in_batches_of_37_lands_every_line_once_across_restarts(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    keys = [f"bulk/{i:03d}.json" for i in range(500)]
    bodies = {key: jsonl([{"file": i, "n": 0}, {"file": i, "n": 1}]) for i, key in enumerate(keys)}
    put_objects(s3, stack.bucket, bodies)
    write_metadata_version(stack, keys, s3)
    target = str(tmp_path / "bulk")
    settings = settings_for(stack, {"b": target_conf("b", target, "json", max__files__per__batch=37)})

    first = build_ingest(settings, spark=spark)
    for _ in range(5):  # five batches, then the "process" is gone (its in-memory state with it)
        assert len(first.run_once().batches) == 1
    del first
    second = build_ingest(settings, spark=spark)
    batches = 5
    while not (cycle := second.run_once()).idle:
        batches += len(cycle.batches)

    rows = read_table(target)
    assert batches == 14  # ceil(500 / 37)
    assert Counter((r["file"], r["n"]) for r in rows) == Counter(
        {(i, n): 1 for i in range(500) for n in (0, 1)}
    )
    from deltalake import DeltaTable

    table = DeltaTable(target)
    assert table.transaction_version("s3events.ingest/b") == 1  # metadata version 1 fully ingested


def test_merge_mode_keeps_the_latest_ordering_value_and_replay_adds_nothing(make_stack, s3, spark, tmp_path):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="m/2.json", Body=jsonl([{"id": 1, "ts": 2, "v": "new"}]))
    s3.put_object(
        Bucket=stack.bucket,
        Key="m/1.json",
        Body=jsonl([{"id": 1, "ts": 1, "v": "old"}, {"id": 2, "ts": 1, "v": "x"}]),
    )
    capture(stack)
    target = str(tmp_path / "m")
    conf = target_conf(
        "m", target, "json", mode="merge", record__key="id", ordering__field="ts", max__files__per__batch=1
    )
    settings = settings_for(stack, {"m": conf})

    run_ingest(settings, once=True, spark=spark)
    rows = {r["id"]: r["v"] for r in read_table(target)}
    assert rows == {1: "new", 2: "x"}
    # Replaying from the start (a fresh target checkpoint cannot be forced backwards, so replay the
    # same files through a second target of the same table contents): nothing changes.
    version_before = _version(target)
    run_ingest(settings, once=True, spark=spark)
    assert _version(target) == version_before
    assert len(read_table(target)) == 2


def _version(path: str) -> int:
    from deltalake import DeltaTable

    return DeltaTable(path).version()


def test_malformed_json_lines_go_to_the_error_table_with_file_and_line(make_stack, s3, spark, tmp_path):
    stack = make_stack()
    lines = []
    bad_lines = {}
    for n in range(1, 101):
        if n % 10 == 0:
            raw = "{broken json" if n % 20 else '{"id": "not-a-number"}'
            if n == 30:  # a NUL byte inside a string: JSON-ish, but not JSON
                raw = '{"id": 30, "note": "a\x00b"}'
            bad_lines[n] = raw
            lines.append(raw)
        else:
            lines.append(json.dumps({"id": n}))
    s3.put_object(Bucket=stack.bucket, Key="bad/mixed.json", Body=("\n".join(lines) + "\n").encode())
    capture(stack)
    target = str(tmp_path / "t")
    settings = settings_for(stack, {"t": target_conf("t", target, "json", schema="id BIGINT")})

    run_ingest(settings, once=True, spark=spark)

    good = read_table(target)
    assert sorted(r["id"] for r in good) == [n for n in range(1, 101) if n % 10]
    errors = read_table(target + "_errors")
    assert {e["_source_line"]: e["raw"] for e in errors} == bad_lines
    assert all(e["_source_file"] == f"s3://{stack.bucket}/bad/mixed.json" for e in errors)
    reasons = {e["_source_line"]: e["error"] for e in errors}
    assert reasons[10] == "not valid JSON" and "type conflict" in reasons[20]
    assert reasons[30] == (
        "not valid JSON: an unescaped control character U+0000 in a string at column 22 "
        "(JSON needs it escaped, as \\u0000)"
    )


def test_two_targets_progress_independently_and_a_failing_one_does_not_stop_the_other(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="a/1.json", Body=jsonl([{"x": 1}]))
    s3.put_object(Bucket=stack.bucket, Key="b/1.json", Body=jsonl([{"y": 1}]))
    capture(stack)
    blocker = tmp_path / "file-in-the-way"
    blocker.write_text("not a directory")
    settings = settings_for(
        stack,
        {
            "a": target_conf("a", str(tmp_path / "a"), "json", key__prefix="a/"),
            "b": target_conf("b", str(blocker / "b"), "json", key__prefix="b/"),
        },
    )

    totals = run_ingest(settings, once=True, spark=spark)

    assert [r["x"] for r in read_table(str(tmp_path / "a"))] == [1]
    assert set(totals.failed) == {"b"}
    s3.put_object(Bucket=stack.bucket, Key="a/2.json", Body=jsonl([{"x": 2}]))
    capture(stack)
    run_ingest(settings, once=True, spark=spark, targets=("a",))
    assert sorted(r["x"] for r in read_table(str(tmp_path / "a"))) == [1, 2]


def test_explicit_checkpoint_is_honoured_and_never_moves_backwards(make_stack, s3, spark, tmp_path):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="c/1.json", Body=jsonl([{"x": 1}]))
    capture(stack)  # metadata version 1
    s3.put_object(Bucket=stack.bucket, Key="c/2.json", Body=jsonl([{"x": 2}]))
    capture(stack)  # metadata version 2
    target = str(tmp_path / "c")
    settings = settings_for(stack, {"c": target_conf("c", target, "json")})

    run_ingest(settings, once=True, start_at=1, spark=spark)  # skip version 1
    assert [r["x"] for r in read_table(target)] == [2]
    with pytest.raises(CheckpointError, match="backwards"):
        run_ingest(settings, once=True, start_at=0, spark=spark)


def test_new_column_evolves_the_schema_and_a_type_conflict_goes_to_errors(make_stack, s3, spark, tmp_path):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="e/1.json", Body=jsonl([{"id": 1}]))
    capture(stack)
    target = str(tmp_path / "e")
    settings = settings_for(stack, {"e": target_conf("e", target, "json")})
    run_ingest(settings, once=True, spark=spark)
    s3.put_object(
        Bucket=stack.bucket, Key="e/2.json", Body=jsonl([{"id": 2, "extra": "new"}, {"id": "three"}])
    )
    capture(stack)

    run_ingest(settings, once=True, spark=spark)

    rows = sorted(read_table(target), key=lambda r: r["id"])
    assert [(r["id"], r.get("extra")) for r in rows] == [(1, None), (2, "new")]
    errors = read_table(target + "_errors")
    assert [(e["_source_line"], e["raw"]) for e in errors] == [(2, '{"id": "three"}')]


def test_object_deleted_before_ingest_is_skipped_and_recorded(make_stack, s3, spark, tmp_path):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="g/kept.json", Body=jsonl([{"x": 1}]))
    s3.put_object(Bucket=stack.bucket, Key="g/gone.json", Body=jsonl([{"x": 2}]))
    capture(stack)
    s3.delete_object(Bucket=stack.bucket, Key="g/gone.json")
    capture(stack)  # the removal event is recorded; on.object.removed=ignore leaves it be
    target = str(tmp_path / "g")
    settings = settings_for(stack, {"g": target_conf("g", target, "json")})

    totals = run_ingest(settings, once=True, spark=spark)

    assert [r["x"] for r in read_table(target)] == [1]
    errors = read_table(target + "_errors")
    assert [(e["_source_file"], e["_source_line"]) for e in errors] == [
        (f"s3://{stack.bucket}/g/gone.json", None)
    ]
    assert "404" in errors[0]["error"] and not totals.failed


def test_removed_object_rows_are_deleted_and_a_recreation_is_kept(make_stack, s3, spark, tmp_path):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="r/keep.json", Body=jsonl([{"x": 1}]))
    s3.put_object(Bucket=stack.bucket, Key="r/drop.json", Body=jsonl([{"x": 2}, {"x": 3}]))
    capture(stack)
    target = str(tmp_path / "r")
    settings = settings_for(stack, {"r": target_conf("r", target, "json", on__object__removed="delete")})
    run_ingest(settings, once=True, spark=spark)
    assert sorted(r["x"] for r in read_table(target)) == [1, 2, 3]

    s3.delete_object(Bucket=stack.bucket, Key="r/drop.json")
    capture(stack)
    run_ingest(settings, once=True, spark=spark)
    assert sorted(r["x"] for r in read_table(target)) == [1]

    s3.put_object(Bucket=stack.bucket, Key="r/drop.json", Body=jsonl([{"x": 4}]))
    capture(stack)
    run_ingest(settings, once=True, spark=spark)
    assert sorted(r["x"] for r in read_table(target)) == [1, 4]


def test_latest_strategy_start_is_durable_so_once_runs_and_restarts_ingest_what_came_after(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="l/old.json", Body=jsonl([{"x": "old"}]))
    capture(stack)  # metadata version 1: before the target's first run
    target = str(tmp_path / "l")
    settings = settings_for(
        stack, {"l": target_conf("l", target, "json")}, ingest__missing__checkpoint__strategy="latest"
    )

    first = run_ingest(settings, once=True, spark=spark)
    assert first.batches == 0
    s3.put_object(Bucket=stack.bucket, Key="l/new.json", Body=jsonl([{"x": "new"}]))
    capture(stack)  # metadata version 2: after the first run
    assert run_ingest(settings, once=True, spark=spark).rows == 1  # a later --once still starts after 1
    s3.put_object(Bucket=stack.bucket, Key="l/newer.json", Body=jsonl([{"x": "newer"}]))
    capture(stack)
    run_ingest(settings, once=True, spark=spark)

    assert sorted(r["x"] for r in read_table(target)) == ["new", "newer"]


def test_latest_strategy_start_is_recorded_at_the_first_run_and_status_shows_what_is_pending(
    make_stack, s3, tmp_path
):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="l/old.json", Body=jsonl([{"x": "old"}]))
    capture(stack)
    target = str(tmp_path / "l")
    settings = settings_for(
        stack, {"l": target_conf("l", target, "json")}, ingest__missing__checkpoint__strategy="latest"
    )
    assert build_ingest(settings).run_once().idle  # records its start at version 1; no Spark needed
    s3.put_object(Bucket=stack.bucket, Key="l/new.json", Body=jsonl([{"x": "new"}]))
    capture(stack)  # version 2, while no ingest runs

    (status,) = gather_status(settings, now=datetime.now(UTC)).targets
    assert status.checkpoint == Checkpoint(1, 0)
    assert status.lag_versions == 1 and status.oldest_pending_version == 2


@pytest.mark.parametrize("ingest_between", [False, True], ids=["one-capture", "ingest-between"])
def test_mirror_target_keeps_an_object_deleted_then_uploaded_again_with_the_same_bytes(
    make_stack, s3, spark, tmp_path, ingest_between
):
    stack = make_stack()
    body = jsonl([{"v": "c"}])
    s3.put_object(Bucket=stack.bucket, Key="in/c.json", Body=body)
    capture(stack)
    target = str(tmp_path / "m")
    settings = settings_for(stack, {"m": target_conf("m", target, "json", on__object__removed="delete")})
    run_ingest(settings, once=True, spark=spark)

    s3.delete_object(Bucket=stack.bucket, Key="in/c.json")
    if ingest_between:
        capture(stack)
        run_ingest(settings, once=True, spark=spark)
        assert read_table(target) == []
    s3.put_object(Bucket=stack.bucket, Key="in/c.json", Body=body)
    capture(stack)
    run_ingest(settings, once=True, spark=spark)

    assert [r["v"] for r in read_table(target)] == ["c"]


def test_mirror_target_replaces_the_rows_of_an_overwritten_object(make_stack, s3, spark, tmp_path):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="in/o.json", Body=jsonl([{"v": 1}, {"v": 2}]))
    capture(stack)
    target = str(tmp_path / "m")
    settings = settings_for(stack, {"m": target_conf("m", target, "json", on__object__removed="delete")})
    run_ingest(settings, once=True, spark=spark)
    s3.put_object(Bucket=stack.bucket, Key="in/o.json", Body=jsonl([{"v": 3}]))
    capture(stack)

    run_ingest(settings, once=True, spark=spark)

    assert [r["v"] for r in read_table(target)] == [3]


def test_appending_target_lands_an_object_once_across_removal_and_same_bytes_upload(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    body = jsonl([{"v": "c"}])
    s3.put_object(Bucket=stack.bucket, Key="in/c.json", Body=body)
    capture(stack)
    target = str(tmp_path / "a")
    settings = settings_for(stack, {"a": target_conf("a", target, "json")})
    run_ingest(settings, once=True, spark=spark)
    s3.delete_object(Bucket=stack.bucket, Key="in/c.json")
    s3.put_object(Bucket=stack.bucket, Key="in/c.json", Body=body)
    s3.put_object(Bucket=stack.bucket, Key="in/c.json", Body=body)
    capture(stack)

    run_ingest(settings, once=True, spark=spark)

    assert [r["v"] for r in read_table(target)] == ["c"]
