"""A transformed batch's filtered-row count is one number whichever route the batch took: the input
rows of `src` that gave no output row (a WHERE, a generator over an empty array; counted by lineage where
an input row can give several: a generator, UNION ALL), never the rows a MERGE's latest-row reduction
drops. The same files go to append and merge targets read on the driver's route (a batch of up to
`driver.read.max.bytes`), the executors' route and the line path, in one run; the metric, each batch
commit's info and `status` give every target the same count."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from s3events.ingest.notify.model import SUMMARY_KEY
from s3events.ingest.service import run_ingest
from s3events.process_metrics import Metrics
from s3events.status.gather import gather_status
from tests.conftest import read_table
from tests.integration.test_ingest import capture, jsonl, settings_for, target_conf
from tests.integration.test_metrics import scrape, value

pytestmark = pytest.mark.integration

# Filtered: the row without an id (WHERE) and the row whose tags are empty (explode gives it no row).
# Not filtered: the second (1, "a"), which a MERGE on (id, tag) reduces away.
FIRST = [
    {"id": 1, "qty": 1, "tags": ["a", "b"]},
    {"id": None, "qty": 2, "tags": ["a"]},
    {"id": 2, "qty": 3, "tags": []},
    {"id": 1, "qty": 4, "tags": ["a"]},
]
SECOND = [{"id": 3, "qty": 5, "tags": ["c"]}, {"id": 4, "qty": 6, "tags": ["d"]}]
FILTER = "SELECT id, qty, tags[0] AS tag FROM src WHERE id IS NOT NULL AND size(tags) > 0"
EXPLODE = "SELECT id, qty, tag FROM src LATERAL VIEW explode(tags) t AS tag WHERE id IS NOT NULL"
UNION = f"{FILTER} UNION ALL SELECT id, qty, 'z' AS tag FROM src WHERE id = 1"  # id 1's rows twice
# Evaluated in Arrow where the fast path reads an append target's files (the transform's Arrow route).
ARROW = "SELECT id, qty, CAST(id AS STRING) AS tag FROM src WHERE id IS NOT NULL AND qty <> 3"
ROUTES = {
    "driver": {"driver__read__max__bytes": str(1 << 30)},
    "executors": {"driver__read__max__bytes": "0"},
    "line": {"json__fast__path": "false"},
}
MODES = {"append": {}, "merge": {"mode": "merge", "record__key": "id,tag"}}


def _targets(tmp_path: Path, sql: str) -> dict[str, dict[str, object]]:
    return {
        f"{mode}_{route}": target_conf(
            f"{mode}_{route}", str(tmp_path / f"{mode}_{route}"), "json", transform__sql=sql, **extra, **more
        )
        for mode, extra in MODES.items()
        for route, more in ROUTES.items()
    }


def _commit_filtered(path: str) -> int:
    [summary] = [json.loads(c[SUMMARY_KEY]) for c in DeltaTable(path).history() if SUMMARY_KEY in c]
    return int(summary["rows_filtered"])


@pytest.mark.parametrize(
    ("sql", "appended", "merged"),
    [
        pytest.param(FILTER, 4, 3, id="a filter"),  # (1, "a") twice when appended, once merged
        pytest.param(EXPLODE, 5, 4, id="a filter and a generator"),
        pytest.param(UNION, 6, 4, id="a filter in branches of a union"),
        pytest.param(ARROW, 4, 3, id="a filter evaluated in Arrow"),
    ],
)
def test_every_route_counts_the_rows_the_transform_removed_and_not_the_merge_s_reduction(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path, sql: str, appended: int, merged: int, caplog: Any
):
    caplog.set_level(logging.INFO, logger="s3events.ingest.files.transform_arrow_route")
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="in/first.json", Body=jsonl(FIRST))
    s3.put_object(Bucket=stack.bucket, Key="in/second.json", Body=jsonl(SECOND))
    capture(stack)
    targets = _targets(tmp_path, sql)
    settings = settings_for(stack, targets)
    metrics = Metrics()

    totals = run_ingest(settings, once=True, spark=spark, metrics=metrics)

    assert not totals.failed
    got = scrape(metrics.registry)
    status = {t.name: t for t in gather_status(settings, now=datetime.now(UTC)).targets}
    for name in targets:
        path = str(tmp_path / name)
        rows = len(read_table(path))
        assert rows == (merged if name.startswith("merge") else appended), name
        assert value(got, "s3events_ingest_rows_filtered_total", target=name) == 2, name
        assert _commit_filtered(path) == 2, name
        transform = status[name].transform
        assert transform is not None and transform.rows_filtered == 2, name
    assert totals.filtered == 2 * len(targets)
    in_arrow = {r.getMessage().split(".")[3] for r in caplog.records if "runs in Arrow" in r.getMessage()}
    assert in_arrow == ({"append_driver", "append_executors"} if sql == ARROW else set())
