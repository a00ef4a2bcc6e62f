"""The run loop's pacing, on an injected clock: the minimum interval between cycle starts holds, an idle
cycle's pause counts from its start (a long poll that came back empty waits no more), and a watcher for
new work ends the idle pause early."""

from __future__ import annotations

import pytest

from s3events.runloop import StopFlag, run_loop


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class RecordingStop(StopFlag):
    """Records each wait instead of sleeping; stops the loop after `cycles` cycles."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock
        self.waits: list[float] = []

    def wait(self, seconds: float) -> bool:
        self.waits.append(max(0.0, seconds))
        self.clock.now += max(0.0, seconds)
        return self.is_set()


def cycles_taking(seconds: float, results: list[int], clock: Clock, stop: StopFlag):
    remaining = list(results)

    def step() -> int:
        clock.now += seconds
        result = remaining.pop(0)
        if not remaining:
            stop.set()
        return result

    return step


def test_an_idle_cycle_that_was_a_long_poll_starts_the_next_at_once():
    clock = Clock()
    stop = RecordingStop(clock)
    step = cycles_taking(20.0, [0, 0, 0], clock, stop)  # each an empty 20 s long poll

    run_loop(step, once=False, is_idle=lambda r: r == 0, stop=stop, idle_pause_seconds=1.0, clock=clock)

    assert stop.waits[:2] == [0.0, 0.0]


def test_a_quick_idle_cycle_still_pauses_so_a_zero_long_poll_cannot_spin():
    clock = Clock()
    stop = RecordingStop(clock)
    step = cycles_taking(0.25, [0, 0, 0], clock, stop)

    run_loop(step, once=False, is_idle=lambda r: r == 0, stop=stop, idle_pause_seconds=1.0, clock=clock)

    assert stop.waits[:2] == [0.75, 0.75]


def test_the_watcher_spends_the_idle_pause_and_the_next_cycle_starts_when_it_returns():
    clock = Clock()
    stop = RecordingStop(clock)
    watched: list[float] = []

    def wait_for_work(seconds: float) -> bool:
        watched.append(seconds)
        clock.now += 0.1  # work appeared 0.1 s into the pause
        return True

    step = cycles_taking(0.25, [0, 0, 0], clock, stop)
    starts: list[float] = []

    def timed_step() -> int:
        starts.append(clock.now)
        return step()

    run_loop(
        timed_step,
        once=False,
        is_idle=lambda r: r == 0,
        stop=stop,
        idle_pause_seconds=1.0,
        wait_for_work=wait_for_work,
        clock=clock,
    )

    assert watched[:2] == [0.75, 0.75]  # the rest of the idle pause, from the cycle's start
    assert starts[1] - starts[0] == pytest.approx(0.35)  # not 1 s: the watcher saw work


def test_the_minimum_interval_holds_before_the_watcher_runs():
    clock = Clock()
    stop = RecordingStop(clock)
    watched: list[float] = []
    step = cycles_taking(0.25, [0, 0], clock, stop)

    run_loop(
        step,
        once=False,
        is_idle=lambda r: r == 0,
        stop=stop,
        min_interval_seconds=2.0,
        idle_pause_seconds=1.0,
        wait_for_work=lambda s: watched.append(s),
        clock=clock,
    )

    assert stop.waits[0] == 1.75  # the interval, from the cycle's start
    assert watched == []  # the pause ended inside the interval


def test_a_busy_cycle_is_followed_at_once_without_watching():
    clock = Clock()
    stop = RecordingStop(clock)
    watched: list[float] = []
    step = cycles_taking(0.25, [5, 5, 0], clock, stop)

    run_loop(
        step,
        once=False,
        is_idle=lambda r: r == 0,
        stop=stop,
        wait_for_work=lambda s: watched.append(s),
        clock=clock,
    )

    assert stop.waits[:2] == [0.0, 0.0]
    assert watched == []
