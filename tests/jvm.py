"""The options every JVM of the tests runs with, and the class-data archive they share.

Every JVM the tests start (each worker's session, the `s3events` and `spark-submit` children) takes
them from `SPARK_SUBMIT_OPTS`, which tests/conftest.py sets unless it is set already; the standalone
cluster's daemons and executors take the JVM's own (`jvm_options`: Spark allows no `spark.*` there).
A test JVM lives seconds to minutes and runs small jobs over a few lines:
- C1 only: C2's compile threads would only compete for the two cores;
- SQL evaluated interpreted (Spark's `spark.*` system properties are its configuration defaults): a
  test's batches are many small queries, where compiling each plan's code (Janino) costs more than
  evaluating it. Results are the same (Spark's own tests run both ways); production keeps codegen;
- Spark's classes mapped from an archive instead of loaded and verified from the jars (JDK 17's
  dynamic class-data sharing: `-XX:ArchiveClassesAtExit` writes one as a JVM exits,
  `-XX:SharedArchiveFile` maps it).

    .venv/bin/python -m tests.jvm             # `make test`'s first step: the archive, once per virtualenv
    .venv/bin/python -m benchmarks.jvm_start  # what the archive saves a JVM, measured

The archive lives in the virtualenv (it belongs to its pyspark's jars and this JDK); a JVM whose class
path or JDK differs from the archive's ignores it and loads classes as usual (its CDS logging is off:
a warning would land in the output tests read).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# What each option saves: docs/development.md ("How the parallel run is arranged").
_COMPILE = "-XX:TieredStopAtLevel=1"
_INTERPRETED = "-Dspark.sql.codegen.wholeStage=false -Dspark.sql.codegen.factoryMode=NO_CODEGEN"
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_path() -> Path:
    """Where this virtualenv's archive lives (named for its pyspark, whose jars it holds)."""
    from importlib.metadata import version

    return Path(sys.prefix) / f"spark-{version('pyspark')}-classes.jsa"


_THIS_VENV = Path()


def jvm_options(archive: Path | None = _THIS_VENV) -> str:
    """Any test JVM's options (a Spark daemon's or executor's too): C1 only, and the class archive
    (this virtualenv's unless `archive` says another, or None) when one was written."""
    if archive is _THIS_VENV:
        archive = archive_path()
    if archive is None or not archive.is_file():  # naming a missing one turns the JDK's own off too
        return _COMPILE
    return f"{_COMPILE} -XX:SharedArchiveFile={archive} {_QUIET}"


def submit_options(archive: Path | None = _THIS_VENV) -> str:
    """`SPARK_SUBMIT_OPTS` of the tests (their Spark drivers): `jvm_options` and SQL interpreted. Spark
    refuses `spark.*` properties in an executor's or daemon's options; the driver plans the SQL."""
    return f"{jvm_options(archive)} {_INTERPRETED}"


# The classes Spark loads for what s3events asks of it: text read as JSON and CSV with inference, from_json,
# Arrow batches both ways, a shuffle and a window, SQL casts and dates, Parquet and ORC, persist.
_WORKLOAD = """
import os, sys
from pyspark.sql import SparkSession, Window, functions as F
spark = (SparkSession.builder.master("local[2]").appName("s3events-jvm-archive")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.execution.arrow.pyspark.enabled", "true").getOrCreate())
out = sys.argv[1]
def text(*lines):
    return spark.createDataFrame([(line,) for line in lines], "value string")
lines = text('{"a": 1, "b": "x", "t": "2024-01-01T00:00:00Z"}', '{"a": 2.5}')
inferred = spark.read.json(lines.rdd.map(lambda r: r[0]))
parsed = lines.select(F.from_json("value", inferred.schema, {"mode": "PERMISSIVE"}).alias("r"))
csv = spark.read.options(header="true", inferSchema="true").csv(text("a,b", "1,x").rdd.map(lambda r: r[0]))
both = parsed.select("r.a", "r.b").unionByName(csv.select(F.col("a").cast("double"), "b"))
both.mapInArrow(lambda batches: batches, both.schema).persist().count()
w = Window.partitionBy("b").orderBy(F.col("a").desc_nulls_last())
both.withColumn("n", F.row_number().over(w)).where("n = 1").join(both, "b", "left").collect()
both.createOrReplaceTempView("src")
spark.sql("SELECT *, CAST(a AS DECIMAL(18,2)) d, to_date('2024-01-02') dt, upper(b) u FROM src").toPandas()
both.write.mode("overwrite").parquet(os.path.join(out, "p"))
spark.read.parquet(os.path.join(out, "p")).groupBy("b").agg(F.max("a")).collect()
both.write.mode("overwrite").orc(os.path.join(out, "o"))
spark.read.orc(os.path.join(out, "o")).toArrow()
print(spark.sparkContext._jvm.ProcessHandle.current().pid())
"""


def write_archive(archive: Path, deadline_s: float = 600.0) -> str | None:
    """Run the workload in a JVM that writes its classes to `archive` at exit (to a temporary name,
    renamed when the JVM has gone: a JVM starting meanwhile never maps half a file). Why not, if not."""
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    options = f"{jvm_options(None)} {_INTERPRETED} -XX:ArchiveClassesAtExit={partial} {_QUIET}"
    env = {**os.environ, "SPARK_SUBMIT_OPTS": options}
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory(prefix="s3events-jvm-archive-") as scratch:
        done = subprocess.run(
            [sys.executable, "-c", _WORKLOAD, scratch], env=env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            return f"the workload failed:\n{done.stderr[-4000:]}"
        jvm = int(done.stdout.split()[-1])
        # The JVM writes the archive as it exits, after its Python parent has gone.
        until = time.monotonic() + deadline_s
        while Path(f"/proc/{jvm}").exists() and time.monotonic() < until:
            time.sleep(0.2)
    if not partial.is_file():
        return f"the JVM wrote no archive at {partial}"
    partial.rename(archive)
    return None


def main() -> None:
    archive = archive_path()
    if archive.is_file():
        return
    started = time.monotonic()
    failed = write_archive(archive)
    if failed:  # not a failure of the tests: they run as before, without the archive
        print(f"jvm: no archive, the tests' JVMs load classes as usual: {failed}", file=sys.stderr)
        return
    took = time.monotonic() - started
    print(f"jvm: wrote {archive} ({archive.stat().st_size >> 20} MB) in {took:.0f} s")


if __name__ == "__main__":
    main()
