"""Reading one table two ways, delta-rs and delta-spark, and comparing what each returns."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable


def spark_read(spark: Any, path: str, **options: Any) -> Any:
    return spark.read.format("delta").options(**{k: str(v) for k, v in options.items()}).load(path)


def canonical(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows in one order whatever order they came in (a multiset compares equal as lists)."""
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=repr))


def delta_rs_rows(path: str, version: int | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    table = DeltaTable(path, version=version).to_pyarrow_table()
    return table.column_names, table.to_pylist()


def spark_rows(df: Any) -> tuple[list[str], list[dict[str, Any]]]:
    table: pa.Table = df.toArrow()
    return table.column_names, table.to_pylist()


def assert_same_rows(spark: Any, path: str, *, version: int | None = None) -> list[dict[str, Any]]:
    """delta-spark reads row for row what delta-rs reads (at `version`, or the latest); returns the rows."""
    expected_columns, expected = delta_rs_rows(path, version)
    options = {} if version is None else {"versionAsOf": version}
    columns, got = spark_rows(spark_read(spark, path, **options))
    assert sorted(columns) == sorted(expected_columns), path
    assert len(got) == len(expected), f"{path}: delta-spark reads {len(got)} rows, delta-rs {len(expected)}"
    assert canonical(got) == canonical(expected), path
    return expected


def transactions(spark: Any, path: str) -> dict[str, int]:
    """The app transactions (app id -> version) delta-spark's own snapshot of the table holds."""
    jvm = spark._jvm
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog
    delta_log.clearCache()  # a fresh snapshot, not one cached by an earlier read
    snapshot = delta_log.forTable(spark._jsparkSession, path).unsafeVolatileSnapshot()
    as_java = jvm.scala.jdk.javaapi.CollectionConverters.asJava(snapshot.transactions())
    return {str(k): int(as_java.get(k)) for k in as_java.keySet()}


def history(spark: Any, path: str) -> list[tuple[int, str]]:
    """(version, operation) of every commit, oldest first, as DESCRIBE HISTORY gives them."""
    rows = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").select("version", "operation").collect()
    return sorted((int(r["version"]), str(r["operation"])) for r in rows)


@dataclass(frozen=True)
class Probe:
    """One filter: as Spark SQL, and as a Python test of a row (SQL semantics: a null never matches)."""

    sql: str
    matches: Callable[[dict[str, Any]], bool]


def assert_filters_agree(spark: Any, path: str, probes: Sequence[Probe], *, key: str = "id") -> None:
    """Every probe returns through delta-spark (which skips files by our statistics) exactly the rows
    of the delta-rs read that satisfy it. One Spark job for all probes: a union of filtered scans."""
    _, expected_rows = delta_rs_rows(path)
    df = spark_read(spark, path)
    from functools import reduce

    from pyspark.sql import functions as F

    scans = [df.where(p.sql).select(F.lit(i).alias("_probe"), F.col(key)) for i, p in enumerate(probes)]
    got: dict[int, list[Any]] = {i: [] for i in range(len(probes))}
    for row in reduce(lambda a, b: a.unionAll(b), scans).collect():
        got[row["_probe"]].append(row[key])
    mismatches = []
    for i, probe in enumerate(probes):
        expected = sorted(r[key] for r in expected_rows if probe.matches(r))
        if sorted(got[i]) != expected:
            mismatches.append(f"{probe.sql}: delta-spark {sorted(got[i])}, delta-rs {expected}")
    assert not mismatches, "\n".join(mismatches)


def files_read(spark: Any, path: str, sql: str) -> int:
    """How many data files delta-spark keeps for a scan filtered by `sql` (after skipping by stats)."""
    return len(spark_read(spark, path).where(sql).inputFiles())
