"""A local metadata table that becomes unwritable while capture runs (a read-only remount, an immutable
directory): the continuous process stops with one fatal line and exit 3, and no message whose events were
not committed is deleted: they stay in the queue, and land once the directory is writable again."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import read_table, run_cli
from tests.integration.test_startup_errors import _unwritable

pytestmark = [pytest.mark.integration, pytest.mark.process, pytest.mark.chaos]


def _queued(sqs, queue_url: str) -> int:
    depth = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    return int(depth["ApproximateNumberOfMessages"]) + int(depth["ApproximateNumberOfMessagesNotVisible"])


def _visible(sqs, queue_url: str) -> int:
    depth = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(depth["Attributes"]["ApproximateNumberOfMessages"])


def _keys(path: str) -> Counter[str]:
    try:
        return Counter(str(row["key"]) for row in read_table(path))
    except Exception:  # no table yet
        return Counter()


def test_a_metadata_directory_made_unwritable_mid_run_stops_capture_and_deletes_no_message(
    make_stack, s3, sqs, tmp_path
):
    stack = make_stack(VisibilityTimeout="2")
    exe = str(Path(sys.executable).with_name("s3events"))
    args = [arg for kv in stack.conf(source__queue__visibility__timeout=2) for arg in ("--conf", kv)]
    log = tmp_path / "capture.log"
    process = subprocess.Popen(
        [exe, "capture", "--continuous", "--min-sync-interval-seconds", "1", *args],
        stdout=subprocess.DEVNULL, stderr=log.open("wb"),
    )
    table = Path(stack.metadata_path)
    try:
        s3.put_object(Bucket=stack.bucket, Key="in/first.json", Body=b'{"a": 1}\n')
        deadline = time.monotonic() + 60
        while _keys(stack.metadata_path) != Counter(["in/first.json"]):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)  # polling a condition
        # The table directory and its log can no longer take a file (root included: chattr +i).
        with _unwritable(table), _unwritable(table / "_delta_log"):
            for n in range(2):
                s3.put_object(Bucket=stack.bucket, Key=f"in/later-{n}.json", Body=b'{"a": 2}\n')
            try:
                code = process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                pytest.fail(f"capture still runs on an unwritable table: {log.read_text()[-3000:]}")
            assert _queued(sqs, stack.queue_url) == 2  # nothing acknowledged that was not committed
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    text = log.read_text()
    assert code == 3, text[-3000:]
    assert "Traceback" not in text and "\x1b" not in text, text[-5000:]
    fatal = [line for line in text.splitlines() if "fatal" in line]
    # The last line, and the only one of ours. (delta-rs may print a panic of its writer task, "Already
    # shut down", to stderr before: Rust's panic hook writes it, not us.)
    assert len(fatal) == 1 and text.rstrip().splitlines()[-1] == fatal[0], text[-3000:]
    assert "metadata table" in fatal[0] and stack.metadata_path in fatal[0], fatal[0]
    print(f"\n{fatal[0]}")
    assert _keys(stack.metadata_path) == Counter(["in/first.json"])

    # Writable again: the messages still in the queue (visible again after their timeout) bring their
    # events in, once.
    deadline = time.monotonic() + 60
    while _visible(sqs, stack.queue_url) < 2:
        assert time.monotonic() < deadline, "the messages never became visible again"
        time.sleep(0.2)  # polling a condition
    again = run_cli(["capture", "--once", *args])
    assert again.returncode == 0, again.stderr
    assert _keys(stack.metadata_path) == Counter(["in/first.json", "in/later-0.json", "in/later-1.json"])
    assert _queued(sqs, stack.queue_url) == 0
