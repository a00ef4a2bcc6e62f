"""Merge mode with the whole-file and record formats: change-data files in Avro (the Kafka Connect and
DMS shape: `Op` a nullable string), ORC and XML ingested into merge targets keyed by `id`, ordered by
`seq`, with `delete.field=Op`: a first batch inserts, a second one updates, deletes (a held key, an
absent one, one inserted and deleted in the batch) and re-inserts, and each target ends as the rule
says, whichever format carried the changes."""

from __future__ import annotations

import io
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pytest

from s3events.ingest.service import build_ingest
from tests.conftest import read_table, write_metadata_version
from tests.integration.test_ingest import settings_for, target_conf

pytestmark = pytest.mark.integration

Change = tuple[int, int, str | None, str | None]  # id, seq, v, Op

FIRST: list[list[Change]] = [[(1, 1, "one", "I"), (2, 1, "two", "I"), (3, 1, "three", None)]]
SECOND: list[list[Change]] = [
    [
        (2, 2, None, "D"),  # a held key: removed (a delete may carry only the key)
        (3, 2, "THREE", "U"),  # updated
        (4, 2, "four", "I"),
        (4, 3, None, "D"),  # inserted and deleted in the batch: the delete is latest
        (9, 2, None, "D"),  # never held: a no-op
        (1, 0, None, "D"),  # older than the held row by seq: ignored
    ],
    [(5, 4, "five", "I")],  # a second file of the batch
]
FINAL = [(1, 1, "one"), (3, 2, "THREE"), (5, 4, "five")]

_AVRO = fastavro.parse_schema(
    {
        "type": "record",
        "name": "Change",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "seq", "type": "long"},
            {"name": "v", "type": ["null", "string"]},
            {"name": "Op", "type": ["null", "string"]},
        ],
    }
)


def _avro(changes: list[Change]) -> bytes:
    sink = io.BytesIO()
    rows = [{"id": i, "seq": s, "v": v, "Op": op} for i, s, v, op in changes]
    fastavro.writer(sink, _AVRO, rows, codec="deflate")
    return sink.getvalue()


def _orc(changes: list[Change]) -> bytes:
    ids, seqs, vs, ops = (list(c) for c in zip(*changes, strict=True))
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "seq": pa.array(seqs, pa.int64()),
            "v": pa.array(vs, pa.string()),
            "Op": pa.array(ops, pa.string()),
        }
    )
    sink = io.BytesIO()
    orc.write_table(table, sink)
    return sink.getvalue()


def _xml(changes: list[Change]) -> bytes:
    def row(i: int, s: int, v: str | None, op: str | None) -> str:
        fields = [f"<id>{i}</id>", f"<seq>{s}</seq>"]
        fields += [f"<v>{v}</v>"] if v is not None else []
        fields += [f"<Op>{op}</Op>"] if op is not None else []
        return f"<change>{''.join(fields)}</change>"

    return ("<changes>\n" + "\n".join(row(*c) for c in changes) + "\n</changes>\n").encode()


FORMATS = {"avro": _avro, "orc": _orc, "xml": _xml}


def _land(stack: Any, s3: Any, batch: int, files: list[list[Change]]) -> None:
    keys = []
    for fmt, write in FORMATS.items():
        for f, changes in enumerate(files):
            key = f"{fmt}/{batch:02d}/{f:02d}.{fmt}"
            s3.put_object(Bucket=stack.bucket, Key=key, Body=write(changes))
            keys.append(key)
    write_metadata_version(stack, keys, s3)


def test_avro_orc_and_xml_change_files_update_and_delete_keys_of_merge_targets(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    paths = {fmt: str(tmp_path / fmt) for fmt in FORMATS}
    merge = {"mode": "merge", "record__key": "id", "ordering__field": "seq"}
    deletes = {"delete__field": "Op", "delete__values": "D"}
    targets = {
        fmt: target_conf(
            fmt,
            path,
            fmt,
            key__prefix=f"{fmt}/",
            **merge,
            **deletes,
            **({"reader__options": "rowTag=change"} if fmt == "xml" else {}),
        )
        for fmt, path in paths.items()
    }
    ingest = build_ingest(settings_for(stack, targets), spark=spark)

    _land(stack, s3, 0, FIRST)
    ingest.run_once()
    _land(stack, s3, 1, SECOND)
    batches = {b.target: b for b in ingest.run_once().batches}

    for fmt, path in paths.items():
        rows = read_table(path)
        assert sorted((r["id"], r["seq"], r["v"]) for r in rows) == FINAL, fmt
        assert "Op" not in rows[0], fmt  # delete.field.keep=false: it decided, it is not stored
        # applied: key 2 (4 was never held before the batch); no-ops: 4, 9 and 1 (older than held)
        assert (batches[fmt].deletes, batches[fmt].deletes_noop) == (1, 3), fmt
    # every file is read by the fast path's tasks, their rows merged by the driver
    assert {fmt: b.fast_path_files for fmt, b in batches.items()} == {"avro": 2, "orc": 2, "xml": 2}
    assert not ingest.run_once().batches  # nothing left, nothing deleted twice
