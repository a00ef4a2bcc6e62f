"""Ingest as real OS processes: SIGKILL mid-run and resume, SIGTERM, spark-submit, exit codes.

Every ingest here is the venv's `s3events` console script (or `spark-submit bin/s3events_main.py`) in a
child process with its own Spark session, so what is checked is what an operator sees: the true exit
code, the log lines, and the target tables on disk after the process is gone. A continuous ingest runs
in its own process group, so a SIGKILL takes its JVM down with it (Spark's Python daemon notices and
exits), as a container or OOM kill would. Kill points are conditions polled on the target table:
right after a commit, and inside a batch whose executors have written Parquet files that no commit
references yet.

Each process starts its own Spark session (seconds each, far more on a busy machine), so this file keeps
the number of processes and batches small: a run that only resumes from what a stopped process left on
disk (after a SIGKILL, a stop signal or a race) is `ingest --once` in the test process, on the worker's
Spark session; the exit codes of `--once` itself are checked by the child processes of section 4.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from s3events.config import load_settings
from s3events.events.model import ObjectEvent
from s3events.events.record import EventRecord
from s3events.ingest.model import Checkpoint
from s3events.ingest.service import run_ingest
from s3events.ingest.target_table import TargetTable
from s3events.metadata.table import MetadataTable
from tests.conftest import REPO, Stack, put_objects, read_table, run_cli, spark_env, write_metadata_version

pytestmark = [pytest.mark.integration, pytest.mark.process]

VENV_BIN = Path(sys.executable).parent
S3EVENTS = VENV_BIN / "s3events"
SPARK_SUBMIT = VENV_BIN / "spark-submit"

# Eight batches of five small files (the sixth spans the two metadata versions): room for a kill after
# the first commit or inside the fourth batch or a later one, with batches left for the resuming run.
# Each batch is a Spark job and a Delta commit (in a child on local[1]), so its count, not its size, is
# what a run costs.
FILES = 40
LINES_PER_FILE = 3
BATCH_FILES = 5


def _batches(files: int) -> int:
    """Data commits of a whole run: a batch never spans past BATCH_FILES entries (the version boundary
    does not cut a batch short), so ceil(files / BATCH_FILES)."""
    return -(-files // BATCH_FILES)


def _expected(files: int) -> Counter[tuple[int, int]]:
    return Counter({(i, n): 1 for i in range(files) for n in range(LINES_PER_FILE)})


# ------------------------------------------------------------------------------------------- helpers


def _conf_args(pairs: Sequence[str]) -> list[str]:
    return [arg for kv in pairs for arg in ("--conf", kv)]


def _resume_once(conf: Sequence[str], spark: Any) -> None:
    """What `ingest --once` does in a new process, run here on the worker's Spark session: everything a
    stopped process left is on disk (commits, checkpoints in them, uncommitted Parquet), none in memory."""
    settings = load_settings(None, conf)
    settings.validate_for("ingest")
    totals = run_ingest(settings, once=True, spark=spark)
    assert not totals.failed, totals


def _ingest_conf(stack: Stack, targets: dict[str, dict[str, object]]) -> list[str]:
    """`--conf` pairs for the stack plus `targets` ({name: {key suffix with '__' for '.': value}})."""
    # local[1]: a batch of a few small files is a handful of tiny tasks; one core runs them about twice
    # as fast as two on a busy 2-CPU machine (measured), and a kill still lands mid-job.
    conf: dict[str, object] = {"ingest__targets": ",".join(targets), "spark__master": "local[1]"}
    for name, keys in targets.items():
        conf.update({f"ingest__target__{name}__{k}": v for k, v in keys.items()})
    return stack.conf(**conf)


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _land_numbered_files(stack: Stack, s3: Any, files: int) -> int:
    """PUT `files` JSON-lines files of unique (file, n) rows and record them in two metadata versions
    (the first ~60% in version 1, the rest in version 2), so batches of BATCH_FILES cross a version
    boundary and checkpoints carry both a version and a position inside the next version.
    Returns the metadata table's latest version."""
    keys = [f"n/{i:03d}.json" for i in range(files)]
    bodies = {key: _jsonl([{"file": i, "n": n} for n in range(LINES_PER_FILE)]) for i, key in enumerate(keys)}
    put_objects(s3, stack.bucket, bodies)
    split = files * 6 // 10 + 5  # not a multiple of BATCH_FILES: one batch spans both versions
    write_metadata_version(stack, keys[:split], s3)
    return write_metadata_version(stack, keys[split:], s3)


def _version(path: str) -> int | None:
    try:
        return DeltaTable(path).version()
    except TableNotFoundError:
        return None


def _lines(path: str) -> Counter[tuple[int, int]]:
    return Counter((r["file"], r["n"]) for r in read_table(path))


def _start(args: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    """The real command in a child process that leads its own process group (its JVM and Spark's Python
    workers are in that group too)."""
    return subprocess.Popen(
        [str(S3EVENTS), *args],
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
        env=spark_env(),
        start_new_session=True,
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's process group (the child and everything it started)."""
    with contextlib.suppress(ProcessLookupError):  # the group is gone already
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def _uncommitted_parquet(path: str) -> set[str]:
    """Data files in the target's directory that no commit references (an executor wrote them for a
    batch whose commit has not happened, or never will)."""
    on_disk = {str(p) for p in Path(path).rglob("*.parquet")}
    return on_disk - _committed_files(path)  # listed first: a file committed meanwhile is no orphan


def _committed_files(path: str) -> set[str]:
    return {uri.removeprefix("file://") for uri in DeltaTable(path).file_uris()}


def _after_commits(n: int) -> Callable[[str], bool]:
    def reached(path: str) -> bool:
        version = _version(path)
        return version is not None and version >= n  # version 0 is the empty CREATE: n data commits

    reached.__doc__ = f"after {n} data commit(s)"
    return reached


def _writing_after_commits(n: int) -> Callable[[str], bool]:
    def reached(path: str) -> bool:
        return _after_commits(n)(path) and bool(_uncommitted_parquet(path))

    reached.__doc__ = f"after {n} data commits, while the next batch's Parquet files are not committed yet"
    return reached


def _wait_until(
    condition: Callable[[str], bool],
    path: str,
    proc: subprocess.Popen[bytes],
    log: Path,
    *,
    last_version: int,
    deadline_seconds: float = 200,
) -> None:
    """Poll `condition(path)` until it holds. Fail when the process ends, the target reaches
    `last_version` (the run got to its end first) or the deadline passes."""
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        if condition(path):
            return
        if proc.poll() is not None:
            pytest.fail(f"ingest exited ({proc.returncode}) before: {condition.__doc__}\n{log.read_text()}")
        if (_version(path) or 0) >= last_version:
            pytest.fail(f"the run finished before: {condition.__doc__}\n{log.read_text()}")
        time.sleep(0.01)  # the polling interval of a condition with a deadline
    pytest.fail(f"not reached in {deadline_seconds}s: {condition.__doc__}\n{log.read_text()}")


def _frozen_when(
    condition: Callable[[str], bool],
    path: str,
    proc: subprocess.Popen[bytes],
    log: Path,
    *,
    last_version: int,
) -> None:
    """`_wait_until(condition)`, then freeze the child's process group (SIGSTOP) and look again: a commit
    can land between the look and the stop. Returns with the group frozen in a state where `condition`
    holds; when it no longer does, the child goes on (SIGCONT) to its next batch, the next chance."""
    while True:
        _wait_until(condition, path, proc, log, last_version=last_version)
        os.killpg(proc.pid, signal.SIGSTOP)
        if condition(path):
            return
        os.killpg(proc.pid, signal.SIGCONT)


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Child processes a test started; any still running at the end are killed with their groups."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            _kill_group(proc)


def _numbers_target(stack: Stack, target: str, **extra: object) -> list[str]:
    return _ingest_conf(
        stack, {"k": {"path": target, "format": "json", "max__files__per__batch": BATCH_FILES, **extra}}
    )


def _assert_committed_once(target: str, files: int) -> None:
    """What is committed so far holds no line twice and is not everything yet."""
    lines = _lines(target) if _version(target) is not None else Counter()
    assert lines and max(lines.values()) == 1, lines
    assert lines.keys() < _expected(files).keys(), "the process got to the end before it was stopped"


def _assert_exactly_once_and_checkpointed(target: str, name: str, metadata_path: str, files: int) -> None:
    assert _lines(target) == _expected(files)  # every (file, n) present, none twice
    table = DeltaTable(target)
    assert table.transaction_version(f"s3events.ingest/{name}") == DeltaTable(metadata_path).version()
    assert table.transaction_version(f"s3events.ingest/{name}/position") == 0
    versions = sorted(h["version"] for h in table.history())
    assert versions == list(range(table.version() + 1))  # contiguous


# ------------------------------------------------------------------------ 1. SIGKILL, resume, once


@pytest.mark.chaos
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "kill_when",
    [_after_commits(1), _writing_after_commits(3)],
    ids=["right-after-the-first-commit", "mid-batch-after-three-commits-with-parquet-written-not-committed"],
)
def test_continuous_ingest_sigkilled_mid_run_then_once_lands_every_line_exactly_once(
    make_stack, s3, spark, tmp_path, children, kill_when
):
    stack = make_stack()
    # The fast path reads a batch of five small files in well under a second, in the driver or in one
    # Spark task: too short a window to see its Parquet written and not committed on a busy machine. The
    # line path's Spark jobs (schema inference, then the read) leave about a second, once per batch: twice
    # the files give the poll thirteen such windows after the third commit instead of five (a loaded CI
    # machine missed all five once).
    mid_write = "not committed" in (kill_when.__doc__ or "")
    files = 2 * FILES if mid_write else FILES
    _land_numbered_files(stack, s3, files)
    target = str(tmp_path / "numbers")
    conf = _numbers_target(stack, target, **({"json__fast__path": "false"} if mid_write else {}))
    log = tmp_path / "continuous.log"
    proc = _start(["ingest", "--continuous", *_conf_args(conf)], log)
    children.append(proc)

    _frozen_when(kill_when, target, proc, log, last_version=_batches(files))
    _kill_group(proc)  # no clean shutdown: whatever was in flight is simply gone
    assert proc.returncode == -signal.SIGKILL
    _assert_committed_once(target, files)
    orphans = _uncommitted_parquet(target)
    # Killed mid-write, the batch's Parquet is there uncommitted. "Right after the first commit" is a
    # look, then a freeze: on a loaded machine the next batch's fast write can land in between.
    assert orphans or not mid_write

    _resume_once(conf, spark)

    _assert_exactly_once_and_checkpointed(target, "k", stack.metadata_path, files)
    assert not orphans & _committed_files(target)  # the killed batch's files stay unreferenced


# ------------------------------------------------------------ two ingest processes on one target


@pytest.mark.timeout(600)
def test_two_ingest_processes_on_one_target_never_commit_a_batch_twice(
    make_stack, s3, spark, tmp_path, children
):
    """A misconfiguration (two deployments of one target) must cost retries, never duplicate rows:
    a batch is committed only if the checkpoint it started from is still the one in the commit's own
    snapshot, and delta-rs refuses a concurrent commit of the same app transaction."""
    files = 60  # twelve batches: both processes start their JVMs at once and still overlap on some
    stack = make_stack()
    _land_numbered_files(stack, s3, files)
    target = str(tmp_path / "numbers")
    conf = _numbers_target(stack, target)
    logs = [tmp_path / f"ingest-{i}.log" for i in range(2)]
    procs = [_start(["ingest", "--once", *_conf_args(conf)], log) for log in logs]
    children.extend(procs)
    codes = [proc.wait(timeout=400) for proc in procs]
    assert set(codes) <= {0, 1}, [log.read_text() for log in logs]

    _resume_once(conf, spark)  # whatever a refused batch left

    _assert_exactly_once_and_checkpointed(target, "k", stack.metadata_path, files)
    refusal = re.compile("another|Concurrent transaction|move backwards")
    refused = [log for log in logs if refusal.search(log.read_text())]
    assert refused, "the two processes never overlapped on a batch: " + logs[0].read_text()[-2000:]


# ---------------------------------------------------------------------------------- 2. SIGTERM


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "signum",
    [
        pytest.param(signal.SIGTERM, id="SIGTERM"),
        pytest.param(signal.SIGINT, id="SIGINT"),
    ],
)
def test_stop_signal_finishes_the_batch_in_hand_exits_0_and_once_finishes_the_rest_exactly_once(
    make_stack, s3, spark, tmp_path, children, signum
):
    # 8 batches: the signal lands in one of the first (on a loaded machine the poll may see the first
    # commit only after the next ones: with 3 batches, CI once saw the run end first); the rest is --once's
    files = 40
    stack = make_stack()
    _land_numbered_files(stack, s3, files)
    target = str(tmp_path / "numbers")
    conf = _numbers_target(stack, target)
    log = tmp_path / "continuous.log"
    proc = _start(["ingest", "--continuous", *_conf_args(conf)], log)
    children.append(proc)
    _wait_until(_after_commits(1), target, proc, log, last_version=_batches(files))

    proc.send_signal(signum)  # the process only, as a container runtime stops its PID 1 or `kill -INT`
    code = proc.wait(timeout=120)

    output = log.read_text()
    assert code == 0, output
    assert f"{signal.Signals(signum).name} received: finishing the batch in hand" in output
    assert "ingest finished:" in output
    _assert_committed_once(target, files)
    assert not _uncommitted_parquet(target), "a batch was abandoned instead of finished"
    _resume_once(conf, spark)
    _assert_exactly_once_and_checkpointed(target, "k", stack.metadata_path, files)


# ----------------------------------------------------------------------------- 3. spark-submit


@pytest.mark.cluster
def test_ingest_once_under_spark_submit_writes_the_target_and_exits_0(make_stack, s3, tmp_path):
    stack = make_stack()
    keys = ["ss/day one/a+b %.json", "ss/ü/€ 2.json"]
    s3.put_object(Bucket=stack.bucket, Key=keys[0], Body=_jsonl([{"id": 1}, {"id": 2}]))
    s3.put_object(Bucket=stack.bucket, Key=keys[1], Body=_jsonl([{"id": 3}]))
    latest = write_metadata_version(stack, keys, s3)
    target = str(tmp_path / "ss")
    conf = _ingest_conf(stack, {"s": {"path": target, "format": "json"}})

    result = subprocess.run(
        [
            str(SPARK_SUBMIT),
            "--master",
            "local[1]",
            "bin/s3events_main.py",
            "ingest",
            "--once",
            *_conf_args(conf),
        ],
        cwd=REPO,
        env=spark_env(),
        capture_output=True,
        text=True,
        timeout=150,
    )

    output = result.stdout + result.stderr  # PythonRunner merges our stderr into its stdout
    assert result.returncode == 0, output
    assert "ingest batch: target=s files=2 rows=3" in result.stdout
    rows = sorted(read_table(target), key=lambda r: r["id"])
    assert [(r["id"], r["_source_file"], r["_source_line"]) for r in rows] == [
        (1, f"s3://{stack.bucket}/{keys[0]}", 1),
        (2, f"s3://{stack.bucket}/{keys[0]}", 2),
        (3, f"s3://{stack.bucket}/{keys[1]}", 1),
    ]
    assert DeltaTable(target).transaction_version("s3events.ingest/s") == latest


# ------------------------------------------------------------------------------- 4. exit codes


def test_checkpoint_that_would_move_a_target_backwards_exits_2_with_one_line(make_stack, s3, tmp_path):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="c/1.json", Body=_jsonl([{"x": 1}]))
    write_metadata_version(stack, ["c/1.json"], s3)
    s3.put_object(Bucket=stack.bucket, Key="c/2.json", Body=_jsonl([{"x": 2}]))
    write_metadata_version(stack, ["c/2.json"], s3)
    target = str(tmp_path / "c")
    # The target's checkpoint says metadata version 2 is fully ingested (as an ingest commit records it).
    TargetTable(target, "s3events.ingest/c", storage_options={}).commit_append(
        [],
        schema=pa.schema([("x", pa.int64())]),
        partition_by=(),
        expected=None,
        end=Checkpoint(2, 0),
    )
    version_before = DeltaTable(target).version()
    conf = _ingest_conf(stack, {"c": {"path": target, "format": "json"}})

    result = run_cli(["ingest", "--once", "--checkpoint", "0", *_conf_args(conf)], env=spark_env())

    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "backwards" in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert DeltaTable(target).version() == version_before
    assert DeltaTable(target).transaction_version("s3events.ingest/c") == 2


def test_checkpoint_refused_for_one_of_two_targets_names_that_target(tmp_path):
    metadata = str(tmp_path / "metadata")
    now = datetime.now(UTC)
    for key in ("k1", "k2"):  # metadata versions 1 and 2 (no S3 needed: nothing is read)
        event = ObjectEvent(
            bucket="b", key=key, event_name="ObjectCreated:Put", event_time=now, size=1, etag=key
        )
        record = EventRecord(event=event, source="sqs", captured_at=now, message_id=key)
        MetadataTable(metadata, storage_options={}).commit([record], custom_metadata={})
    conf = [f"s3events.metadata.table.path={metadata}", "s3events.ingest.targets=behind,ahead"]
    for name, version in (("behind", 1), ("ahead", 2)):
        path = str(tmp_path / name)
        TargetTable(path, f"s3events.ingest/{name}", storage_options={}).commit_append(
            [], schema=pa.schema([("x", pa.int64())]), partition_by=(), expected=None,
            end=Checkpoint(version, 0),
        )  # fmt: skip
        conf += [f"s3events.ingest.target.{name}.path={path}", f"s3events.ingest.target.{name}.format=json"]

    result = run_cli(["ingest", "--once", "--checkpoint", "1", *_conf_args(conf)], env=spark_env())

    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "backwards" in lines[0], result.stderr
    assert "ahead" in lines[0], result.stderr


def test_undeclared_target_name_exits_2_naming_it(make_stack, tmp_path):
    stack = make_stack()
    conf = _ingest_conf(stack, {"a": {"path": str(tmp_path / "a"), "format": "json"}})

    result = run_cli(["ingest", "--once", "--target", "nosuch", *_conf_args(conf)], env=spark_env())

    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "nosuch" in lines[0], result.stderr
    assert not (tmp_path / "a").exists()


def test_failing_target_makes_once_exit_1_while_the_other_target_is_written(make_stack, s3, tmp_path):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="a/1.json", Body=_jsonl([{"x": 1}, {"x": 2}]))
    s3.put_object(Bucket=stack.bucket, Key="b/1.json", Body=_jsonl([{"y": 1}]))
    latest = write_metadata_version(stack, ["a/1.json", "b/1.json"], s3)
    # A failure only the batch can meet (start-up checks catch a bad table location before any work).
    s3.delete_object(Bucket=stack.bucket, Key="b/1.json")
    conf = _ingest_conf(
        stack,
        {
            "a": {"path": str(tmp_path / "a"), "format": "json", "key__prefix": "a/"},
            "b": {
                "path": str(tmp_path / "b"),
                "format": "json",
                "key__prefix": "b/",
                "on__missing__object": "fail",
            },
        },
    )

    result = run_cli(["ingest", "--once", *_conf_args(conf)], env=spark_env(), timeout=240)

    assert result.returncode == 1, result.stderr
    assert "s3events: target b failed" in result.stderr
    assert "target a failed" not in result.stderr
    assert sorted(r["x"] for r in read_table(str(tmp_path / "a"))) == [1, 2]
    assert DeltaTable(str(tmp_path / "a")).transaction_version("s3events.ingest/a") == latest
    assert not (tmp_path / "b" / "_delta_log").exists()  # nothing committed, so it is retried next run
