"""`s3events ingest --once` submitted to a real Spark standalone cluster (a master and one worker).

The cluster runs from the pyspark wheel's own distribution: the wheel ships `bin/spark-class` and the
`org.apache.spark.deploy.master.Master` / `...worker.Worker` classes but not `sbin/start-master.sh` /
`start-worker.sh`, so both daemons are started here with `spark-class` as child processes this module
owns (each the leader of its own process group, so the teardown takes the worker's executors and their
Python workers down with it). Everything binds 127.0.0.1 on free ports; the daemons' work, log, pid and
conf directories are temporary.

What a cluster changes compared with `local[N]`: the files are read by an executor that the *worker*
launched, in a process that inherits nothing from the driver. Here the worker starts without AWS
credentials in its environment; the executor gets the local endpoint's fake ones only through
`spark.executorEnv.*` (on EMR / EKS they come from the instance or pod role instead). The executor
imports `s3events` because `PYSPARK_PYTHON` is this venv's interpreter, where the package is installed;
on a real cluster the package must reach the executors through the image / bootstrap action (a wheel
from `pip wheel .`) or `--py-files`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark
import pytest

from s3events.capture.service import run_capture
from s3events.config import load_settings
from s3events.dev.local_endpoint import free_port
from tests.conftest import JVM_TEST_OPTIONS, REPO, Stack, read_table

pytestmark = [pytest.mark.integration, pytest.mark.process, pytest.mark.cluster]

VENV_PYTHON = Path(sys.executable)
SPARK_SUBMIT = VENV_PYTHON.parent / "spark-submit"
SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
MAIN_SCRIPT = Path("bin/s3events_main.py")  # relative: spark-submit runs from the repository root

APP_NAME = "s3events-ingest"  # what s3events/ingest/service.py names its session
REGISTER_DEADLINE_SECONDS = 120  # two JVMs starting on a busy 2-core machine take 10-30 s
SUBMIT_TIMEOUT_SECONDS = 180

KEYS = ["cluster/day one/a+b %.json", "cluster/ü/€ 2.json"]


@dataclass
class Cluster:
    master_url: str  # spark://127.0.0.1:<port>
    ui_url: str  # the master's web UI, whose /json/ is polled
    work_dir: Path  # SPARK_WORKER_DIR: <app id>/<executor id>/{stdout,stderr}
    log_dir: Path

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as response:
            return json.load(response)

    def logs(self) -> str:
        parts = []
        for path in sorted(self.log_dir.glob("*.log")):
            parts.append(f"--- {path.name} (last 4000 chars)\n{path.read_text(errors='replace')[-4000:]}")
        return "\n".join(parts)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the child's process group, then SIGKILL whatever is left of it."""
    for signum, grace in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 30.0)):
        with contextlib.suppress(ProcessLookupError):  # the group is gone already
            os.killpg(proc.pid, signum)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        with contextlib.suppress(ProcessLookupError):  # the leader is gone: take the rest too
            os.killpg(proc.pid, signal.SIGKILL)
        return


def _cluster_env(tmp: Path) -> dict[str, str]:
    """The daemons' environment: no AWS credentials (as on a cluster node without a role), no driver
    Python override, temporary dirs and an empty SPARK_CONF_DIR so no stray spark-defaults apply."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    dirs = {name: tmp / name for name in ("work", "logs", "pids", "conf")}
    for path in dirs.values():
        path.mkdir()
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_WORKER_DIR=str(dirs["work"]),
        SPARK_LOG_DIR=str(dirs["logs"]),
        SPARK_PID_DIR=str(dirs["pids"]),
        SPARK_CONF_DIR=str(dirs["conf"]),
        SPARK_DAEMON_MEMORY="512m",
        SPARK_DAEMON_JAVA_OPTS=JVM_TEST_OPTIONS,  # the daemons, as the tests' other JVMs (conftest.py)
        # The master's REST submission server listens on the fixed port 6066 unless disabled.
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
        PYSPARK_PYTHON=str(VENV_PYTHON),
    )
    return env


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("standalone")
    env = _cluster_env(tmp)
    port, ui_port, worker_port, worker_ui_port = (free_port() for _ in range(4))
    cluster = Cluster(
        master_url=f"spark://127.0.0.1:{port}",
        ui_url=f"http://127.0.0.1:{ui_port}",
        work_dir=Path(env["SPARK_WORKER_DIR"]),
        log_dir=Path(env["SPARK_LOG_DIR"]),
    )
    commands = {
        "master": [
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)),
        ],
        "worker": [
            "org.apache.spark.deploy.worker.Worker",
            cluster.master_url,
            *("--host", "127.0.0.1", "--port", str(worker_port), "--webui-port", str(worker_ui_port)),
            *("--cores", "1", "--memory", "1g", "--work-dir", env["SPARK_WORKER_DIR"]),
        ],
    }
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name, args in commands.items():
            with (cluster.log_dir / f"{name}.log").open("wb") as log:
                procs[name] = subprocess.Popen(
                    [str(SPARK_CLASS), *args],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    cwd=tmp,
                    start_new_session=True,
                )
        _wait_for_worker(cluster, procs)
        yield cluster
    finally:
        for proc in reversed(list(procs.values())):  # the worker (and its executors) first
            _kill_group(proc)


def _wait_for_worker(cluster: Cluster, procs: dict[str, subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + REGISTER_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        for name, proc in procs.items():
            if proc.poll() is not None:
                pytest.fail(f"the standalone {name} exited ({proc.returncode}) at start-up\n{cluster.logs()}")
        try:
            state = cluster.state()
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            state = {}
        workers = state.get("workers", [])
        if state.get("status") == "ALIVE" and any(w.get("state") == "ALIVE" for w in workers):
            return
        time.sleep(0.25)  # polling a child process's readiness against a deadline
    pytest.fail(f"no worker registered with the master within {REGISTER_DEADLINE_SECONDS}s\n{cluster.logs()}")


# ------------------------------------------------------------------------------------------- helpers


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _land_and_capture(stack: Stack, s3: Any) -> None:
    """PUT the files, then let capture turn their notifications into metadata rows."""
    s3.put_object(Bucket=stack.bucket, Key=KEYS[0], Body=_jsonl([{"id": 1}, {"id": 2}]))
    s3.put_object(Bucket=stack.bucket, Key=KEYS[1], Body=_jsonl([{"id": 3}]))
    run_capture(load_settings(None, stack.conf()), once=True)


def _spark_submit(
    cluster: Cluster, app_args: Sequence[str], log: Path, *, script: Path = MAIN_SCRIPT
) -> tuple[int, str]:
    """`spark-submit --master spark://... bin/s3events_main.py APP_ARGS` from the repository root, in
    its own process group (killed whole on timeout). Returns (exit code, output)."""
    # PYSPARK_PYTHON: the executors' Python is this venv's, so they import s3events (and pyarrow, boto3)
    # from it. On a real cluster the package must reach the executors another way: a wheel from
    # `pip wheel .` installed in the image / by a bootstrap action, or `--py-files`.
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": str(VENV_PYTHON)}
    env.pop("PYSPARK_DRIVER_PYTHON", None)  # the driver must be the venv's python too
    spark_conf = {
        # Executors get credentials only from here (the worker has none); on a cluster: the role.
        **{f"spark.executorEnv.{k}": env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")},
        "spark.executorEnv.AWS_REGION": "us-east-1",
        "spark.executor.memory": "512m",
        "spark.executor.extraJavaOptions": JVM_TEST_OPTIONS,
        "spark.cores.max": "1",
    }
    command = [
        str(SPARK_SUBMIT),
        *("--master", cluster.master_url, "--deploy-mode", "client", "--name", "s3events-ingest"),
        *[arg for kv in spark_conf.items() for arg in ("--conf", "=".join(kv))],
        str(script),
        *app_args,
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = proc.wait(timeout=SUBMIT_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            pytest.fail(f"spark-submit did not finish in {SUBMIT_TIMEOUT_SECONDS}s\n{log.read_text()}")
    return code, log.read_text(errors="replace")


def _ingest_args(stack: Stack, target: str, **extra: object) -> list[str]:
    conf = stack.conf(
        ingest__targets="c", ingest__target__c__path=target, ingest__target__c__format="json", **extra
    )
    return ["ingest", "--once", *[arg for kv in conf for arg in ("--conf", kv)]]


def _finished_apps(cluster: Cluster, known: set[str]) -> list[dict[str, Any]]:
    """Applications not in `known` that the master has finished. One still listed as active (the
    master records the end just after the driver unregisters) is waited for, against a deadline."""
    deadline = time.monotonic() + 30
    while True:
        state = cluster.state()
        active = [a for a in state.get("activeapps", []) if a["id"] not in known]
        if not active or time.monotonic() > deadline:
            return [a for a in state.get("completedapps", []) if a["id"] not in known]
        time.sleep(0.25)  # polling the master's state against a deadline


def _assert_rows(stack: Stack, target: str) -> None:
    rows = sorted(read_table(target), key=lambda r: r["id"])
    assert [(r["id"], r["_source_file"], r["_source_line"]) for r in rows] == [
        (1, f"s3://{stack.bucket}/{KEYS[0]}", 1),
        (2, f"s3://{stack.bucket}/{KEYS[0]}", 2),
        (3, f"s3://{stack.bucket}/{KEYS[1]}", 1),
    ]


def _assert_ran_on_the_cluster(cluster: Cluster, before: set[str], output: str) -> None:
    apps = _finished_apps(cluster, before)
    assert [(a["name"], a["state"]) for a in apps] == [(APP_NAME, "FINISHED")], (
        f"the master ran no {APP_NAME} application: {apps}\n{output[-6000:]}"
    )
    # The worker launched an executor for it, and that executor ran the read tasks.
    executor_logs = list((cluster.work_dir / apps[0]["id"]).glob("*/stderr"))
    assert executor_logs, f"no executor directory under {cluster.work_dir / apps[0]['id']}"
    texts = [path.read_text(errors="replace") for path in executor_logs]
    assert any("Finished task" in text for text in texts), "\n".join(text[-4000:] for text in texts)


def _app_ids(cluster: Cluster) -> set[str]:
    state = cluster.state()
    return {a["id"] for a in [*state.get("activeapps", []), *state.get("completedapps", [])]}


# ------------------------------------------------------------------------------------------- tests


def test_ingest_once_on_a_standalone_cluster_reads_on_the_worker_and_writes_the_target(
    cluster, make_stack, s3, tmp_path
):
    stack = make_stack()
    _land_and_capture(stack, s3)
    target = str(tmp_path / "cluster-target")
    before = _app_ids(cluster)

    # spark-submit's --master alone decides where the session runs (s3events.spark.master is unset). The
    # batch is small: without driver.read.max.bytes=0 the driver's threads would read it, not the worker.
    args = _ingest_args(stack, target, ingest__target__c__driver__read__max__bytes=0)
    code, output = _spark_submit(cluster, args, tmp_path / "submit.log")

    assert code == 0, output
    assert "ingest batch: target=c files=2 rows=3" in output  # PythonRunner: our stderr on its stdout
    _assert_rows(stack, target)
    _assert_ran_on_the_cluster(cluster, before, output)


# The session `s3events ingest` reads with, created as SparkRead.spark creates it, then stopped: checks that
# spark-submit's --master is kept at the cost of one driver start (a whole `ingest --once` costs more).
SESSION_PROBE = """
import sys

from s3events.config import load_settings
from s3events.ingest.service import SparkRead

settings = load_settings(None, sys.argv[1:])
settings.validate_for("ingest")
session = SparkRead(settings).spark
print("session master:", session.sparkContext.master, flush=True)
session.stop()
"""


def test_spark_submit_master_alone_puts_the_ingest_session_on_the_cluster(cluster, tmp_path):
    probe = tmp_path / "session_probe.py"
    probe.write_text(SESSION_PROBE, encoding="utf-8")
    conf = [
        f"s3events.metadata.table.path={tmp_path / 'metadata'}",
        "s3events.ingest.targets=c",
        f"s3events.ingest.target.c.path={tmp_path / 'target'}",
        "s3events.ingest.target.c.format=json",
    ]  # no s3events.spark.master: spark-submit's --master alone should decide

    code, output = _spark_submit(cluster, conf, tmp_path / "submit.log", script=probe)

    assert code == 0, output
    assert f"session master: {cluster.master_url}" in output.splitlines(), output[-6000:]
