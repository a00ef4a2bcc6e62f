"""Turn one SQS message body into a `Parsed`. Pure logic, no I/O, and it never raises.

Shapes (one small function each; the SNS envelope unwraps to one of the others):

- S3 event notification   {"Records": [{"eventSource": "aws:s3", "eventName": ..., "s3": {...}}, ...]}
- SNS envelope            {"Type": "Notification", "Message": "<JSON of another shape>", ...}
- EventBridge to SQS      {"source": "aws.s3", "detail-type": "Object Created", "detail": {...}, ...}
- S3 test event           {"Service": "Amazon S3", "Event": "s3:TestEvent", "Bucket": ..., ...}

Everything is untrusted: a field that is missing or of the wrong type makes the record poison, with a
reason that names where (e.g. "Records[2].s3.object.size: expected a non-negative integer, got 'abc'").
Good records of a partly bad message are kept in `events` while `poison` is set, so nothing is lost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_plus

from s3events.events.model import ObjectEvent, Parsed, Poison, TestEvent, bare_etag

MAX_KEY_BYTES = 1024  # S3's limit on the UTF-8 length of an object key
MAX_SIZE = 2**63 - 1  # sizes go to a signed 64-bit column
MAX_LISTED_PROBLEMS = 5

# Families S3 can publish that this service recognises but does not capture (notification eventName).
IGNORED_EVENT_FAMILIES = (
    "ObjectRestore:",
    "ObjectTagging:",
    "ObjectAcl:",
    "Replication:",
    "LifecycleTransition",
    "IntelligentTiering",
    "ReducedRedundancyLostObject",
)
LIFECYCLE_EXPIRATIONS = frozenset({"LifecycleExpiration:Delete", "LifecycleExpiration:DeleteMarkerCreated"})

# EventBridge: detail-types from source aws.s3 that are recognised but not captured.
IGNORED_DETAIL_TYPES = frozenset(
    {
        "Object Restore Initiated",
        "Object Restore Completed",
        "Object Restore Expired",
        "Object Tags Added",
        "Object Tags Deleted",
        "Object ACL Updated",
        "Object Storage Class Changed",
        "Object Access Tier Changed",
        "AWS API Call via CloudTrail",
    }
)
CREATED_REASONS = {
    "PutObject": "ObjectCreated:Put",
    "PostObject": "ObjectCreated:Post",
    "POST Object": "ObjectCreated:Post",
    "CopyObject": "ObjectCreated:Copy",
    "CompleteMultipartUpload": "ObjectCreated:CompleteMultipartUpload",
}
DELETED_REASONS = {
    "DeleteObject": "ObjectRemoved",
    "DeleteObjects": "ObjectRemoved",
    "Lifecycle Expiration": "LifecycleExpiration",
}
DELETION_TYPES = {"Permanently Deleted": "Delete", "Delete Marker Created": "DeleteMarkerCreated"}
SNS_IGNORED_TYPES = frozenset({"SubscriptionConfirmation", "UnsubscribeConfirmation"})

# Notification keys are form-encoded (AWS: "red flower.jpg" becomes "red+flower.jpg"), decoded once.
# EventBridge keys are NOT decoded: AWS's EventBridge message docs (AmazonS3/latest/userguide/ev-events)
# never call detail.object.key URL-encoded, unlike notification-content-structure which does; moto's
# EventBridge events carry the raw key (it quote_plus-es only SQS/SNS/Lambda payloads, getmoto/moto#9060);
# and aws-solutions-library-samples/guidance-for-medialake-on-aws#21 reports real EventBridge keys keep a
# literal '+' and drops decoding for them. (powertools-lambda-python's EventBridge data class does
# unquote_plus the key; we side with the AWS docs and the field report.) Flip this if AWS says otherwise.
EVENTBRIDGE_KEYS_ARE_URL_ENCODED = False

_ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:?\d{2})")
_MISSING: Any = object()


class _Invalid(Exception):
    """A field that is missing or wrong. Raised and caught inside this module only."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")


def parse_message(body: str, *, max_bytes: int = 262_144) -> Parsed:
    """Parse one SQS message body. Never raises: anything unusable comes back as `Parsed.poison`."""
    try:
        return _parse_body(body, max_bytes)
    except Exception as exc:  # last line of defence; the fuzz tests assert it is never reached
        return _poison(f"internal parser error ({type(exc).__name__}); the message is kept for inspection")


def _parse_body(body: str, max_bytes: int) -> Parsed:
    if not isinstance(body, str):
        return _poison(f"body: expected a string, got {type(body).__name__}")
    limit = f"larger than the limit of {max_bytes} bytes (UTF-8)"
    if len(body) > max_bytes:  # every character is at least one byte: a huge body is never encoded
        return _poison(f"body: at least {len(body)} bytes, {limit}")
    size = len(body.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        return _poison(f"body: {size} bytes, {limit}")
    doc = _load_json_object(body, "body")
    if isinstance(doc, Poison):
        return Parsed(poison=doc)
    return _parse_document(doc, prefix="", allow_sns=True)


def _load_json_object(text: str, where: str) -> dict[str, Any] | Poison:
    try:
        value = json.loads(text)
    except RecursionError:
        return Poison(f"{where}: not valid JSON: nested too deeply")
    except json.JSONDecodeError as exc:
        return Poison(f"{where}: not valid JSON: {_json_problem(exc)}")
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        return Poison(f"{where}: not valid JSON: {str(exc)[:120]}")
    if not isinstance(value, dict):
        return Poison(f"{where}: expected a JSON object, got {_describe(value)}")
    return value


def _json_problem(exc: json.JSONDecodeError) -> str:
    """The decoder's complaint and where (some of its messages end in "at": the position follows)."""
    where = f"at line {exc.lineno} column {exc.colno}"
    if exc.msg.startswith("Invalid control character") and exc.pos < len(exc.doc):
        code = ord(exc.doc[exc.pos])
        return (
            f"an unescaped control character U+{code:04X} in a string {where} "
            f"(JSON needs it escaped, as \\u{code:04x})"
        )
    return f"{exc.msg.removesuffix(' at')} {where}"


def _parse_document(doc: dict[str, Any], *, prefix: str, allow_sns: bool) -> Parsed:
    """Dispatch on the shape. `prefix` is the path of `doc` inside the body ("" or "Message.")."""
    try:
        if allow_sns and doc.get("Type") == "Notification" and "Message" in doc:
            return _unwrap_sns(doc)
        if allow_sns and _is_one_of(doc.get("Type"), SNS_IGNORED_TYPES) and "TopicArn" in doc:
            return Parsed(ignored=(doc["Type"],))
        if "Records" in doc:
            return _parse_records(doc["Records"], prefix)
        if "detail-type" in doc and "detail" in doc:
            return _parse_eventbridge(doc, prefix)
        if doc.get("Event") == "s3:TestEvent":
            return _parse_test_event(doc, prefix)
    except _Invalid as exc:
        return _poison(str(exc))
    fields = ", ".join(repr(name[:40]) for name in list(doc)[:8]) or "none"
    return _poison(
        f"{prefix.rstrip('.') or 'body'}: not a recognised S3 event message (expected S3 'Records', an SNS "
        f"Notification, an EventBridge aws.s3 event or s3:TestEvent); top-level fields: {fields}"
    )


# --- envelopes ---------------------------------------------------------------------------------------


def _unwrap_sns(doc: dict[str, Any]) -> Parsed:
    """SNS to SQS without raw message delivery: the S3 message is a JSON string in "Message"."""
    message = doc["Message"]
    if not isinstance(message, str):
        raise _Invalid("Message", f"expected a JSON string, got {_describe(message)}")
    inner = _load_json_object(message, "Message")
    if isinstance(inner, Poison):
        return Parsed(poison=inner)
    return _parse_document(inner, prefix="Message.", allow_sns=False)


# --- shapes ------------------------------------------------------------------------------------------


def _parse_records(records: object, prefix: str) -> Parsed:
    """S3 event notification. Each record stands alone: bad ones are reported, good ones kept."""
    if not isinstance(records, list) or not records:
        raise _Invalid(f"{prefix}Records", f"expected a non-empty list, got {_describe(records)}")
    events: list[ObjectEvent] = []
    ignored: list[str] = []
    problems: list[str] = []
    for index, record in enumerate(records):
        try:
            result = _parse_record(record, f"{prefix}Records[{index}]")
        except _Invalid as exc:
            problems.append(str(exc))
            continue
        if isinstance(result, str):
            ignored.append(result)
        else:
            events.append(result)
    poison = Poison(_summarise(problems, len(records))) if problems else None
    return Parsed(events=tuple(events), ignored=tuple(ignored), poison=poison)


def _parse_record(record: object, where: str) -> ObjectEvent | str:
    """One notification record: an ObjectEvent, or the name of a recognised event we do not capture."""
    rec = _object(record, where)
    source = rec.get("eventSource", _MISSING)
    if source != "aws:s3":
        raise _Invalid(f"{where}.eventSource", f"expected 'aws:s3', {_got(source)}")
    name = _text(rec.get("eventName", _MISSING), f"{where}.eventName")
    if name.startswith(IGNORED_EVENT_FAMILIES):
        return name
    created = _is_named(name, "ObjectCreated:")
    if not (created or _is_named(name, "ObjectRemoved:") or name in LIFECYCLE_EXPIRATIONS):
        raise _Invalid(f"{where}.eventName", f"unknown S3 event name {_show(name)}")
    s3 = _object(rec.get("s3", _MISSING), f"{where}.s3")
    bucket = _object(s3.get("bucket", _MISSING), f"{where}.s3.bucket")
    obj = _object(s3.get("object", _MISSING), f"{where}.s3.object")
    at = f"{where}.s3.object"
    return ObjectEvent(
        bucket=_text(bucket.get("name", _MISSING), f"{where}.s3.bucket.name"),
        key=_key(obj.get("key", _MISSING), f"{at}.key", url_encoded=True),
        event_name=name,
        event_time=_time(rec.get("eventTime", _MISSING), f"{where}.eventTime"),
        size=_size(obj.get("size", _MISSING), f"{at}.size") if created else None,
        etag=_etag(obj.get("eTag", _MISSING), f"{at}.eTag", required=created),
        version_id=_optional_text(obj.get("versionId"), f"{at}.versionId"),
        sequencer=_optional_text(obj.get("sequencer"), f"{at}.sequencer"),
    )


def _parse_eventbridge(doc: dict[str, Any], prefix: str) -> Parsed:
    """S3 event delivered by an EventBridge rule to SQS. One event per message."""
    source = doc.get("source", _MISSING)
    if source != "aws.s3":
        raise _Invalid(f"{prefix}source", f"expected 'aws.s3' (an S3 EventBridge event), {_got(source)}")
    detail_type = _text(doc["detail-type"], f"{prefix}detail-type")
    if detail_type in IGNORED_DETAIL_TYPES:
        return Parsed(ignored=(detail_type,))
    if detail_type not in ("Object Created", "Object Deleted"):
        raise _Invalid(f"{prefix}detail-type", f"unknown S3 detail-type {_show(detail_type)}")
    detail = _object(doc["detail"], f"{prefix}detail")
    name = _eventbridge_event_name(detail_type, detail, f"{prefix}detail")
    bucket = _object(detail.get("bucket", _MISSING), f"{prefix}detail.bucket")
    obj = _object(detail.get("object", _MISSING), f"{prefix}detail.object")
    at = f"{prefix}detail.object"
    created = detail_type == "Object Created"
    etag_field = "etag" if "etag" in obj or "eTag" not in obj else "eTag"  # moto says "eTag"
    event = ObjectEvent(
        bucket=_text(bucket.get("name", _MISSING), f"{prefix}detail.bucket.name"),
        key=_key(obj.get("key", _MISSING), f"{at}.key", url_encoded=EVENTBRIDGE_KEYS_ARE_URL_ENCODED),
        event_name=name,
        event_time=_time(doc.get("time", _MISSING), f"{prefix}time"),
        size=_size(obj.get("size", _MISSING), f"{at}.size") if created else None,
        etag=_etag(obj.get(etag_field, _MISSING), f"{at}.{etag_field}", required=created),
        version_id=_optional_text(obj.get("version-id"), f"{at}.version-id"),
        sequencer=_optional_text(obj.get("sequencer"), f"{at}.sequencer"),
    )
    return Parsed(events=(event,))


def _eventbridge_event_name(detail_type: str, detail: dict[str, Any], where: str) -> str:
    """Map detail-type + reason (+ deletion-type) to the notification event name."""
    reason = detail.get("reason", _MISSING)
    if detail_type == "Object Created":
        if not _is_one_of(reason, CREATED_REASONS):
            raise _Invalid(f"{where}.reason", f"expected one of {sorted(CREATED_REASONS)}, {_got(reason)}")
        return CREATED_REASONS[reason]
    if not _is_one_of(reason, DELETED_REASONS):
        raise _Invalid(f"{where}.reason", f"expected one of {sorted(DELETED_REASONS)}, {_got(reason)}")
    deletion = detail.get("deletion-type", _MISSING)
    if not _is_one_of(deletion, DELETION_TYPES):
        expected = sorted(DELETION_TYPES)
        raise _Invalid(f"{where}.deletion-type", f"expected one of {expected}, {_got(deletion)}")
    return f"{DELETED_REASONS[reason]}:{DELETION_TYPES[deletion]}"


def _parse_test_event(doc: dict[str, Any], prefix: str) -> Parsed:
    """`s3:TestEvent`, sent once when a notification configuration is saved."""
    return Parsed(test_event=TestEvent(bucket=_optional_text(doc.get("Bucket"), f"{prefix}Bucket")))


# --- fields ------------------------------------------------------------------------------------------


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid(where, f"expected an object, {_got(value)}")
    return value


def _text(value: object, where: str) -> str:
    """A non-empty string that is valid Unicode (no lone surrogates, so it can be written as UTF-8)."""
    if not isinstance(value, str) or not value:
        raise _Invalid(where, f"expected a non-empty string, {_got(value)}")
    if not _is_utf8(value):
        raise _Invalid(where, f"not valid Unicode: {_show(value)}")
    return value


def _optional_text(value: object, where: str) -> str | None:
    return None if value is None else _text(value, where)


def _key(value: object, where: str, *, url_encoded: bool) -> str:
    """The object key, URL-decoded exactly once if `url_encoded`. Never empty: decoding cannot shorten
    a non-empty string to nothing, and strict UTF-8 decoding rejects escapes of invalid bytes."""
    raw = _text(value, where)
    if not url_encoded:
        key = raw
    else:
        try:
            key = unquote_plus(raw, errors="strict")
        except UnicodeDecodeError:
            raise _Invalid(where, f"percent-escapes are not valid UTF-8: {_show(raw)}") from None
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise _Invalid(where, f"longer than S3's {MAX_KEY_BYTES}-byte key limit after decoding")
    return key


def _size(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SIZE:
        raise _Invalid(where, f"expected a non-negative integer, {_got(value)}")
    return value


def _etag(value: object, where: str, *, required: bool) -> str | None:
    if (value is None or value is _MISSING) and not required:
        return None
    etag = bare_etag(_text(value, where))
    if not etag:
        raise _Invalid(where, f"expected a non-empty ETag, {_got(value)}")
    return etag


def _time(value: object, where: str) -> datetime:
    """ISO 8601 with a 'Z' or an offset, with or without fractional seconds; returned in UTC."""
    if not isinstance(value, str) or not _ISO_TIME.fullmatch(value):
        raise _Invalid(where, f"expected an ISO 8601 time like '2024-05-01T12:00:00.000Z', {_got(value)}")
    try:
        return datetime.fromisoformat(value).astimezone(UTC)
    except (ValueError, OverflowError):
        raise _Invalid(where, f"not a valid time: {_show(value)}") from None


def _is_one_of(value: object, names: Collection[str]) -> bool:
    """Membership that cannot raise: an unhashable JSON value (list, object) is simply not a name."""
    return isinstance(value, str) and value in names


def _is_named(name: str, family: str) -> bool:
    return name.startswith(family) and len(name) > len(family)


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# --- reasons -----------------------------------------------------------------------------------------


def _poison(reason: str) -> Parsed:
    return Parsed(poison=Poison(reason))


def _summarise(problems: list[str], total: int) -> str:
    if total == 1:
        return problems[0]
    listed = "; ".join(problems[:MAX_LISTED_PROBLEMS])
    more = len(problems) - MAX_LISTED_PROBLEMS
    suffix = f"; and {more} more" if more > 0 else ""
    return f"{len(problems)} of {total} records are invalid: {listed}{suffix}"


def _got(value: object) -> str:
    return "but it is missing" if value is _MISSING else f"got {_describe(value)}"


def _describe(value: object) -> str:
    """A short, safe description of an untrusted JSON value (never a full repr of a big structure)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int):
        return str(value) if value.bit_length() <= 128 else "an integer too large to be a size"
    if isinstance(value, str):
        return _show(value)
    return repr(value)[:60]


def _show(text: str, limit: int = 60) -> str:
    shown = repr(text[:limit])
    return shown if len(text) <= limit else f"{shown}... ({len(text)} characters)"
