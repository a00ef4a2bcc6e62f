"""The shared loop: --once stops when idle, --continuous stops on the flag, errors are survived."""

from __future__ import annotations

import pytest

from s3events.errors import ConfigError, CredentialsRejected, FatalError, TransientError
from s3events.runloop import StopFlag, run_loop


def test_once_runs_until_a_cycle_is_idle():
    results = iter([3, 2, 0, 5])
    cycles = run_loop(lambda: next(results), once=True, is_idle=lambda r: r == 0, stop=StopFlag())
    assert cycles == 3


def test_continuous_keeps_going_through_idle_cycles_until_stopped():
    stop = StopFlag()
    seen: list[int] = []

    def step() -> int:
        seen.append(len(seen))
        if len(seen) == 4:
            stop.set()
        return 0

    cycles = run_loop(step, once=False, is_idle=lambda r: r == 0, stop=stop, idle_pause_seconds=0)
    assert cycles == 4


def test_continuous_survives_a_failed_cycle_and_retries():
    stop = StopFlag()
    calls: list[str] = []

    def step() -> int:
        calls.append("call")
        if len(calls) == 1:
            raise TransientError("commit conflict")
        stop.set()
        return 1

    cycles = run_loop(step, once=False, is_idle=lambda r: r == 0, stop=stop, max_error_backoff_seconds=0)
    assert (cycles, len(calls)) == (1, 2)


def test_once_propagates_a_failed_cycle():
    def step() -> int:
        raise TransientError("no")

    with pytest.raises(TransientError):
        run_loop(step, once=True, is_idle=lambda r: r == 0, stop=StopFlag())


def test_fatal_error_ends_even_the_continuous_loop():
    def step() -> int:
        raise FatalError("access denied")

    with pytest.raises(FatalError):
        run_loop(step, once=False, is_idle=lambda r: r == 0, stop=StopFlag())


def test_a_configuration_error_ends_even_the_continuous_loop():
    def step() -> int:
        raise ConfigError("s3events.ingest.target.o.transform.sql", "no column `amount`")

    with pytest.raises(ConfigError):
        run_loop(step, once=False, is_idle=lambda r: r == 0, stop=StopFlag(), max_error_backoff_seconds=0)


def test_a_transient_failure_is_logged_in_one_line_without_a_traceback(caplog):
    stop = StopFlag()
    calls: list[str] = []

    def step() -> int:
        calls.append("call")
        if len(calls) == 1:
            raise TransientError("cannot reach the endpoint")
        stop.set()
        return 1

    with caplog.at_level("INFO", logger="s3events.runloop"):
        run_loop(step, once=False, is_idle=lambda r: r == 0, stop=stop, max_error_backoff_seconds=0)
    failures = [r for r in caplog.records if "cycle failed" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is None
    assert "cannot reach the endpoint" in failures[0].getMessage()


def test_an_unexpected_failure_keeps_its_traceback_for_whoever_fixes_it(caplog):
    stop = StopFlag()
    calls: list[str] = []

    def step() -> int:
        calls.append("call")
        if len(calls) == 1:
            raise KeyError("a bug")
        stop.set()
        return 1

    with caplog.at_level("INFO", logger="s3events.runloop"):
        run_loop(step, once=False, is_idle=lambda r: r == 0, stop=stop, max_error_backoff_seconds=0)
    failures = [r for r in caplog.records if "cycle failed" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None


class Renewals:
    """A credential chain that, asked again, yields other credentials or the same ones (`answers`)."""

    def __init__(self, *answers: bool) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    def __call__(self, rejection: CredentialsRejected) -> bool:
        self.asked.append(str(rejection))
        return self.answers.pop(0)


class CountingStop(StopFlag):
    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        return self.is_set()


@pytest.mark.parametrize("once", [True, False])
def test_rejected_credentials_are_retried_at_once_when_the_chain_yields_other_ones(once):
    stop = CountingStop()
    outcomes: list[Exception | int] = [CredentialsRejected("receiving: the access key is not valid"), 0]

    def step() -> int:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        stop.set()
        return outcome

    renew = Renewals(True)
    cycles = run_loop(
        step, once=once, is_idle=lambda r: r == 0, stop=stop, renew_credentials=renew, idle_pause_seconds=0
    )

    assert cycles == 1 and outcomes == []
    assert renew.asked == ["receiving: the access key is not valid"]
    assert [w for w in stop.waits if w > 0] == []  # no backoff before the retry


@pytest.mark.parametrize("once", [True, False])
def test_rejected_credentials_stay_fatal_when_the_chain_yields_the_same_ones(once):
    def step() -> int:
        raise CredentialsRejected("receiving: the access key is not valid")

    renew = Renewals(False)
    with pytest.raises(CredentialsRejected, match="the access key is not valid"):
        run_loop(step, once=once, is_idle=lambda r: r == 0, stop=StopFlag(), renew_credentials=renew)
    assert len(renew.asked) == 1


def test_rejected_credentials_are_fatal_where_nothing_can_renew_them():
    def step() -> int:
        raise CredentialsRejected("no")

    with pytest.raises(CredentialsRejected):
        run_loop(step, once=False, is_idle=lambda r: r == 0, stop=StopFlag())


def test_other_fatal_errors_do_not_renew_credentials():
    def step() -> int:
        raise FatalError("access denied")

    renew = Renewals()
    with pytest.raises(FatalError):
        run_loop(step, once=False, is_idle=lambda r: r == 0, stop=StopFlag(), renew_credentials=renew)
    assert renew.asked == []


def test_credentials_that_keep_changing_and_keep_being_rejected_back_off_then_end_fatal():
    stop = CountingStop()

    def step() -> int:
        raise CredentialsRejected("no")

    renew = Renewals(True, True, True, False)
    with pytest.raises(CredentialsRejected):
        run_loop(step, once=False, is_idle=lambda r: r == 0, stop=stop, renew_credentials=renew)
    assert len(renew.asked) == 4
    assert stop.waits == [1.0, 2.0]  # the first retry at once, the next ones after the usual backoff
