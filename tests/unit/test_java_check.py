"""Spark needs Java 17+: a missing or old Java is a clear FatalError, not a stack trace."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from s3events.errors import FatalError
from s3events.infra.spark import jvm_gone, require_java


def _fake_java(directory: Path, version_line: str) -> None:
    java = directory / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)


def test_missing_java_is_reported_with_what_to_install(monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FatalError, match=r"Java 17\+ is required.*apt-get install openjdk-17"):
        require_java()


def test_old_java_is_refused_with_its_version(monkeypatch, tmp_path):
    _fake_java(tmp_path, 'openjdk version "1.8.0_392"')
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FatalError, match="is Java 8"):
        require_java()


def test_java_17_from_java_home_is_accepted(monkeypatch, tmp_path):
    (tmp_path / "bin").mkdir()
    _fake_java(tmp_path / "bin", 'openjdk version "17.0.15" 2025-04-15')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", os.defpath)
    assert require_java() == 17


def _raised_in(filename: str, exc: BaseException) -> BaseException:
    """`exc` as raised by code in `filename` (as py4j's own frames would be)."""
    namespace: dict[str, object] = {}
    exec(compile("def fail(exc):\n    raise exc\n", filename, "exec"), namespace)
    try:
        namespace["fail"](exc)  # type: ignore[operator]
    except BaseException as raised:
        return raised
    raise AssertionError("not raised")


def test_a_connection_refused_by_a_dead_spark_jvm_is_fatal_and_says_so():
    py4j_file = "/venv/lib/python3.11/site-packages/py4j/clientserver.py"
    exc = _raised_in(py4j_file, ConnectionRefusedError(111, "no"))
    error = jvm_gone(exc)
    assert isinstance(error, FatalError)
    assert str(error).startswith("Spark's JVM stopped answering: it died") and "restart ingest" in str(error)


def test_py4j_network_errors_are_a_dead_jvm_too():
    from py4j.protocol import Py4JNetworkError

    assert isinstance(jvm_gone(Py4JNetworkError("Answer from Java side is empty")), FatalError)


def test_other_connection_errors_are_not_the_jvm():
    assert jvm_gone(_raised_in("/work/s3events/ingest/x.py", ConnectionRefusedError(111, "no"))) is None
    assert jvm_gone(ValueError("x")) is None
