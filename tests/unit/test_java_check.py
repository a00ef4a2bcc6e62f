"""Spark needs Java 17+: a missing or old Java is a clear FatalError, not a stack trace."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from s3events.errors import FatalError
from s3events.infra.spark import require_java


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
