"""Hive registration read back by delta-spark by name: a Thrift metastore started from pyspark's own jars
(Hive 2.3 on Derby), entries written by ingest's catalog sync (Thrift, no JVM in this process), and a Spark
session with Hive support and delta-spark in a child process reading `spark.table("lake.orders")`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from s3events.catalog.hive import HiveCatalog
from s3events.catalog.model import CatalogTarget, catalog_location
from s3events.catalog.sync import CatalogSync
from s3events.catalog.tables import DeltaShapes
from tests.conftest import DELTA_SPARK_CONF, spark_env

pytestmark = [pytest.mark.interop, pytest.mark.process]

READER = """
import json, sys
from pyspark.sql import SparkSession
conf, uri, warehouse = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
builder = SparkSession.builder.master("local[1]").appName("s3events-hive-reader")
for key, value in {**conf, "spark.sql.catalogImplementation": "hive",
                   "spark.hadoop.hive.metastore.uris": uri, "spark.sql.warehouse.dir": warehouse,
                   "spark.ui.enabled": "false", "spark.sql.session.timeZone": "UTC"}.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
table = spark.table("lake.orders")
rows = sorted((r.asDict() for r in table.collect()), key=lambda r: r["id"])
print("RESULT " + json.dumps({"columns": table.columns, "rows": rows}))
spark.stop()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def metastore(tmp_path: Path) -> Iterator[str]:
    """A Hive metastore (Thrift) on Derby, from the Hive 2.3 jars pyspark ships."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    port = _free_port()
    home = tmp_path / "metastore"
    home.mkdir()
    command = [
        "java",
        "-Xmx256m",
        "-Dhive.async.log.enabled=false",  # its async logger needs a jar pyspark does not ship
        f"-Dderby.system.home={home}",
        f"-Djavax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={home}/db;create=true",
        "-Ddatanucleus.schema.autoCreateAll=true",
        "-Dhive.metastore.schema.verification=false",
        f"-Dhive.metastore.warehouse.dir={(tmp_path / 'warehouse').as_uri()}",
        "-cp",
        f"{jars}/*",
        "org.apache.hadoop.hive.metastore.HiveMetaStore",
        "-p",
        str(port),
    ]
    log = (tmp_path / "metastore.log").open("w")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=home)
    try:
        deadline = time.monotonic() + 180
        while not _listening(port):
            assert proc.poll() is None, (tmp_path / "metastore.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the metastore did not listen within 180 s"
            time.sleep(0.5)
        yield f"thrift://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()


def _read_by_name(uri: str, warehouse: Path) -> dict[str, object]:
    conf = {k: v for k, v in DELTA_SPARK_CONF.items()}
    proc = subprocess.run(
        [sys.executable, "-c", READER, json.dumps(conf), uri, warehouse.as_uri()],
        capture_output=True,
        text=True,
        timeout=480,
        env={**spark_env(), "PYTHONPATH": os.getcwd()},
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    return dict(json.loads(lines[-1][len("RESULT ") :]))


def test_table_registered_in_hive_is_read_by_name_with_delta_spark(metastore: str, tmp_path: Path) -> None:
    path = str(tmp_path / "orders")
    catalog = HiveCatalog(metastore)
    assert catalog.ensure_database("lake") is True
    sync = CatalogSync(
        catalog,
        "lake",
        [CatalogTarget("orders", "orders", catalog_location(path))],
        state_of=DeltaShapes({"orders": path}, dict),
    )
    sync.start()
    write_deltalake(path, pa.table({"id": [1], "dt": ["2026-11-27"]}), partition_by=["dt"])
    sync.after_cycle(["orders"])  # first commit: created
    write_deltalake(path, pa.table({"id": [2], "dt": ["2026-11-28"]}), mode="append")
    sync.after_cycle(["orders"])  # same shape: nothing to do
    write_deltalake(
        path,
        pa.table({"id": [3], "dt": ["2026-11-28"], "note": ["new"]}),
        mode="append",
        schema_mode="merge",
    )
    sync.after_cycle(["orders"])  # a new column: updated

    entry = catalog.get_entry("lake", "orders")
    assert entry is not None and entry.version == 2 and sync.failures == 0
    read = _read_by_name(metastore, tmp_path / "warehouse")

    assert set(read["columns"]) == {"id", "dt", "note"}  # type: ignore[arg-type]
    assert read["rows"] == [
        {"id": 1, "dt": "2026-11-27", "note": None},
        {"id": 2, "dt": "2026-11-28", "note": None},
        {"id": 3, "dt": "2026-11-28", "note": "new"},
    ]
