"""Hive registration read back by delta-spark by name: a Thrift metastore started from pyspark's own jars
(Hive 2.3 on Derby), entries written by ingest's catalog sync (Thrift, no JVM in this process), and a Spark
session with Hive support and delta-spark in a child process reading `spark.table("lake.orders")`."""

from __future__ import annotations

import fcntl
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
print("STARTED", flush=True)
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
    """`spark.table("lake.orders")` in a child session with Hive support and delta-spark. The Ivy cache is
    shared with the test sessions: the child resolves delta-spark under their lock, released once its
    session has started."""
    ivy = Path(DELTA_SPARK_CONF["spark.jars.ivy"])
    ivy.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-c", READER, json.dumps(DELTA_SPARK_CONF), uri, warehouse.as_uri()]
    env = {**spark_env(), "PYTHONPATH": os.getcwd()}
    errors = warehouse.parent / "reader.stderr"  # a file: a full pipe would stall the child before it starts
    with open(ivy / ".s3events-tests.lock", "w") as lock, errors.open("w") as stderr:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:  # until the session has started (or the child has ended)
            lines.append(line)
            if line.startswith("STARTED"):
                break
        fcntl.flock(lock, fcntl.LOCK_UN)
    out, _ = proc.communicate(timeout=480)
    lines += out.splitlines()
    results = [line for line in lines if line.startswith("RESULT ")]
    assert proc.returncode == 0 and results, errors.read_text()[-4000:]
    return dict(json.loads(results[-1][len("RESULT ") :]))


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
