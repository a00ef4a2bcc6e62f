"""Every writer of the metadata table at once, on S3 (the moto endpoint; conditional-write commits): two
capture processes on one queue, backfill passes for objects whose notifications were lost, and `s3events
maintain` compacting the table back to back. The Delta versions stay contiguous and every object is in
the table exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from deltalake import DeltaTable

from s3events.infra import aws
from tests.conftest import CliResult, run_cli
from tests.integration.test_fault_rate import _lose_every_message
from tests.integration.test_maintenance import MAINTENANCE, conf_args, s3events_exe, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.process]

WAVES = 6
PER_WAVE = 12
LOST = 10  # objects whose notifications never arrive: only backfill finds them


def test_two_captures_a_backfill_and_maintenance_on_one_s3_table_keep_versions_contiguous_and_objects_once(
    make_stack, s3, sqs, aws_options, tmp_path
):
    stack = make_stack(metadata_on_s3=True)
    args = conf_args(stack, **MAINTENANCE, source__queue__long__poll__wait=0)
    capture_args = conf_args(
        stack, **MAINTENANCE, source__queue__long__poll__wait=0, source__queue__max__messages__per__batch=5,
        source__queue__max__batch__seconds=0.2,
    )
    storage = aws.delta_storage_options(aws_options)

    def put(keys: list[str]) -> None:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda k: s3.put_object(Bucket=stack.bucket, Key=k, Body=k.encode()), keys))

    def captured() -> Counter[str]:
        try:
            table = DeltaTable(stack.metadata_path, storage_options=storage)
        except Exception:  # no table yet
            return Counter()
        return Counter(str(k) for k in table.to_pyarrow_table(columns=["key"]).column("key").to_pylist())

    lost = [f"lost/{i}.json" for i in range(LOST)]
    put(lost)
    _lose_every_message(sqs, stack.queue_url)
    waves = [[f"live/{w}/{i}.json" for i in range(PER_WAVE)] for w in range(WAVES)]
    logs = [tmp_path / f"capture-{n}.log" for n in range(2)]
    captures = [
        subprocess.Popen(
            [s3events_exe(), "capture", "--continuous", "--min-sync-interval-seconds", "0", *capture_args],
            stdout=subprocess.DEVNULL, stderr=log.open("wb"), env=os.environ.copy(),
        )
        for log in logs
    ]
    passes: list[CliResult] = []
    backfills: list[CliResult] = []
    done = threading.Event()

    def maintain_until_done() -> None:  # passes back to back, racing the captures' and backfill's commits
        while not done.is_set():
            passes.append(run_cli(["maintain", "--table", "metadata", *args]))

    maintaining = threading.Thread(target=maintain_until_done)
    try:
        put(waves[0])
        wait_for(lambda: set(waves[0]) <= set(captured()), seconds=60, what="the first wave")
        maintaining.start()
        for n, wave in enumerate(waves[1:], start=1):
            put(wave)
            if n in (2, 4):  # backfill passes racing the captures (the second finds nothing new)
                backfills.append(run_cli(["backfill", *args, "--source", f"s3://{stack.bucket}"]))
            wait_for(lambda wave=wave: set(wave) <= set(captured()), seconds=60, what=f"wave {n}")
        done.set()
        maintaining.join(timeout=120)
        passes.append(run_cli(["maintain", "--table", "metadata", *args]))  # after the last commit too
    finally:
        done.set()
        for process in captures:
            process.send_signal(signal.SIGTERM)
        codes = [process.wait(timeout=120) for process in captures]

    texts = [log.read_text() for log in logs]
    assert codes == [0, 0], [t[-3000:] for t in texts]
    assert all("capture cycle: received=" in t for t in texts), "both captures did work"
    failed = [r.stderr for r in passes + backfills if r.returncode]
    assert not failed, failed
    expected = Counter(lost + [k for wave in waves for k in wave])
    assert captured() == expected  # every object once
    table = DeltaTable(stack.metadata_path, storage_options=storage)
    history = table.history()
    versions = sorted(h["version"] for h in history)
    assert versions == list(range(table.version() + 1))  # contiguous: every commit landed exactly once
    writers = Counter(h.get("s3events.writer") for h in history if h["version"] > 0)
    operations = Counter(h["operation"] for h in history)
    assert writers["capture"] >= WAVES and writers["backfill"] >= 1 and operations["OPTIMIZE"] >= 1, (
        writers, operations
    )
    rows = table.to_pyarrow_table(columns=["event_id", "event_source"])
    assert len(set(rows.column("event_id").to_pylist())) == rows.num_rows
    sources: dict[str, Any] = Counter(rows.column("event_source").to_pylist())
    print(f"\n{table.version() + 1} contiguous versions: {dict(operations)}; writers {dict(writers)}; "
          f"rows by source {dict(sources)}; {len(passes)} maintain passes, {len(backfills)} backfills")
