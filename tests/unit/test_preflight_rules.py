"""Start-up checks, the parts that need no endpoint: retrying an unreachable endpoint for a bounded time
(on a fake clock), and what a table location may hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from s3events.errors import FatalError, TransientError
from s3events.preflight import Location, check_local, retry_at_startup

LOCATION = Location("metadata table", "/data/metadata", "s3events.metadata.table.path")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _failing(times: int):
    calls: list[int] = []

    def step() -> None:
        calls.append(1)
        if len(calls) <= times:
            raise TransientError("cannot reach S3 for bucket lake")

    return step, calls


def test_an_endpoint_back_within_the_timeout_lets_the_command_start():
    clock = FakeClock()
    step, calls = _failing(times=3)
    retry_at_startup(step, 60, sleep=clock.sleep, clock=clock)
    assert len(calls) == 4
    assert clock.slept == [0.5, 1.0, 2.0]  # backing off, doubling


def test_an_endpoint_still_unreachable_at_the_timeout_is_fatal_and_says_how_long_it_tried():
    clock = FakeClock()
    step, calls = _failing(times=1000)
    with pytest.raises(FatalError) as raised:
        retry_at_startup(step, 60, sleep=clock.sleep, clock=clock)
    assert clock.now <= 60
    assert max(clock.slept) == 10.0  # waits are capped
    message = str(raised.value)
    assert message.startswith("cannot reach S3 for bucket lake (still failing after")
    assert f"{len(calls)} attempts" in message


def test_a_zero_timeout_makes_one_attempt():
    clock = FakeClock()
    step, calls = _failing(times=1)
    with pytest.raises(FatalError) as raised:
        retry_at_startup(step, 0, sleep=clock.sleep, clock=clock)
    assert len(calls) == 1 and clock.slept == []
    assert str(raised.value) == "cannot reach S3 for bucket lake"


def test_a_fatal_error_is_not_retried():
    clock = FakeClock()
    calls: list[int] = []

    def step() -> None:
        calls.append(1)
        raise FatalError("the bucket does not exist")

    with pytest.raises(FatalError):
        retry_at_startup(step, 60, sleep=clock.sleep, clock=clock)
    assert len(calls) == 1


@pytest.mark.parametrize(
    "content",
    [
        ["_delta_log", "part-1.parquet"],  # a Delta table
        ["part-0a.parquet", "day=2026-11-24"],  # files of a writer killed before its first commit
        [],  # empty: the table will be created
    ],
)
def test_a_location_holding_a_table_or_a_killed_writers_files_is_accepted(tmp_path: Path, content):
    for name in content:
        if name.endswith(".parquet"):
            (tmp_path / name).write_bytes(b"")
        else:
            (tmp_path / name).mkdir()
    check_local(tmp_path, LOCATION)


def test_a_location_holding_other_files_is_refused_naming_one_of_them(tmp_path: Path):
    (tmp_path / "orders.csv").write_text("a,b\n")
    with pytest.raises(FatalError) as raised:
        check_local(tmp_path, LOCATION)
    message = str(raised.value)
    assert "'orders.csv'" in message and "not a Delta table" in message
    assert "s3events.metadata.table.path" in message


def test_a_missing_location_is_created_under_its_nearest_existing_directory(tmp_path: Path):
    check_local(tmp_path / "a" / "b" / "metadata", LOCATION)  # nothing raised, nothing created
    assert not (tmp_path / "a").exists()


def test_a_read_only_command_accepts_a_table_that_does_not_exist_yet(tmp_path: Path):
    reading = Location("metadata table", str(tmp_path / "x"), "k", writes=False)
    check_local(tmp_path / "no" / "such" / "table", reading)
