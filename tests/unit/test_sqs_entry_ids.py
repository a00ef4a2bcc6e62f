"""Batch entry ids SQS accepts ([A-Za-z0-9_-]{1,80}), whatever the message id looks like."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from s3events.capture.ports import Message
from s3events.capture.queue import _entry_id

ALLOWED = re.compile(r"[A-Za-z0-9_-]{1,80}")


def message(message_id: str) -> Message:
    return Message(message_id, "handle", "{}", 1, datetime.now(UTC))


def test_a_uuid_message_id_is_its_own_entry_id():
    assert (
        _entry_id(message("0f8fad5b-d9cb-469f-a165-70867728950e")) == "0f8fad5b-d9cb-469f-a165-70867728950e"
    )


def test_unusual_message_ids_become_ascii_entry_ids_of_at_most_80_characters():
    for odd in ("id with spaces/and:colons", "ümlaut-é-ß", "x" * 200, "a.b+c=d"):
        assert ALLOWED.fullmatch(_entry_id(message(odd))), odd
    assert (
        _entry_id(message("ümlaut")) == "_mlaut"
    )  # not a letter SQS would take, even if Python's isalnum does
