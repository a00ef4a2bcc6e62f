"""The benchmarks' CPU split (`Measure`) follows each process by pid: one whose parent exits mid-block is
re-parented outside this process tree and still counted, and no kind's figure goes below zero."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from benchmarks.harness.procs import Measure, own_cpu

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")

SPIN = "while True: pass"


def cpu_reaches(pid: int, seconds: float, deadline: float = 120.0) -> None:
    """Waits until `pid` has used `seconds` of CPU (a CPU amount, not a wall time: load only slows it)."""
    give_up = time.monotonic() + deadline
    while (own_cpu(pid) or 0.0) < seconds:
        assert time.monotonic() < give_up, f"process {pid} did not reach {seconds} s of CPU"
        time.sleep(0.02)


def test_a_worker_whose_parent_exits_mid_block_is_still_counted_and_no_kind_goes_negative() -> None:
    # The parent starts a spinning grandchild, prints its pid and waits for its stdin to close.
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {SPIN!r}]); "
            "print(p.pid, flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None and parent.stdin is not None
    spinner = int(parent.stdout.readline())
    try:
        cpu_reaches(spinner, 0.3)  # CPU it used before the block: not the block's
        with Measure(every=0.05) as measured:
            before = own_cpu(spinner) or 0.0
            parent.stdin.close()
            parent.wait(timeout=60)  # the spinner is re-parented outside this tree now
            cpu_reaches(spinner, before + 0.8)
            os.kill(spinner, signal.SIGKILL)
    finally:
        parent.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(spinner, signal.SIGKILL)
    assert min(measured.split.values()) >= 0.0, measured.split
    # The spinner's 0.8 s, less at most its last sampling interval's worth, and nothing of before.
    assert 0.5 <= measured.split["driver"] < 0.8 + 0.3 + 2.0, measured.split
