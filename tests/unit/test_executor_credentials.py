"""Credentials refused on a Spark executor: the executor judges them by the run loop's rule against its own
credential chain (`aws.judged_on_executor`), the verdict reaches the driver inside the text of the job's
failure (`aws.rejected_on_executor`), and the driver's run loop acts on it as on its own rejection."""

from __future__ import annotations

from typing import Any

import botocore.credentials
import pytest

from s3events.errors import CredentialsRejected
from s3events.infra import aws, aws_credentials
from s3events.runloop import StopFlag, run_loop

REJECTION = "reading s3://b/in/1.json: the access key is not valid (InvalidAccessKeyId: no such key.)"


class _Static:
    method = "shared-credentials-file"

    def __init__(self, key: str) -> None:
        self.key = key

    def get_frozen_credentials(self) -> Any:
        return botocore.credentials.ReadOnlyCredentials(self.key, "secret", None)


def _job_failure(error: BaseException) -> Exception:
    """What the driver gets from pyspark when a task raised `error`: its traceback as text."""
    return RuntimeError(
        "An exception was thrown from the Python worker. Please see the stack trace below.\n"
        "Traceback (most recent call last):\n  File \"objects.py\", line 131, in _retry\n"
        f"{type(error).__module__}.{type(error).__qualname__}: {error}\n\n"
        "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException"
    )


@pytest.mark.parametrize("key_after", ["AKIA1", "AKIA2"])
def test_an_executor_judges_a_rejection_by_its_own_chain_and_the_driver_reads_the_verdict(
    monkeypatch, key_after
):
    chain = aws.CredentialChain(lambda: _Static("AKIA1"))
    chain.current()
    chain._resolve = lambda: _Static(key_after)  # what the chain yields when resolved again
    monkeypatch.setattr(aws_credentials, "credential_chain", lambda: chain)

    judged = aws.judged_on_executor(CredentialsRejected(REJECTION))

    assert judged.renewed is (key_after == "AKIA2")
    on_driver = aws.rejected_on_executor(_job_failure(judged))
    assert on_driver is not None and on_driver.renewed is judged.renewed
    assert str(on_driver).startswith(f"on an executor: {REJECTION}: the reading process's credential chain")
    assert "\n" not in str(on_driver)
    if not judged.renewed:  # the one line a person reads says what to check
        assert str(on_driver).endswith("environment, profile, instance or container role")
    # The driver's rule answers with the executor's verdict, not by its own chain (it was not refused).
    driver_chain = aws.CredentialChain(lambda: _Static("AKIA9"))
    assert aws.renew_credentials(on_driver, chain=driver_chain) is judged.renewed


def test_other_job_failures_are_no_rejection():
    assert aws.rejected_on_executor(RuntimeError("ValueError: boom")) is None
    plain = RuntimeError("s3events.errors.CredentialsRejected: reading s3://b/k: the key is not valid")
    assert aws.rejected_on_executor(plain) is None


@pytest.mark.parametrize("renewed", [True, False])
def test_the_run_loop_reruns_the_cycle_or_stops_on_the_executors_verdict(renewed):
    stop = StopFlag()
    failures = [aws.RejectedOnExecutor(REJECTION, renewed=renewed)]
    cycles: list[int] = []

    def step() -> int:
        if failures:
            raise failures.pop()
        cycles.append(1)
        stop.set()
        return 0

    if renewed:
        run_loop(step, once=False, is_idle=lambda r: r == 0, stop=stop,
                 renew_credentials=aws.renew_credentials)
        assert cycles == [1]
    else:
        with pytest.raises(CredentialsRejected, match="yields the same credentials: check"):
            run_loop(step, once=False, is_idle=lambda r: r == 0, stop=stop,
                     renew_credentials=aws.renew_credentials)
        assert cycles == []
