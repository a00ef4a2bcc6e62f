"""A kept table handle follows the table's commits without opening it again, and opens afresh when it
must: other storage options, a failed update, `forget`, or its age."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from s3events.infra.delta import REOPEN_SECONDS, TableHandle


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _append(path: Path, value: int) -> None:
    write_deltalake(str(path), pa.table({"v": [value]}), mode="append")


def test_a_kept_handle_sees_another_writers_commits_without_opening_again(tmp_path: Path) -> None:
    path = tmp_path / "t"
    handle = TableHandle(str(path), dict, clock=_Clock())
    assert handle.latest() is None  # no table yet

    _append(path, 1)
    first = handle.latest()
    assert first is not None and first.version() == 0
    _append(path, 2)  # another writer

    again = handle.latest()
    assert again is first
    assert again.version() == 1
    assert sorted(again.to_pyarrow_table().column("v").to_pylist()) == [1, 2]


def test_a_handle_opens_afresh_on_new_options_after_forget_and_with_age(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(path, 1)
    options = {"k": "a"}
    clock = _Clock()
    handle = TableHandle(str(path), lambda: options, clock=clock)
    first = handle.latest()

    options = {"k": "b"}  # e.g. rotated credentials
    second = handle.latest()
    assert second is not first

    handle.forget()
    third = handle.latest()
    assert third is not second

    clock.now += REOPEN_SECONDS - 1
    assert handle.latest() is third
    clock.now += 1
    assert handle.latest() is not third


def test_a_handle_whose_update_fails_opens_the_table_again(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(path, 1)
    handle = TableHandle(str(path), dict, clock=_Clock())
    first = handle.latest()
    assert first is not None

    class _Broken:
        def update_incremental(self) -> None:
            raise OSError("connection reset")

    handle._table = _Broken()  # type: ignore[assignment]  # a handle whose update fails
    again = handle.latest()
    assert again is not None and again.version() == 0
