"""What the tests' class archive saves a JVM: a Spark session's start and a few small jobs, with the
tests' JVM options (C1 only) with and without the archive (tests/jvm.py), alternating.

    .venv/bin/python -m benchmarks.jvm_start [--rounds 4]

Each round starts a fresh Python process and its JVM; the figure is the CPU seconds of that process
tree (Python, the JVM, Spark's Python workers) up to the session's stop, and its wall time. The archive
is written first if this virtualenv has none.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import Run, add_common, median, smoke
from tests import jvm

_PROBE = """
import json, os, sys, time
started = time.monotonic()
from pyspark.sql import SparkSession, functions as F
from benchmarks.harness.procs import tree_cpu
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "4").getOrCreate())
df = spark.range(1000).selectExpr("id", "cast(id as string) s", "id % 7 k")
df.mapInArrow(lambda batches: batches, df.schema).groupBy("k").count().collect()
spark.read.json(spark.sparkContext.parallelize(['{"a": 1}', '{"b": "x"}'])).collect()
spark.sql("SELECT to_date('2020-01-01') d, CAST(1.5 AS DECIMAL(9,2)) x").collect()
print(json.dumps({"cpu_s": tree_cpu(os.getpid()), "wall_s": time.monotonic() - started}))
spark.stop()
"""


def _round(options: str) -> dict[str, float]:
    env = {**os.environ, "SPARK_SUBMIT_OPTS": options, "PYSPARK_PYTHON": sys.executable}
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=4)
    add_common(parser)
    args = parser.parse_args()
    smoke(args, rounds=1)
    archive = jvm.archive_path()
    if not archive.is_file():
        failed = jvm.write_archive(archive)
        if failed:
            sys.exit(f"jvm_start: no archive to measure: {failed}")
    run = Run.start("jvm_start", smoke=args.smoke)
    plain = jvm.submit_options(archive=None)
    shared = jvm.submit_options()
    rounds: dict[str, list[dict[str, float]]] = {"without": [], "with": []}
    for _ in range(args.rounds):
        rounds["without"].append(_round(plain))
        rounds["with"].append(_round(shared))
    cpu = {name: median([r["cpu_s"] for r in rs]) for name, rs in rounds.items()}
    wall = {name: median([r["wall_s"] for r in rs]) for name, rs in rounds.items()}
    ratio = round(cpu["with"] / cpu["without"], 2)
    print("| JVM | CPU s | wall s |")
    print("|---|---|---|")
    for name in rounds:
        print(f"| {name} the archive | {cpu[name]:.1f} | {wall[name]:.1f} |")
    print(f"with / without, CPU: {ratio:.2f}x")
    figures = {"cpu_without_s": round(cpu["without"], 2), "cpu_with_s": round(cpu["with"], 2)}
    figures |= {"wall_without_s": round(wall["without"], 2), "wall_with_s": round(wall["with"], 2)}
    figures["cpu_with_vs_without_x"] = ratio
    run.add("a session's start and three small jobs", params={"rounds": args.rounds}, figures=figures)
    run.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
