"""Spark's JVM logs like the process that starts it: with s3events.log.format=json, every line the JVM
writes to stderr is a JSON object with the fields of observe.json_log.

Three sources, three measures:
- log4j2 (Spark, Hadoop, Parquet): a JSON template layout configured when the JVM starts
  (`-Dlog4j2.configurationFile`), with the same field and level names (time in UTC, level, logger,
  message, exception as one string); WARN and above, as Spark's shells do.
- anything else on the JVM's stderr (the JVM's own warnings such as "Using incubator modules", output of
  Spark's Python workers, a dying JVM's last words): the JVM's stderr is a pipe this process reads; a
  line that is already a JSON object passes as it is, any other becomes a record of logger `spark.stderr`.
- PySpark's own error-context loggers (a failed SQL cast, logged with the JVM stack), which carry a
  handler and format of their own: they get the process's JSON formatter.
Under spark-submit the JVM started before this process: its log configuration is spark-submit's
(docs/metrics.md gives the options).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from s3events.observe.json_log import JsonFormatter, json_logging

_EVENT = {
    "time": {
        "$resolver": "timestamp",
        "pattern": {"format": "yyyy-MM-dd'T'HH:mm:ss.SSSxxx", "timeZone": "UTC", "locale": "en_US"},
    },
    "level": {"$resolver": "pattern", "pattern": "%level{WARN=WARNING, FATAL=CRITICAL}"},
    "logger": {"$resolver": "logger", "field": "name"},
    "message": {"$resolver": "message", "stringified": True},
    "exception": {"$resolver": "exception", "field": "stackTrace", "stackTrace": {"stringified": True}},
}
LOG4J2_JSON = f"""status = error
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = JsonTemplateLayout
appender.stderr.layout.eventTemplate = {json.dumps(_EVENT)}
logger.parquet.name = org.apache.parquet.CorruptStatistics
logger.parquet.level = error
"""
PYSPARK_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
log = logging.getLogger("spark.stderr")


def log4j2_json_file() -> Path:
    """LOG4J2_JSON as a file the JVM reads at start (named by its content: written once, shared)."""
    digest = hashlib.sha256(LOG4J2_JSON.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"s3events-log4j2-json-{digest}.properties"
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(LOG4J2_JSON)
        os.replace(tmp, path)
    return path


def jvm_log_options(options: dict[str, str]) -> dict[str, str]:
    """The Spark settings that make the JVM log JSON lines (no progress bar either), merged with
    `options`' own driver Java options; nothing when the process does not log JSON."""
    if not json_logging():
        return {}
    flag = f"-Dlog4j2.configurationFile={log4j2_json_file().as_uri()}"
    java_options = options.get("spark.driver.extraJavaOptions")
    return {
        "spark.driver.extraJavaOptions": f"{java_options} {flag}" if java_options else flag,
        "spark.ui.showConsoleProgress": "false",
    }


def start_jvm_logging_json(options: dict[str, str]) -> None:
    """Start Spark's JVM (the py4j gateway) with `options` and its stderr relayed as JSON lines, and give
    PySpark's own loggers the JSON formatter. Does nothing unless the process logs JSON, the JVM is not
    started yet, and this process starts it (not under spark-submit)."""
    if not json_logging():
        return
    from pyspark import SparkConf
    from pyspark.core.context import SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.logger import PySparkLogger

    for name in PYSPARK_LOGGERS:
        for handler in PySparkLogger.getLogger(name).handlers:
            handler.setFormatter(JsonFormatter())
    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf(loadDefaults=False).setAll(list(options.items()))
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    threading.Thread(target=relay, args=(gateway.proc.stderr,), name="spark-stderr", daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway)


def relay(stream: IO[bytes]) -> None:
    """Copy the JVM's stderr to this process's, line by line, each line one JSON object."""
    for raw in iter(stream.readline, b""):
        text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if not text.strip():
            continue
        if _is_json_object(text):
            data = (text + "\n").encode()
            while data:  # whole lines: a short write continues where it stopped
                data = data[os.write(2, data) :]
        else:
            log.warning(text)


def _is_json_object(text: str) -> bool:
    try:
        doc: Any = json.loads(text)
    except ValueError:
        return False
    return isinstance(doc, dict)
