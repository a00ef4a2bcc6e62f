"""The embedded endpoint (demo, tests, benchmarks) does not outlive a process killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.process, pytest.mark.chaos]

STARTER = """
import sys
from s3events.dev.local_endpoint import LocalEndpoint
endpoint = LocalEndpoint().start()
print(endpoint._process.pid, flush=True)
sys.stdin.read()  # until killed
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is gone for our purpose
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux only")
def test_moto_server_ends_when_its_parent_is_killed():
    parent = subprocess.Popen(
        [sys.executable, "-c", STARTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    moto_pid = int(parent.stdout.readline())
    assert alive(moto_pid)

    parent.send_signal(signal.SIGKILL)
    parent.wait()

    deadline = time.monotonic() + 20
    while alive(moto_pid) and time.monotonic() < deadline:
        time.sleep(0.1)  # waiting for another process to exit, not for a result to appear
    assert not alive(moto_pid), "moto_server outlived its SIGKILLed parent"
