"""The metadata table's identity buckets (real delta-rs tables, moto_server, local Spark): new tables are
bucketed, crowded buckets are compacted alone, and a table of the unpartitioned layout of schema version 1
is migrated by `s3events migrate` while ingest lands every line once across the rewrite."""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from s3events.dev.fault_proxy import proxy_process
from s3events.events.model import ObjectEvent
from s3events.events.record import EventRecord
from s3events.infra import aws, delta
from s3events.infra.delta_commit import commit_files
from s3events.infra.parquet_files import write_data_file
from s3events.ingest.feed import MetadataFeed
from s3events.maintenance.model import MaintenanceOptions, TableToMaintain
from s3events.maintenance.table import compact_if_crowded
from s3events.metadata.migrate import migrate
from s3events.metadata.schema import ID_BUCKET, METADATA_SCHEMA, id_bucket
from s3events.metadata.table import MetadataTable
from tests.conftest import read_table, run_cli
from tests.integration.test_ingest import target_conf
from tests.integration.test_maintenance import (
    MAINTENANCE,
    conf_args,
    every_line_once,
    ingest,
    lines_of,
    put_and_capture_each,
    settings_of,
)
from tests.legacy_layout import create_legacy_metadata_table

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)
WINDOW = timedelta(days=15)


def event_in_bucket(bucket: str, n: int) -> EventRecord:
    """The n-th created event whose event id falls in identity bucket `bucket` (found by trying keys)."""
    found = 0
    for attempt in itertools.count():
        event = ObjectEvent(
            bucket="landing",
            key=f"in/{bucket}/{attempt}.json",
            event_name="ObjectCreated:Put",
            event_time=NOW,
            size=1,
            etag=hashlib.md5(str(attempt).encode()).hexdigest(),
        )
        if id_bucket(event.event_id) == bucket:
            if found == n:
                return EventRecord(event=event, source="sqs", captured_at=NOW, message_id=f"m-{attempt}")
            found += 1
    raise AssertionError("unreachable")


def bucket_files(path: str) -> Counter[str]:
    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True))
    return Counter(actions.column(f"partition.{ID_BUCKET}").to_pylist())


def event_ids(path: str) -> Counter[str]:
    return Counter(r["event_id"] for r in read_table(path))


def test_a_new_metadata_table_is_bucketed_by_the_identity_and_drops_duplicates_across_buckets(tmp_path):
    path = str(tmp_path / "metadata")
    table = MetadataTable(path, storage_options={}, dedupe_window=WINDOW)
    for n in range(4):  # files in a bucket the commits below do not touch
        table.commit([event_in_bucket("2a", n)], custom_metadata={})
    events = [event_in_bucket(b, 0) for b in ("00", "1f", "3f")]

    first = table.commit(events, custom_metadata={})
    assert all(r[ID_BUCKET] == id_bucket(r["event_id"]) for r in read_table(path))
    elsewhere = list(Path(path).glob(f"{ID_BUCKET}=2a/*.parquet"))
    for f in elsewhere:  # the next commit's duplicate check must read only its buckets' files
        f.unlink()
    again = table.commit([*events, event_in_bucket("1f", 1)], custom_metadata={})

    assert len(elsewhere) == 4
    assert (first.written, again.written, again.duplicates) == (3, 1, 3)
    meta = DeltaTable(path).metadata()
    assert meta.partition_columns == [ID_BUCKET]
    assert meta.configuration[delta.SCHEMA_VERSION_PROPERTY] == "2"
    assert bucket_files(path) == Counter({"00": 1, "1f": 2, "3f": 1, "2a": 4})


def test_only_a_crowded_bucket_is_compacted_and_the_change_feed_does_not_see_it(tmp_path):
    path = str(tmp_path / "metadata")
    table = MetadataTable(path, storage_options={}, dedupe_window=WINDOW)
    for n in range(5):  # five one-event commits into bucket "2b", one each into two other buckets
        table.commit([event_in_bucket("2b", n)], custom_metadata={})
    for bucket in ("01", "3e"):
        table.commit([event_in_bucket(bucket, 0)], custom_metadata={})
    rows = event_ids(path)
    before = int(DeltaTable(path).version())
    options = MaintenanceOptions(target_file_bytes=1 << 20)
    entry = TableToMaintain("metadata", path)

    untouched = compact_if_crowded(entry, {}, options, small_files=6, now=NOW)
    report = compact_if_crowded(entry, {}, options, small_files=5, now=NOW)

    assert untouched is None
    assert report is not None and (report.compacted_from, report.compacted_into) == (5, 1)
    assert bucket_files(path) == Counter({"2b": 1, "01": 1, "3e": 1})
    assert event_ids(path) == rows
    feed = MetadataFeed(path, storage_options={})
    assert feed.changes_after(before, up_to=feed.latest_version() or 0).rows == []


@pytest.mark.process
def test_migrating_an_old_layout_table_keeps_every_line_once_and_the_duplicate_check(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    create_legacy_metadata_table(stack.metadata_path)
    target = str(tmp_path / "t")
    conf = target_conf("t", target, "json", max__files__per__batch=3)
    settings = settings_of(stack, {"t": conf})
    put_and_capture_each(stack, s3, settings, range(6))
    ingest(settings, spark)  # files 0-5 landed
    put_and_capture_each(stack, s3, settings, range(6, 9))  # captured under the old layout, not ingested
    args = conf_args(stack, ingest__targets="t", **conf, **MAINTENANCE)

    busy = run_cli(["migrate", *args])
    dry = run_cli(["migrate", *args, "--dry-run"])
    done = run_cli(["migrate", *args, "--force"])
    again = run_cli(["migrate", *args])

    assert busy.returncode == 3 and "stop capture and backfill" in busy.stderr, busy.stderr
    assert dry.returncode == 0 and "would migrate: 9 rows" in dry.stdout, dry.stdout + dry.stderr
    assert done.returncode == 0 and "migrated: 9 rows" in done.stdout, done.stdout + done.stderr
    assert again.returncode == 0 and "already in identity buckets" in again.stdout, again.stdout
    assert DeltaTable(stack.metadata_path).metadata().partition_columns == [ID_BUCKET]

    put_and_capture_each(stack, s3, settings, range(9, 12))  # capture writes the new layout
    ingest(settings, spark)
    # An event captured before the migration, delivered again: still found by the duplicate check.
    (old,) = [r for r in read_table(stack.metadata_path) if r["key"] == "in/000.json"]
    redelivered = EventRecord(
        event=ObjectEvent(
            bucket=old["bucket"],
            key=old["key"],
            event_name=old["event_name"],
            event_time=old["event_time"],
            size=old["size"],
            etag=old["etag"],
        ),
        source="sqs",
        captured_at=datetime.now(UTC),
        message_id="redelivered",
    )
    result = MetadataTable(stack.metadata_path, storage_options={}, dedupe_window=WINDOW).commit(
        [redelivered], custom_metadata={}
    )

    assert (result.written, result.duplicates) == (0, 1)
    assert lines_of(target) == every_line_once(range(12))
    rows = read_table(stack.metadata_path)
    assert all(r[ID_BUCKET] == id_bucket(r["event_id"]) for r in rows)
    assert max(Counter(r["event_id"] for r in rows).values()) == 1


def add_unbucketed(path: str, record: EventRecord, scratch: str) -> None:
    """Commit `record`'s row with no identity bucket: what a writer of the old layout leaves when its
    commit lands between the migration's read and its overwrite (delta-rs does not make them conflict)."""
    MetadataTable(scratch, storage_options={}).commit([record], custom_metadata={})
    row = DeltaTable(scratch).to_pyarrow_table().drop_columns([ID_BUCKET])
    written = write_data_file(
        row.to_batches(),
        table_uri=path,
        schema=METADATA_SCHEMA,
        options=aws.AwsOptions(),
        partition_values={ID_BUCKET: None},
    )
    assert written is not None
    commit_files(
        path, [written], schema=METADATA_SCHEMA, partition_by=[ID_BUCKET], storage_options={}, transactions={}
    )


def test_rows_a_racing_writer_added_without_a_bucket_are_bucketed_and_not_ingested_again(tmp_path):
    path = str(tmp_path / "metadata")
    create_legacy_metadata_table(path)
    first, late = event_in_bucket("10", 0), event_in_bucket("20", 0)
    MetadataTable(path, storage_options={}).commit([first], custom_metadata={})
    migrate(path, {}, now=NOW + timedelta(hours=1))
    add_unbucketed(path, late, str(tmp_path / "scratch"))
    assert bucket_files(path)[None] == 1
    feed = MetadataFeed(path, storage_options={})
    before = feed.latest_version() or 0

    report = migrate(path, {}, now=NOW + timedelta(hours=1))

    assert report.stragglers == 1 and None not in bucket_files(path)
    assert feed.changes_after(before, up_to=feed.latest_version() or 0).rows == []
    assert event_ids(path) == Counter({first.event.event_id: 1, late.event.event_id: 1})


def test_a_commit_lists_the_log_from_the_last_checkpoint_never_the_whole_log(endpoint, s3):
    s3.create_bucket(Bucket="long-log")
    with proxy_process(endpoint.url) as proxy:
        options = aws.delta_storage_options(aws.AwsOptions(region="us-east-1", endpoint_url=proxy.url))
        path = "s3://long-log/metadata"
        table = MetadataTable(path, storage_options=options, dedupe_window=WINDOW)
        table.commit([event_in_bucket("00", 0)], custom_metadata={})
        DeltaTable(path, storage_options=options).alter.set_table_properties(
            {"delta.checkpointInterval": "5"}
        )
        for n in range(1, 23):  # checkpoints at versions 5, 10, 15, 20 (delta-rs, after the commit)
            table.commit([event_in_bucket("00", n)], custom_metadata={})
        log_entries = len(s3.list_objects_v2(Bucket="long-log", Prefix="metadata/_delta_log/")["Contents"])
        proxy.reset()

        table.commit([event_in_bucket("00", 23)], custom_metadata={})
        stats = proxy.stats()

    assert log_entries > 25
    # The LISTs of one commit return the entries after the last checkpoint (and the commit's own), not
    # the whole log: delta-rs's expired-log cleanup after each commit would list all of it.
    assert 0 < stats["listed_keys"] < log_entries, (stats, log_entries)


def test_an_old_layout_table_is_served_with_a_warning_and_a_migration_killed_midway_finishes_when_rerun(
    tmp_path, caplog
):
    path = str(tmp_path / "metadata")
    create_legacy_metadata_table(path)
    table = MetadataTable(path, storage_options={}, dedupe_window=WINDOW)
    with caplog.at_level("WARNING", logger="s3events.metadata.table"):
        first = table.commit([event_in_bucket("33", 0)], custom_metadata={})
    assert first.written == 1 and DeltaTable(path).metadata().partition_columns == []
    assert any("s3events migrate" in r.getMessage() for r in caplog.records)
    # A migration killed after its first commit (the schema version) and before the rewrite:
    DeltaTable(path).alter.set_table_properties(
        {delta.SCHEMA_VERSION_PROPERTY: "2"}, raise_if_not_exists=False
    )
    again = table.commit([event_in_bucket("33", 0), event_in_bucket("04", 0)], custom_metadata={})
    assert (again.written, again.duplicates) == (1, 1)  # still served by its layout, not by the property

    report = migrate(path, {}, now=NOW + timedelta(hours=1))

    assert report.state == "migrated" and report.rows == 2
    assert bucket_files(path) == Counter({"33": 1, "04": 1})
    assert table.commit([event_in_bucket("04", 0)], custom_metadata={}).duplicates == 1


def big_events_in_bucket(bucket: str, count: int) -> list[EventRecord]:
    """`count` created events in identity bucket `bucket` with long, incompressible keys (~500 bytes)."""
    found = []
    for attempt in itertools.count():
        key = f"in/{bucket}/{attempt}-" + hashlib.sha512(str(attempt).encode()).hexdigest() * 4
        etag = f"{attempt:032x}"
        raw = "\x00".join(("landing", key, etag, "created"))
        if id_bucket(hashlib.sha256(raw.encode()).hexdigest()) != bucket:
            continue
        event = ObjectEvent(
            bucket="landing", key=key, event_name="ObjectCreated:Put", event_time=NOW, size=1, etag=etag
        )
        found.append(EventRecord(event=event, source="sqs", captured_at=NOW, message_id=f"m-{attempt}"))
        if len(found) == count:
            return found
    raise AssertionError("unreachable")


def test_a_bucket_file_that_reached_its_size_is_not_rewritten_with_each_compaction(tmp_path):
    path = str(tmp_path / "metadata")
    table = MetadataTable(path, storage_options={}, dedupe_window=WINDOW)
    table.commit(big_events_in_bucket("2b", 5000), custom_metadata={})  # one file over 1 MiB
    (big,) = DeltaTable(path).file_uris()
    for n in range(3):
        table.commit([event_in_bucket("2b", n)], custom_metadata={})
    assert bucket_files(path) == Counter({"2b": 4})

    # Configured towards 128 MiB, as by default: the bucket still compacts towards BUCKET_FILE_BYTES.
    report = compact_if_crowded(
        TableToMaintain("metadata", path), {}, MaintenanceOptions(), small_files=3, now=NOW
    )

    assert report is not None and (report.compacted_from, report.compacted_into) == (3, 1)
    assert big in DeltaTable(path).file_uris() and bucket_files(path) == Counter({"2b": 2})
