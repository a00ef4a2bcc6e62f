"""A kept table handle follows the table's commits without opening it again, and opens afresh when it
must: other storage options, a failed update, `forget`, or its age."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, Transaction, write_deltalake

from s3events.errors import CommitConflict
from s3events.infra.delta import REOPEN_SECONDS, TableHandle
from s3events.infra.delta_commit import check_transactions, stored_transactions


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


def test_app_transactions_are_read_once_per_version_and_again_after_another_writers_commit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t"

    def commit(checkpoint: int) -> None:
        write_deltalake(
            str(path),
            pa.table({"v": [checkpoint]}),
            mode="append",
            commit_properties=CommitProperties(app_transactions=[Transaction("app", checkpoint)]),
        )

    commit(1)
    handle = TableHandle(str(path), dict, clock=_Clock())
    reads: list[str] = []
    table = handle.latest()
    assert table is not None
    read = table.transaction_version
    table.transaction_version = lambda app_id: reads.append(app_id) or read(app_id)  # type: ignore[method-assign]

    assert stored_transactions(handle, ["app", "other"]) == {"app": 1, "other": None}
    assert stored_transactions(handle, ["app", "other"]) == {"app": 1, "other": None}
    check_transactions(handle.latest(), str(path), {"app": 1, "other": None}, handle=handle)
    assert reads == ["app", "other"]  # the position, the guard and the commit's check: one read each

    commit(2)  # another writer moves the checkpoint
    assert stored_transactions(handle, ["app"]) == {"app": 2}
    assert reads == ["app", "other", "app"]
    with pytest.raises(CommitConflict, match="is at 2, not 1"):
        check_transactions(handle.latest(), str(path), {"app": 1}, handle=handle)
