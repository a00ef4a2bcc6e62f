"""`s3events demo`: the whole pipeline end to end on an embedded local endpoint, nothing to set up.

A moto server on 127.0.0.1; a bucket whose S3→SQS notification covers `events/` only; sample files PUT
(`demo_data.py`: JSON Lines and CSV, keys that need decoding, a multipart upload, files under `late/`
that get no notification), a redelivered and a poison message. Then 1 capture until the queue is
drained → 2 one backfill pass over the bucket (finds the `late/` files) → 3 ingest --once into two
target tables on a local Spark session (local[2]) → a summary read back from the tables.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from s3events.backfill.model import BackfillReport
from s3events.backfill.run import run_backfill
from s3events.capture.service import CaptureTotals, run_capture
from s3events.config import Settings, load_settings
from s3events.dev import provision
from s3events.dev.demo_data import (
    BUCKET,
    MALFORMED_KEY,
    MALFORMED_LINE,
    MALFORMED_WHAT,
    NOTIFIED_PREFIX,
    QUEUE,
    TARGETS,
    WITHHELD_PREFIX,
    Sample,
    put_samples,
    redeliver_and_poison,
)
from s3events.dev.local_endpoint import LOCAL_ENV, LocalEndpoint
from s3events.errors import FatalError
from s3events.infra import aws, table_info
from s3events.infra.spark import get_spark, require_java
from s3events.ingest.service import run_ingest
from s3events.metadata.table import MetadataTable

_MARKER = ".s3events-demo"
SPARK_MASTER = "local[2]"


def _fresh_data_dir(data_dir: Path) -> None:
    if data_dir.exists():
        if not (data_dir / _MARKER).exists():
            raise FatalError(f"{data_dir} exists and was not made by the demo; choose another --data-dir")
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True)
    (data_dir / _MARKER).write_text("made by s3events demo; deleted by the next demo run\n")


def _settings(root: Path, endpoint_url: str, queue_url: str) -> Settings:
    conf = [
        f"s3events.aws.endpoint.url={endpoint_url}",
        "s3events.aws.region=us-east-1",
        f"s3events.source.queue.url={queue_url}",
        "s3events.source.queue.long.poll.wait=1",
        f"s3events.metadata.table.path={root / 'metadata'}",
        f"s3events.backfill.sources=s3://{BUCKET}",
        f"s3events.ingest.targets={','.join(t.name for t in TARGETS)}",
        f"s3events.spark.master={SPARK_MASTER}",
    ]
    for target in TARGETS:
        conf.extend(target.conf(str(root / "tables" / target.name)))
    settings = load_settings(None, conf)
    for command in ("capture", "backfill", "ingest"):
        settings.validate_for(command)
    return settings


# Spark's own logging for the demo: warnings and worse, without the start-up notes (no native Hadoop
# library, "using the default log4j profile") that say nothing about the demo.
_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex{short}
logger.hadoop_native.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop_native.level = error
"""


def _start_spark(root: Path) -> Any:
    log_config = root / "spark-log4j2.properties"
    log_config.write_text(_LOG4J2)
    conf = {
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log_config.as_uri()}",
    }
    return get_spark(master=SPARK_MASTER, app_name="s3events-demo", conf=conf)


def run_demo(*, data_dir: str = "demo-data", files: int = 20) -> int:
    """Run the demo; the exit code: 0, or 1 when a target failed to ingest."""
    root = Path(data_dir).resolve()
    _fresh_data_dir(root)
    require_java()  # before any work: without Java the demo cannot get to its end
    os.environ.update(LOCAL_ENV)  # the local endpoint's throwaway credentials, this process only
    with LocalEndpoint(log_path=root / "moto_server.log") as endpoint:
        options = aws.AwsOptions(region="us-east-1", endpoint_url=endpoint.url)
        print(f"local S3/SQS endpoint: {endpoint.url}", flush=True)
        stack = provision.notifying_bucket(options, bucket=BUCKET, queue=QUEUE, prefix=NOTIFIED_PREFIX)
        sample = put_samples(aws.client(options, "s3"), stack.bucket, files=files)
        redeliver_and_poison(aws.client(options, "sqs"), stack.queue_url)
        print(
            f"PUT {sample.files} files into s3://{stack.bucket}: {len(sample.notified)} under "
            f"{NOTIFIED_PREFIX} (notified), {len(sample.withheld)} under {WITHHELD_PREFIX} (no notification)",
            flush=True,
        )
        settings = _settings(root, endpoint.url, stack.queue_url)
        print("1/3 capture: draining the queue", flush=True)
        captured = run_capture(settings, once=True)
        print(f"2/3 backfill: listing s3://{stack.bucket}", flush=True)
        backfilled = run_backfill(settings)
        print(f"3/3 ingest: starting Spark ({SPARK_MASTER}), then every target once", flush=True)
        spark = _start_spark(root)
        try:
            ingested = run_ingest(settings, once=True, spark=spark)
        finally:
            spark.stop()
    _print_summary(root, sample, captured, backfilled)
    for target, reason in sorted(ingested.failed.items()):
        print(f"s3events: target {target} failed: {reason}", file=sys.stderr)
    return 1 if ingested.failed else 0


def _line(label: str, value: object, note: str = "") -> str:
    text = f"  {label:<28}{value}"
    return f"{text:<40}  {note}" if note else text


def _print_summary(root: Path, sample: Sample, captured: CaptureTotals, backfilled: BackfillReport) -> None:
    metadata = MetadataTable(str(root / "metadata"), storage_options={})
    notified, withheld = len(sample.notified), len(sample.withheld)
    lines = [
        "",
        "s3events demo summary",
        _line(
            "files PUT",
            sample.files,
            f"{notified} under {NOTIFIED_PREFIX}, {withheld} under {WITHHELD_PREFIX}",
        ),
        _line("messages received", captured.received),
        _line("events captured", captured.written),
        _line("duplicates dropped", captured.duplicates, "a multipart upload's 2nd event, a redelivery"),
        _line("poison quarantined", captured.poison),
        _line("backfill listed", backfilled.listed, f"every object in s3://{BUCKET}"),
        _line("backfill already known", backfilled.already_known, "captured from notifications"),
        _line("backfill injected", backfilled.injected, f"the {WITHHELD_PREFIX} files S3 sent no event for"),
        _line("metadata table", root / "metadata"),
        _line("metadata table version", metadata.version()),
        _line("metadata table rows", metadata.row_count()),
    ]
    for target in TARGETS:
        path = root / "tables" / target.name
        rows = table_info.describe(str(path), {})
        errors = table_info.describe(f"{path}_errors", {})
        lines.append(_line(f"target {target.name}", path, f"{target.format}, files matching {target.glob}"))
        lines.append(_line(f"target {target.name} rows", rows.rows if rows else 0))
        lines.append(_line(f"target {target.name} error rows", errors.rows if errors else 0))
        if errors and errors.rows:
            which = "the error row" if errors.rows == 1 else "the newest error row"
            lines.append(f"    {which}: {_error_row(f'{path}_errors')}")
    print("\n".join(lines), flush=True)


def _error_row(path: str) -> str:
    row = table_info.latest_row(
        path, {}, order_by="_ingested_at", columns=["_source_file", "_source_line", "error"]
    )
    if row is None:
        return "(none)"
    text = f"{row['_source_file']} line {row['_source_line']}: {row['error']}"
    if row["_source_file"] == f"s3://{BUCKET}/{MALFORMED_KEY}" and row["_source_line"] == MALFORMED_LINE:
        text += f" ({MALFORMED_WHAT})"
    return text
