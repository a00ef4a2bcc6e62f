"""Kill ingest at any instant — between batches, after the executors wrote Parquet, after the error
table was written — and resume: every line still lands exactly once (hypothesis over limits and kill
points; the pure planner has its own, much larger property test)."""

from __future__ import annotations

import tempfile
from collections import Counter
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3events.adapters.spark_ingest import run_batch
from s3events.ingest.plan import plan
from s3events.ingest.service import Ingest
from tests.conftest import read_table, write_metadata_version
from tests.integration.test_ingest import jsonl, settings_for, target_conf

pytestmark = pytest.mark.integration

FILES = 8
CRASH_POINTS = ("between_batches", "after_executors_wrote", "after_error_table")


@pytest.fixture
def shared_stack(make_stack, s3):
    """One metadata version of FILES files (3 lines each, one malformed). Function-scoped fixtures are
    created once per test function, so every hypothesis example shares it (hence the health check)."""
    stack = make_stack()
    keys = [f"crash/{i:02d}.json" for i in range(FILES)]
    for i, key in enumerate(keys):
        body = jsonl([{"file": i, "n": 0}, {"file": i, "n": 1}]) + b"{not json\n"
        s3.put_object(Bucket=stack.bucket, Key=key, Body=body)
    write_metadata_version(stack, keys, s3)
    return stack


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    max_files=st.integers(min_value=2, max_value=5),
    kills=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(CRASH_POINTS)), min_size=1, max_size=2),
)
def test_ingest_killed_at_any_point_resumes_exactly_once(shared_stack, spark, max_files, kills):
    target = tempfile.mkdtemp(prefix="crash-target-")
    conf = settings_for(
        shared_stack,
        {
            "c": target_conf(
                "c", target, "json", schema="file BIGINT, n BIGINT", max__files__per__batch=max_files
            )
        },
    )
    for batches_before_kill, point in kills:
        ingest = Ingest(conf, spark=spark)
        for _ in range(batches_before_kill):
            ingest.run_once()
        _crash_inside_next_batch(ingest, point, spark)
        del ingest  # the process is gone; only what was committed survives
    survivor = Ingest(conf, spark=spark)
    while not survivor.run_once().idle:
        pass

    rows = read_table(target)
    assert Counter((r["file"], r["n"]) for r in rows) == Counter(
        {(i, n): 1 for i in range(FILES) for n in (0, 1)}
    )
    errors = read_table(target + "_errors")
    assert Counter(e["_source_file"] for e in errors) == Counter(
        {f"s3://{shared_stack.bucket}/crash/{i:02d}.json": 1 for i in range(FILES)}
    )


def _crash_inside_next_batch(ingest: Ingest, point: str, spark) -> None:
    """Run the next batch's steps up to `point`, then stop as a SIGKILL would (no commit)."""
    if point == "between_batches":
        return
    (state,) = ingest._targets
    latest = ingest._feed.latest_version()
    start = ingest._position(state, latest)
    changes = ingest._feed.changes_after(start.version, up_to=latest)
    rows = [r for r in changes.rows if r.commit_version > start.version]
    batch = plan(start, rows, route=state.spec.route, limits=state.spec.limits, latest_version=latest)
    if batch is None:
        return
    output = run_batch(
        spark,
        batch,
        state.spec,
        existing_schema=state.table.schema(),
        aws=ingest._aws,
        ingested_at=datetime.now(UTC),
    )
    assert output.files  # Parquet files exist in the table directory, referenced by no commit
    if point == "after_error_table":
        state.errors.record(output.errors, end=batch.end)
