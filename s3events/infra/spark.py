"""The Spark session: created once per process, with the settings this stack needs.

pyspark is imported lazily so capture (which needs no Spark) starts fast and works without Java.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from typing import Any

from s3events.errors import FatalError

MIN_JAVA = 17


def _java_binary() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = os.path.join(java_home, "bin", "java")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def require_java() -> int:
    """The Java major version, or FatalError saying what to install when Java is missing or too old."""
    java = _java_binary()
    if java is None:
        raise FatalError(
            f"Java {MIN_JAVA}+ is required by Spark but no `java` was found on PATH or in JAVA_HOME; "
            f"install it (Debian/Ubuntu: apt-get install openjdk-{MIN_JAVA}-jre-headless)"
        )
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FatalError(f"could not run {java} -version: {exc}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        raise FatalError(f"could not read the Java version from `{java} -version`: {out.stderr.strip()!r}")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8" style
        major = int(match.group(2))
    if major < MIN_JAVA:
        raise FatalError(f"Spark needs Java {MIN_JAVA}+, but {java} is Java {major}")
    return major


def jvm_gone(exc: BaseException) -> FatalError | None:
    """FatalError when `exc` says Spark's JVM stopped answering: py4j cannot reach its gateway because the
    JVM died (its own log says why, e.g. java.lang.OutOfMemoryError). The session cannot be used again and
    a retry cannot help; a new process starts a new JVM. None for any other error.

    Without this, the ConnectionRefusedError py4j raises reads like an unreachable storage endpoint."""
    py4j_error = type(exc).__module__.startswith("py4j.") and type(exc).__name__ == "Py4JNetworkError"
    if not py4j_error and not (isinstance(exc, ConnectionError) and _raised_in_py4j(exc)):
        return None
    return FatalError(
        "Spark's JVM stopped answering: it died (its log above says why, e.g. java.lang.OutOfMemoryError); "
        f"nothing of the batch was committed: restart ingest ({type(exc).__name__}: {exc})"
    )


def _raised_in_py4j(exc: BaseException) -> bool:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and "py4j" in tb.tb_frame.f_code.co_filename


def under_spark_submit() -> bool:
    """True inside a driver launched by spark-submit (its Python runner hands over a gateway)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def get_spark(
    *, master: str | None = None, app_name: str = "s3events", conf: dict[str, str] | None = None
) -> Any:
    """The process's SparkSession (getOrCreate), after checking Java.

    `master=None` keeps what spark-submit was given (`--master`, `--name`, its UI settings); outside
    spark-submit it means `local[*]`. An explicit master (s3events.spark.master) always wins.
    """
    require_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from s3events.infra.spark_log import jvm_log_options, start_jvm_logging_json

    # delta-rs rejects named zones such as "Etc/UTC" in timestamps; UTC is what we write.
    options = {"spark.sql.session.timeZone": "UTC", "spark.sql.execution.arrow.pyspark.enabled": "true"}
    if master is not None:
        options["spark.master"] = master
    if not under_spark_submit():
        options |= {"spark.master": master or "local[*]", "spark.app.name": app_name}
        options["spark.ui.enabled"] = "false"
    options |= conf or {}
    options |= jvm_log_options(options)  # s3events.log.format=json: the JVM logs JSON lines too
    start_jvm_logging_json(options)
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    # pyspark installs its own SIGINT handler (cancel jobs, raise KeyboardInterrupt) when the context
    # starts; ours only sets the stop flag so the batch in hand finishes. Keep ours.
    previous = (
        signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    )
    session = builder.getOrCreate()
    if previous is not None:
        signal.signal(signal.SIGINT, previous)
    return session
