"""Kill ingest at any instant — between batches, after the executors wrote Parquet, after the error
table was written — and resume: every line still lands exactly once, in append and in merge mode (with
record deletes too) and through a SQL transform (hypothesis over limits and kill points; the pure
planner has its own, much larger property test).

A kill is a step that raises `Killed` (a BaseException, as uncatchable for the cycle as SIGKILL) right
after the real step ran; the cycle itself is the production one, built by `build_ingest`."""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3events.ingest.cycle import Ingest
from s3events.ingest.service import IngestPorts, build_ingest, ingest_ports
from tests.conftest import read_table, write_metadata_version
from tests.integration.test_ingest import jsonl, settings_for, target_conf

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

FILES = 8
CRASH_POINTS = ("between_batches", "after_executors_wrote", "after_error_table")


@pytest.fixture
def shared_stack(make_stack, s3):
    """One metadata version of FILES files (3 lines each, one malformed, one with a field the declared
    schema lacks). Function-scoped fixtures are created once per test function, so every hypothesis
    example shares it (hence the health check)."""
    stack = make_stack()
    keys = [f"crash/{i:02d}.json" for i in range(FILES)]
    for i, key in enumerate(keys):
        body = jsonl([{"file": i, "n": 0}, {"file": i, "n": 1, "extra": i}]) + b"{not json\n"
        s3.put_object(Bucket=stack.bucket, Key=key, Body=body)
    write_metadata_version(stack, keys, s3)
    return stack


# Merge mode: the tasks' written rows are committed as they are when their keys are new.
# A transformed batch: parsed rows held by Spark, transformed, written; a kill leaves only uncommitted files.
# Rescue: the field the schema lacks lands in the rescued column of its row (a Python pass over its file).
MODES = {
    "rescue": {"schema__evolution": "rescue"},
    "append": {},
    "merge": {"mode": "merge", "record__key": "file,n"},
    "transform": {"transform__sql": "SELECT file, n, n * 10 AS tenfold FROM src WHERE file IS NOT NULL"},
}


@pytest.mark.parametrize("mode", sorted(MODES))
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    max_files=st.integers(min_value=2, max_value=5),
    kills=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(CRASH_POINTS)), min_size=1, max_size=2),
)
def test_ingest_killed_at_any_point_resumes_exactly_once(shared_stack, spark, mode, max_files, kills):
    target = tempfile.mkdtemp(prefix="crash-target-")
    conf = settings_for(
        shared_stack,
        {
            "c": target_conf(
                "c",
                target,
                "json",
                schema="file BIGINT, n BIGINT",
                max__files__per__batch=max_files,
                **MODES[mode],
            )
        },
    )
    _run_with_kills(conf, spark, kills)

    rows = read_table(target)
    assert Counter((r["file"], r["n"]) for r in rows) == Counter(
        {(i, n): 1 for i in range(FILES) for n in (0, 1)}
    )
    if mode == "rescue":
        rescued = {(r["file"], r["n"]): r["_rescued_data"] for r in rows}
        assert rescued == {
            (i, n): json.dumps({"extra": i}, separators=(",", ":")) if n else None
            for i in range(FILES)
            for n in (0, 1)
        }
    errors = read_table(target + "_errors")
    assert Counter(e["_source_file"] for e in errors) == Counter(
        {f"s3://{shared_stack.bucket}/crash/{i:02d}.json": 1 for i in range(FILES)}
    )


CDC_FILES = 4


def cdc_stack(make_stack: Any, s3: Any, spark: Any, conf_of: Any) -> Any:
    """A target that started before any change data (missing.checkpoint.strategy=latest: it reads the
    change feed in version order), then CDC_FILES files inserting keys (file, 0) and (file, 1), then
    CDC_FILES files deleting (file, 0), updating (file, 1) and deleting the never-held (file, 2), each
    of those with a malformed line (so the inserts take the fast path and the deletes the line path)."""
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="seed/none.json", Body=b"")
    write_metadata_version(stack, ["seed/none.json"], s3)
    build_ingest(conf_of(stack), spark=spark).run_once()  # records where the target starts
    for version, (changes, tail) in enumerate(
        [([(0, 1, "I"), (1, 1, "I")], b""), ([(0, 2, "D"), (1, 2, "U"), (2, 2, "D")], b"{not json\n")]
    ):
        keys = [f"cdc/{version}/{i:02d}.json" for i in range(CDC_FILES)]
        for i, key in enumerate(keys):
            rows = [{"file": i, "n": n, "seq": seq, "Op": op} for n, seq, op in changes]
            s3.put_object(Bucket=stack.bucket, Key=key, Body=jsonl(rows) + tail)
        write_metadata_version(stack, keys, s3)
    return stack


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    max_files=st.integers(min_value=2, max_value=5),
    kills=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(CRASH_POINTS)), min_size=1, max_size=2),
)
def test_ingest_of_deletes_killed_at_any_point_resumes_exactly_once(make_stack, s3, spark, max_files, kills):
    target = tempfile.mkdtemp(prefix="crash-cdc-")

    def conf_of(stack: Any) -> Any:
        return settings_for(
            stack,
            {
                "c": target_conf(
                    "c",
                    target,
                    "json",
                    key__prefix="cdc/",
                    schema="file BIGINT, n BIGINT, seq BIGINT, Op STRING",
                    max__files__per__batch=max_files,
                    mode="merge",
                    record__key="file,n",
                    ordering__field="seq",
                    delete__field="Op",
                    delete__values="D",
                )
            },
            ingest__missing__checkpoint__strategy="latest",
        )

    stack = cdc_stack(make_stack, s3, spark, conf_of)
    _run_with_kills(conf_of(stack), spark, kills)

    rows = read_table(target)
    assert Counter((r["file"], r["n"], r["seq"]) for r in rows) == Counter(
        {(i, 1, 2): 1 for i in range(CDC_FILES)}
    )
    errors = read_table(target + "_errors")
    assert Counter(e["_source_file"] for e in errors) == Counter(
        {f"s3://{stack.bucket}/cdc/1/{i:02d}.json": 1 for i in range(CDC_FILES)}
    )


def _run_with_kills(conf: Any, spark: Any, kills: list[tuple[int, str]]) -> None:
    """Ingest killed as `kills` say (batches run first, then the kill point), then a survivor to the end."""
    for batches_before_kill, point in kills:
        ports = ingest_ports(conf, spark=spark)
        ingest = Ingest(ports.feed, ports.targets, read=ports.read)
        for _ in range(batches_before_kill):
            ingest.run_once()
        if point != "between_batches":  # the next batch runs until the kill
            killed = _killed_at(point, ports)
            with contextlib.suppress(Killed):
                Ingest(killed.feed, killed.targets, read=killed.read).run_once()
        # the process is gone; only what was committed survives
    survivor = build_ingest(conf, spark=spark)
    while not survivor.run_once().idle:
        pass


class Killed(BaseException):
    """The process dies here: nothing after this point runs."""


class _KilledAfter:
    """A port whose `method` runs for real, then the process is killed."""

    def __init__(self, inner: Any, method: str) -> None:
        self._inner = inner
        self._method = method

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name != self._method:
            return attribute

        def then_killed(*args: Any, **kwargs: Any) -> Any:
            attribute(*args, **kwargs)
            raise Killed(name)

        return then_killed

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__getattr__("__call__")(*args, **kwargs)


def _killed_at(point: str, ports: IngestPorts) -> IngestPorts:
    """The same ports, one of which kills the process right after its real step at `point`."""
    (target,) = ports.targets
    if point == "after_executors_wrote":  # Parquet files exist, referenced by no commit
        return replace(ports, read=_KilledAfter(ports.read, "__call__"))
    assert point == "after_error_table"  # the error rows are committed, the data is not
    return replace(ports, targets=[replace(target, errors=_KilledAfter(target.errors, "record"))])
