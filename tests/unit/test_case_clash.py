"""Which spelling of a field name that differs only in case a batch keeps, and how a refused one is named."""

from __future__ import annotations

from s3events.ingest.files.case_clash import aliases, clash_message, clashing_groups, file_clash


def test_groups_are_names_equal_but_for_case():
    assert clashing_groups(["id", "name", "Name", "NAME", "ID", "v"]) == [
        ("ID", "id"),
        ("NAME", "Name", "name"),
    ]
    assert clashing_groups(["id", "name", "id"]) == []


def test_the_tables_spelling_is_kept_whatever_the_batch_holds_most():
    assert aliases(["Name", "id"], ["id", "name"], {"Name": 100, "name": 0}) == {"Name": "name"}


def test_without_a_table_the_spelling_most_lines_hold_is_kept_the_first_on_a_tie():
    assert aliases(["name", "Name"], [], {"name": 2, "Name": 1}) == {"Name": "name"}
    assert aliases(["name", "Name"], [], {"name": 1, "Name": 1}) == {"name": "Name"}
    assert aliases(["id", "name"], [], {}) == {}


def test_a_file_clashes_with_itself_or_with_a_known_column():
    assert file_clash(["id", "name", "NAME"], []) == "column names differ only in case: NAME, name"
    assert file_clash(["id", "Name"], ["id", "name"]) == clash_message({"Name": "name"})
    assert file_clash(["id", "name", "new"], ["id", "name"]) is None
    assert (
        clash_message({"Name": "name"}) == "field name differs only in case from a column: Name (column name)"
    )
