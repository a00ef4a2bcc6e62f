"""delta-spark reads targets ingested from Avro, ORC and binary objects: the same rows as delta-rs, with
the logical types (decimal, date, timestamp) and the bytes as Spark types."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pytest

from s3events.ingest.service import run_ingest
from tests.integration.test_ingest import capture, settings_for, target_conf
from tests.interop.delta_read import assert_same_rows, spark_read

pytestmark = [pytest.mark.integration, pytest.mark.interop]

_AVRO_SCHEMA = {
    "type": "record",
    "name": "Payment",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "memo", "type": ["null", "string"]},
    ],
}


def test_delta_spark_reads_avro_orc_and_binary_targets_with_their_types(
    delta_spark: Any, make_stack: Any, s3: Any, tmp_path: Path
):
    stack = make_stack()
    sink = io.BytesIO()
    payments = [
        {"id": n, "amount": Decimal(f"{n}123456789.0001"), "day": date(2026, 3, n),
         "at": datetime(2026, 3, n, 8, 30, tzinfo=UTC), "memo": None if n % 2 else f"m{n}"}
        for n in range(1, 6)
    ]
    fastavro.writer(sink, fastavro.parse_schema(_AVRO_SCHEMA), payments, codec="snappy")
    s3.put_object(Bucket=stack.bucket, Key="avro/p.avro", Body=sink.getvalue())
    sink = io.BytesIO()
    at = pa.array([datetime(2026, 3, 1, tzinfo=UTC)] * 2)
    orc.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "at": at}), sink)
    s3.put_object(Bucket=stack.bucket, Key="orc/o.orc", Body=sink.getvalue())
    s3.put_object(Bucket=stack.bucket, Key="bin/doc.pdf", Body=b"%PDF-1.7\n\x00\xff binary")
    capture(stack)
    paths = {t: str(tmp_path / t) for t in ("avro", "orc", "bin")}
    settings = settings_for(stack, {
        "avro": target_conf("avro", paths["avro"], "avro", key__prefix="avro/"),
        "orc": target_conf("orc", paths["orc"], "orc", key__prefix="orc/"),
        "bin": target_conf("bin", paths["bin"], "binary", key__prefix="bin/"),
    })

    run_ingest(settings, once=True, spark=delta_spark)

    rows = sorted(assert_same_rows(delta_spark, paths["avro"]), key=lambda r: r["id"])
    assert [(r["id"], r["amount"], r["day"], r["memo"]) for r in rows] == [
        (p["id"], p["amount"], p["day"], p["memo"]) for p in payments
    ]
    types = {f.name: f.dataType.simpleString() for f in spark_read(delta_spark, paths["avro"]).schema}
    assert (types["amount"], types["day"], types["at"]) == ("decimal(20,4)", "date", "timestamp")
    assert len(assert_same_rows(delta_spark, paths["orc"])) == 2
    [doc] = assert_same_rows(delta_spark, paths["bin"])
    assert (doc["content"], doc["size"]) == (b"%PDF-1.7\n\x00\xff binary", 18)
    types = {f.name: f.dataType.simpleString() for f in spark_read(delta_spark, paths["bin"]).schema}
    assert (types["content"], types["size"]) == ("binary", "bigint")
