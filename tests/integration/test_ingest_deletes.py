"""Record-level deletes end to end: change-data files (AWS DMS's `Op`) ingested into a merge target on
both read paths, and a model-based test of interleaved inserts, updates and deletes over many files and
batches that must give the table a pure-Python replay of the rule gives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3events.ingest.service import build_ingest
from tests.conftest import read_table, write_metadata_version
from tests.integration.test_ingest import jsonl, settings_for, target_conf

pytestmark = pytest.mark.integration

PATHS = {"fast": "true", "line": "false"}  # json.fast.path: the Arrow tasks, or Spark's line path


def cdc_conf(stack: Any, path: str, read_path: str, **extra: object) -> Any:
    conf = target_conf(
        "cdc",
        path,
        "json",
        schema="id BIGINT, seq BIGINT, v STRING, Op STRING",
        mode="merge",
        record__key="id",
        delete__field="Op",
        delete__values="D",
        json__fast__path=PATHS[read_path],
        **extra,
    )
    return settings_for(stack, {"cdc": conf})


def land(stack: Any, s3: Any, files: dict[str, list[dict[str, Any]]]) -> None:
    """The files as one metadata version (one batch for the target)."""
    for key, rows in files.items():
        s3.put_object(Bucket=stack.bucket, Key=key, Body=jsonl(rows))
    write_metadata_version(stack, list(files), s3)


@pytest.mark.parametrize("read_path", sorted(PATHS))
def test_dms_files_delete_update_and_insert_keys_on_both_read_paths(
    make_stack, s3, spark, tmp_path, read_path
):
    stack = make_stack()
    path = str(tmp_path / "cdc")
    ingest = build_ingest(cdc_conf(stack, path, read_path), spark=spark)
    land(stack, s3, {"full/load.json": [{"id": i, "seq": 1, "v": f"v{i}", "Op": "I"} for i in (1, 2, 3)]})
    ingest.run_once()
    assert _operation(path) == "WRITE"  # no delete in it: appended as new keys, without a MERGE

    land(
        stack,
        s3,
        {
            "cdc/0001.json": [
                {"id": 2, "seq": 2, "Op": "D"},  # a DMS delete may carry only the key
                {"id": 3, "seq": 2, "v": "three", "Op": "U"},
                {"id": 4, "seq": 2, "v": "four", "Op": "I"},
                {"id": 9, "seq": 2, "Op": "D"},  # never held: a no-op, counted
                {"id": 4, "seq": 3, "Op": "D"},  # inserted and deleted in one batch: the delete is latest
                {"id": 5, "seq": 3, "Op": "D"},
            ],
            "cdc/0002.json": [{"id": 5, "seq": 4, "v": "back", "Op": "I"}],  # a later file: re-inserted
        },
    )
    (batch,) = ingest.run_once().batches
    assert _operation(path) == "MERGE"

    rows = sorted((r["id"], r["seq"], r["v"]) for r in read_table(path))
    assert rows == [(1, 1, "v1"), (3, 2, "three"), (5, 4, "back")]
    assert "Op" not in read_table(path)[0]  # delete.field.keep=false: it decided, it is not stored
    assert (batch.deletes, batch.deletes_noop) == (1, 2)
    assert "deletes=1 deletes_noop=2" in batch.log_line()
    assert not ingest.run_once().batches  # replay-safe: nothing left, nothing deleted twice


def _operation(path: str) -> str:
    from deltalake import DeltaTable

    return str(DeltaTable(path).history(1)[0]["operation"])


# -- the model ---------------------------------------------------------------------------------------------

KEYS = 6


@dataclass(frozen=True)
class Change:
    id: int
    seq: int
    op: str  # I | U | D

    def row(self) -> dict[str, Any]:
        return {"id": self.id, "seq": self.seq, "v": f"{self.op}{self.seq}", "Op": self.op}


CHANGES = st.builds(Change, st.integers(0, KEYS - 1), st.integers(0, 9), st.sampled_from("IUD"))
BATCHES = st.lists(
    st.lists(st.lists(CHANGES, min_size=1, max_size=5), min_size=1, max_size=3), min_size=1, max_size=3
)


def replay(batches: list[list[list[Change]]]) -> set[tuple[int, int, str]]:
    """The rule in plain Python: per batch, each key's latest change (largest seq, then the last file, then
    the last line) is applied: a delete removes a held key unless the held row has a larger seq; any other
    change upserts unless the held row has a larger seq."""
    held: dict[int, Change] = {}
    for files in batches:
        latest: dict[int, tuple[tuple[int, int, int], Change]] = {}
        for f, changes in enumerate(files):
            for line, change in enumerate(changes):
                rank = (change.seq, f, line)
                if change.id not in latest or rank > latest[change.id][0]:
                    latest[change.id] = (rank, change)
        for key, (_, change) in latest.items():
            if key in held and held[key].seq > change.seq:
                continue
            if change.op == "D":
                held.pop(key, None)
            else:
                held[key] = change
    return {(c.id, c.seq, f"{c.op}{c.seq}") for c in held.values()}


@pytest.mark.parametrize("read_path", sorted(PATHS))
@settings(
    max_examples=3,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(batches=BATCHES)
def test_interleaved_inserts_updates_and_deletes_give_the_replayed_table(
    make_stack, s3, spark, tmp_path_factory, read_path, batches
):
    stack = make_stack()
    path = str(tmp_path_factory.mktemp("cdc") / "t")
    ingest = build_ingest(cdc_conf(stack, path, read_path, ordering__field="seq"), spark=spark)

    for b, files in enumerate(batches):
        land(
            stack,
            s3,
            {f"cdc/{b:02d}/{f:02d}.json": [c.row() for c in changes] for f, changes in enumerate(files)},
        )
        assert len(ingest.run_once().batches) == 1

    assert {(r["id"], r["seq"], r["v"]) for r in read_table(path)} == replay(batches)
