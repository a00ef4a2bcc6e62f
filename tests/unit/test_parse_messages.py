"""parse_message: every shape S3 events reach SQS in, key decoding, event ids, poison reasons, fuzzing."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3events.events.model import ObjectEvent, Parsed
from s3events.events.model import TestEvent as S3TestEvent  # not a pytest test class
from s3events.events.parse import parse_message

EVENTS_DIR = Path(__file__).resolve().parent.parent / "events"
FIXTURES = sorted(path.name for path in EVENTS_DIR.glob("*.json"))

BUCKET = "acme-landing-prod"
SALES_KEY = "landing/dt=2024-05-14/sales report Q2.csv"
SALES_ETAG = "9b2cf535f27731c974343645a3985328"
SALES_VERSION = "3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY"


def fixture_text(name: str) -> str:
    return (EVENTS_DIR / name).read_text(encoding="utf-8")


def fixture_doc(name: str) -> Any:
    return json.loads(fixture_text(name))


def parse_fixture(name: str) -> Parsed:
    return parse_message(fixture_text(name))


def only_event(parsed: Parsed) -> ObjectEvent:
    assert parsed.poison is None, parsed.poison
    assert len(parsed.events) == 1, parsed
    return parsed.events[0]


def notification(
    key: str = "data/file.csv",
    *,
    event_name: str = "ObjectCreated:Put",
    event_time: Any = "2024-05-14T09:21:37.418Z",
    **object_fields: Any,
) -> dict[str, Any]:
    """A one-record S3 notification with `key` put in as given (encode it yourself)."""
    obj: dict[str, Any] = {"key": key, "size": 10, "eTag": "0123456789abcdef0123456789abcdef"}
    obj.update(object_fields)
    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "awsRegion": "eu-west-1",
                "eventTime": event_time,
                "eventName": event_name,
                "s3": {"s3SchemaVersion": "1.0", "bucket": {"name": BUCKET}, "object": obj},
            }
        ]
    }


def record_of(doc: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = doc["Records"][0]
    return record


def sns_wrap(message: Any) -> dict[str, Any]:
    return {
        "Type": "Notification",
        "MessageId": "0c6f1a2b-3d4e-5f60-7182-93a4b5c6d7e8",
        "TopicArn": "arn:aws:sns:eu-west-1:111122223333:s3-object-events",
        "Message": message if isinstance(message, str) else json.dumps(message),
        "Timestamp": "2024-05-14T09:21:37.702Z",
    }


def eventbridge(key: str = SALES_KEY, **object_fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = fixture_doc("eventbridge_object_created.json")
    doc["detail"]["object"] = {"key": key, "size": 48213, "etag": SALES_ETAG, **object_fields}
    return doc


def parse_doc(doc: Any) -> Parsed:
    return parse_message(json.dumps(doc))


def reason_of(parsed: Parsed) -> str:
    assert parsed.poison is not None, f"expected poison, got {parsed}"
    return parsed.poison.reason


# --- every fixture ---------------------------------------------------------------------------------


def test_fixture_directory_has_every_documented_sample() -> None:
    expected = {
        "s3_put.json",
        "s3_put_moto.json",
        "s3_multi_records.json",
        "s3_delete.json",
        "s3_delete_marker.json",
        "s3_copy.json",
        "s3_multipart.json",
        "s3_test_event.json",
        "sns_wrapped_put.json",
        "sns_wrapped_test_event.json",
        "eventbridge_object_created.json",
        "eventbridge_object_deleted.json",
        "eventbridge_restore_completed.json",
        "s3_lifecycle_expiration.json",
        "s3_restore_completed.json",
    }
    assert set(FIXTURES) == expected
    readme = (EVENTS_DIR / "README.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in readme for name in expected)


@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_parses_without_poison(name: str) -> None:
    parsed = parse_fixture(name)
    assert parsed.poison is None, parsed.poison
    assert parsed.events or parsed.test_event or parsed.ignored


def test_real_s3_put_gives_one_created_event_with_every_field() -> None:
    event = only_event(parse_fixture("s3_put.json"))
    assert event == ObjectEvent(
        bucket=BUCKET,
        key=SALES_KEY,
        event_name="ObjectCreated:Put",
        event_time=datetime(2024, 5, 14, 9, 21, 37, 418000, tzinfo=UTC),
        size=48213,
        etag=SALES_ETAG,
        version_id=SALES_VERSION,
        sequencer="00664329B15E2E1F63",
    )
    assert event.kind == "created"


def test_moto_put_with_slash_encoded_decodes_to_same_key_as_real_s3() -> None:
    real = only_event(parse_fixture("s3_put.json"))
    moto = only_event(parse_fixture("s3_put_moto.json"))
    assert "%2F" in fixture_text("s3_put_moto.json")
    assert moto.key == real.key == SALES_KEY
    assert (moto.bucket, moto.etag, moto.size) == (real.bucket, real.etag, real.size)
    assert moto.version_id is None and moto.sequencer is None


def test_multi_record_message_gives_every_event_in_order() -> None:
    parsed = parse_fixture("s3_multi_records.json")
    assert parsed.poison is None
    assert [event.key for event in parsed.events] == [
        "landing/dt=2024-05-14/orders-0001.parquet",
        "landing/dt=2024-05-14/orders-0002.parquet",
        "landing/dt=2024-05-14/_SUCCESS",
    ]
    assert parsed.events[2].size == 0
    assert len({event.event_id for event in parsed.events}) == 3


def test_delete_is_a_removal_without_size_or_etag() -> None:
    event = only_event(parse_fixture("s3_delete.json"))
    assert event.event_name == "ObjectRemoved:Delete"
    assert event.kind == "removed"
    assert (event.size, event.etag, event.version_id) == (None, None, None)
    assert event.sequencer == "0066446817A2D6E0B5"


def test_delete_marker_keeps_the_marker_version_id() -> None:
    event = only_event(parse_fixture("s3_delete_marker.json"))
    assert event.event_name == "ObjectRemoved:DeleteMarkerCreated"
    assert event.kind == "removed"
    assert event.key == SALES_KEY
    assert event.version_id == "Mh0Y1N8tKq4V.2ZrCzAB6gcDbTn0ZcXq"


def test_copy_decodes_spaces_and_parentheses() -> None:
    event = only_event(parse_fixture("s3_copy.json"))
    assert event.event_name == "ObjectCreated:Copy"
    assert event.key == "curated/2024/05/sales report Q2 (final).csv"
    assert event.kind == "created"


def test_multipart_upload_keeps_multipart_etag_and_large_size() -> None:
    event = only_event(parse_fixture("s3_multipart.json"))
    assert event.event_name == "ObjectCreated:CompleteMultipartUpload"
    assert event.etag == "0c78aef83f66abc1fa1e8477f296d394-120"
    assert event.size == 1_258_291_200


def test_test_event_gives_test_event_and_nothing_else() -> None:
    assert parse_fixture("s3_test_event.json") == Parsed(test_event=S3TestEvent(BUCKET))


def test_sns_wrapped_test_event_gives_test_event() -> None:
    assert parse_fixture("sns_wrapped_test_event.json") == Parsed(test_event=S3TestEvent(BUCKET))


def test_sns_wrapped_put_gives_same_event_as_direct() -> None:
    assert parse_fixture("sns_wrapped_put.json") == parse_fixture("s3_put.json")


def test_eventbridge_object_created_gives_same_event_id_as_direct_and_sns() -> None:
    bridged = only_event(parse_fixture("eventbridge_object_created.json"))
    direct = only_event(parse_fixture("s3_put.json"))
    wrapped = only_event(parse_fixture("sns_wrapped_put.json"))
    assert bridged.event_name == "ObjectCreated:Put"
    assert (bridged.bucket, bridged.key, bridged.etag, bridged.size) == (BUCKET, SALES_KEY, SALES_ETAG, 48213)
    assert bridged.event_time == datetime(2024, 5, 14, 9, 21, 37, tzinfo=UTC)
    assert bridged.event_id == direct.event_id == wrapped.event_id


def test_eventbridge_object_deleted_maps_to_delete_marker_created() -> None:
    bridged = only_event(parse_fixture("eventbridge_object_deleted.json"))
    direct = only_event(parse_fixture("s3_delete_marker.json"))
    assert bridged.event_name == "ObjectRemoved:DeleteMarkerCreated"
    assert bridged.kind == "removed"
    assert bridged.size is None
    assert bridged.event_id == direct.event_id


def test_eventbridge_restore_completed_is_ignored_not_poison() -> None:
    assert parse_fixture("eventbridge_restore_completed.json") == Parsed(
        ignored=("Object Restore Completed",)
    )


def test_lifecycle_expiration_is_a_removal() -> None:
    event = only_event(parse_fixture("s3_lifecycle_expiration.json"))
    assert event.event_name == "LifecycleExpiration:Delete"
    assert event.kind == "removed"
    assert event.key == "tmp/staging/batch-000417.csv"


def test_restore_completed_record_is_ignored_not_poison() -> None:
    assert parse_fixture("s3_restore_completed.json") == Parsed(ignored=("ObjectRestore:Completed",))


@pytest.mark.parametrize(
    "event_name",
    [
        "ObjectRestore:Post",
        "ObjectTagging:Put",
        "ObjectTagging:Delete",
        "ObjectAcl:Put",
        "Replication:OperationFailedReplication",
        "LifecycleTransition",
        "IntelligentTiering",
        "ReducedRedundancyLostObject",
    ],
)
def test_other_s3_event_families_are_ignored(event_name: str) -> None:
    assert parse_doc(notification(event_name=event_name)) == Parsed(ignored=(event_name,))


def test_ignored_and_captured_records_in_one_message_are_both_reported() -> None:
    doc = notification("a.csv")
    restore = copy.deepcopy(record_of(doc))
    restore["eventName"] = "ObjectRestore:Completed"
    doc["Records"].append(restore)
    parsed = parse_doc(doc)
    assert parsed.poison is None
    assert [event.key for event in parsed.events] == ["a.csv"]
    assert parsed.ignored == ("ObjectRestore:Completed",)


@pytest.mark.parametrize(
    ("reason", "deletion_type", "event_name"),
    [
        ("DeleteObject", "Permanently Deleted", "ObjectRemoved:Delete"),
        ("DeleteObjects", "Delete Marker Created", "ObjectRemoved:DeleteMarkerCreated"),
        ("Lifecycle Expiration", "Permanently Deleted", "LifecycleExpiration:Delete"),
        ("Lifecycle Expiration", "Delete Marker Created", "LifecycleExpiration:DeleteMarkerCreated"),
    ],
)
def test_eventbridge_deletions_map_to_notification_names(
    reason: str, deletion_type: str, event_name: str
) -> None:
    doc = fixture_doc("eventbridge_object_deleted.json")
    doc["detail"]["reason"] = reason
    doc["detail"]["deletion-type"] = deletion_type
    event = only_event(parse_doc(doc))
    assert event.event_name == event_name
    assert event.kind == "removed"


@pytest.mark.parametrize(
    ("reason", "event_name"),
    [
        ("PutObject", "ObjectCreated:Put"),
        ("PostObject", "ObjectCreated:Post"),
        ("CopyObject", "ObjectCreated:Copy"),
        ("CompleteMultipartUpload", "ObjectCreated:CompleteMultipartUpload"),
    ],
)
def test_eventbridge_creations_map_to_notification_names(reason: str, event_name: str) -> None:
    doc = fixture_doc("eventbridge_object_created.json")
    doc["detail"]["reason"] = reason
    assert only_event(parse_doc(doc)).event_name == event_name


@pytest.mark.parametrize(
    "detail_type", ["Object Tags Added", "Object Restore Initiated", "Object ACL Updated"]
)
def test_other_eventbridge_s3_detail_types_are_ignored(detail_type: str) -> None:
    doc = fixture_doc("eventbridge_restore_completed.json")
    doc["detail-type"] = detail_type
    assert parse_doc(doc) == Parsed(ignored=(detail_type,))


def test_eventbridge_inside_sns_is_unwrapped() -> None:
    direct = parse_fixture("eventbridge_object_created.json")
    assert parse_doc(sns_wrap(fixture_text("eventbridge_object_created.json"))) == direct


def test_sns_subscription_confirmation_is_ignored() -> None:
    doc = sns_wrap("You have chosen to subscribe to the topic ...")
    doc["Type"] = "SubscriptionConfirmation"
    assert parse_doc(doc) == Parsed(ignored=("SubscriptionConfirmation",))


# --- keys are decoded exactly once -----------------------------------------------------------------

TRICKY_KEYS = [
    "plain.csv",
    "a+b.csv",
    "c++/lib/libstdc++.so",
    "100%.txt",
    "50%25 off.txt",
    "%2F is not a slash.txt",
    "x=1/y=2/part-0000.parquet",
    "my file with  two  spaces.txt",
    " leading and trailing ",
    "日本語/データ 2024.csv",
    "emoji/😀 + 🚀.bin",
    "a/b/c/d/e/f/g/h.txt",
    "question?hash#amp&semi;colon:comma,at@dollar$",
    "trailing/slash/",
    "tab\there",
]


@pytest.mark.parametrize("key", TRICKY_KEYS)
def test_key_with_plus_and_percent_is_decoded_once(key: str) -> None:
    moto_style = quote_plus(key)  # '/' as %2F
    real_s3_style = quote_plus(key, safe="/")  # '/' kept
    assert only_event(parse_doc(notification(moto_style))).key == key
    assert only_event(parse_doc(notification(real_s3_style))).key == key
    assert only_event(parse_doc(sns_wrap(notification(real_s3_style)))).key == key


@pytest.mark.parametrize("key", TRICKY_KEYS)
def test_eventbridge_key_is_taken_verbatim(key: str) -> None:
    assert only_event(parse_doc(eventbridge(key))).key == key


@given(
    key=st.text(min_size=1, max_size=80).filter(lambda k: len(k.encode("utf-8")) <= 1024),
    slash_safe=st.booleans(),
)
@settings(deadline=None)
def test_any_key_round_trips_through_quote_plus(key: str, slash_safe: bool) -> None:
    encoded = quote_plus(key, safe="/" if slash_safe else "")
    assert only_event(parse_doc(notification(encoded))).key == key


def test_already_decoded_looking_key_is_not_decoded_twice() -> None:
    # The object is literally named "a%2Bb"; S3 sends it as "a%252Bb".
    assert only_event(parse_doc(notification("a%252Bb"))).key == "a%2Bb"


@pytest.mark.parametrize(
    ("raw_key", "expected"),
    [
        ("", "Records[0].s3.object.key: expected a non-empty string, got ''"),
        ("bad%FFutf8", "Records[0].s3.object.key: percent-escapes are not valid UTF-8"),
        ("%ED%A0%80", "Records[0].s3.object.key: percent-escapes are not valid UTF-8"),
        ("k" * 1025, "Records[0].s3.object.key: longer than S3's 1024-byte key limit"),
        ("%E2%82%AC" * 342, "Records[0].s3.object.key: longer than S3's 1024-byte key limit"),
    ],
)
def test_key_that_is_not_valid_after_decoding_is_poison(raw_key: str, expected: str) -> None:
    assert reason_of(parse_doc(notification(raw_key))).startswith(expected)


def test_key_with_lone_surrogate_is_poison() -> None:
    body = json.dumps(notification("placeholder")).replace("placeholder", "bad\\ud800key")
    assert reason_of(parse_message(body)).startswith("Records[0].s3.object.key: not valid Unicode")


# --- event ids -------------------------------------------------------------------------------------


def test_moto_and_eventbridge_without_version_id_give_same_event_id() -> None:
    moto = only_event(parse_fixture("s3_put_moto.json"))
    bridged = only_event(parse_doc(eventbridge(SALES_KEY)))
    assert bridged.version_id is None
    assert moto.event_id == bridged.event_id


def test_different_etags_give_different_event_ids() -> None:
    first = only_event(parse_doc(notification("k.csv", eTag="aaaa")))
    second = only_event(parse_doc(notification("k.csv", eTag="bbbb")))
    assert first.event_id != second.event_id


def test_different_version_ids_give_different_event_ids() -> None:
    first = only_event(parse_doc(notification("k.csv", versionId="v1")))
    second = only_event(parse_doc(notification("k.csv", versionId="v2")))
    assert first.event_id != second.event_id


def test_same_object_in_different_buckets_or_keys_gives_different_event_ids() -> None:
    base = only_event(parse_doc(notification("k.csv")))
    other_key = only_event(parse_doc(notification("k2.csv")))
    other_bucket_doc = notification("k.csv")
    record_of(other_bucket_doc)["s3"]["bucket"]["name"] = "another-bucket"
    other_bucket = only_event(parse_doc(other_bucket_doc))
    assert len({base.event_id, other_key.event_id, other_bucket.event_id}) == 3


def test_created_and_removed_of_same_object_give_different_event_ids() -> None:
    created = only_event(parse_doc(notification("k.csv", versionId="v1")))
    removed = only_event(parse_doc(notification("k.csv", event_name="ObjectRemoved:Delete", versionId="v1")))
    assert created.event_id != removed.event_id


def test_version_id_null_is_treated_like_absent() -> None:
    absent = only_event(parse_doc(notification("k.csv", eTag="aaaa")))
    null = only_event(parse_doc(notification("k.csv", eTag="aaaa", versionId="null")))
    overwritten = only_event(parse_doc(notification("k.csv", eTag="bbbb", versionId="null")))
    assert null.version_id == "null"  # kept as S3 sent it
    assert null.event_id == absent.event_id
    assert null.event_id != overwritten.event_id


def test_version_id_null_on_removals_falls_back_to_sequencer() -> None:
    first = only_event(
        parse_doc(notification("k.csv", event_name="ObjectRemoved:Delete", versionId="null", sequencer="01"))
    )
    second = only_event(
        parse_doc(notification("k.csv", event_name="ObjectRemoved:Delete", versionId="null", sequencer="02"))
    )
    assert first.event_id != second.event_id


def test_json_null_version_id_is_absent() -> None:
    assert only_event(parse_doc(notification("k.csv", versionId=None))).version_id is None


@pytest.mark.parametrize(
    ("event_name", "kind"),
    [
        ("ObjectCreated:Put", "created"),
        ("ObjectRemoved:Delete", "removed"),
        ("ObjectRemoved:DeleteMarkerCreated", "removed"),
        ("LifecycleExpiration:Delete", "removed"),
        ("LifecycleExpiration:DeleteMarkerCreated", "removed"),
    ],
)
def test_kind_follows_event_name(event_name: str, kind: str) -> None:
    event = ObjectEvent(BUCKET, "k", event_name, datetime(2024, 1, 1, tzinfo=UTC))
    assert event.kind == kind


# --- normalisation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-14T09:21:37Z", datetime(2024, 5, 14, 9, 21, 37, tzinfo=UTC)),
        ("2024-05-14T09:21:37.418Z", datetime(2024, 5, 14, 9, 21, 37, 418000, tzinfo=UTC)),
        ("2024-05-14T09:21:37.123456789Z", datetime(2024, 5, 14, 9, 21, 37, 123456, tzinfo=UTC)),
        ("2024-05-14T11:21:37+02:00", datetime(2024, 5, 14, 9, 21, 37, tzinfo=UTC)),
        ("2024-05-14T04:21:37.5-0500", datetime(2024, 5, 14, 9, 21, 37, 500000, tzinfo=UTC)),
    ],
)
def test_event_time_is_timezone_aware_utc(text: str, expected: datetime) -> None:
    event_time = only_event(parse_doc(notification(event_time=text))).event_time
    assert event_time == expected
    assert event_time.tzinfo == UTC
    assert event_time.utcoffset() == timedelta(0)


def test_etag_loses_surrounding_quotes() -> None:
    assert only_event(parse_doc(notification(eTag='"abc123"'))).etag == "abc123"
    assert only_event(parse_doc(eventbridge(etag='"abc123"'))).etag == "abc123"


def test_removal_size_is_none_even_if_sent() -> None:
    assert only_event(parse_doc(notification(event_name="ObjectRemoved:Delete", size=5))).size is None


# --- poison ----------------------------------------------------------------------------------------


def test_oversized_body_is_poison_before_json_parsing() -> None:
    reason = reason_of(parse_message("{" * 300, max_bytes=256))  # not JSON, but size is checked first
    assert reason == "body: at least 300 bytes, larger than the limit of 256 bytes (UTF-8)"


def test_body_size_is_measured_in_utf8_bytes() -> None:
    body = json.dumps(notification("é" * 100), ensure_ascii=False)
    limit = len(body)  # enough characters, too few bytes: "é" is two bytes in UTF-8
    assert len(body.encode("utf-8")) == limit + 100
    assert f"larger than the limit of {limit} bytes" in reason_of(parse_message(body, max_bytes=limit))


def test_body_exactly_at_the_limit_is_parsed() -> None:
    body = json.dumps(notification("k.csv"))
    assert only_event(parse_message(body, max_bytes=len(body.encode("utf-8")))).key == "k.csv"


def test_default_limit_is_the_sqs_maximum_message_size() -> None:
    body = json.dumps(notification("x" * 10)) + " " * 262_144
    assert "limit of 262144 bytes" in reason_of(parse_message(body))


def test_partially_bad_multi_record_message_keeps_good_events_and_names_bad_indexes() -> None:
    doc = fixture_doc("s3_multi_records.json")
    doc["Records"].insert(1, "not a record")
    doc["Records"][3]["s3"]["object"]["size"] = "abc"  # the _SUCCESS record
    parsed = parse_doc(doc)
    assert [event.key for event in parsed.events] == [
        "landing/dt=2024-05-14/orders-0001.parquet",
        "landing/dt=2024-05-14/orders-0002.parquet",
    ]
    assert reason_of(parsed) == (
        "2 of 4 records are invalid: Records[1]: expected an object, got 'not a record'; "
        "Records[3].s3.object.size: expected a non-negative integer, got 'abc'"
    )


def test_many_bad_records_are_summarised() -> None:
    doc = {"Records": [{"eventSource": "aws:s3"}] * 8}
    reason = reason_of(parse_doc(doc))
    assert reason.startswith("8 of 8 records are invalid: Records[0].eventName: expected a non-empty string")
    assert reason.endswith("; and 3 more")


def test_bad_record_inside_sns_names_the_path_through_message() -> None:
    doc = notification(size=-1)
    assert reason_of(parse_doc(sns_wrap(doc))) == (
        "Message.Records[0].s3.object.size: expected a non-negative integer, got -1"
    )


def drop(path: list[str | int]) -> Any:
    def mutate(doc: Any) -> None:
        target = doc
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]

    return mutate


def put(path: list[str | int], value: Any) -> Any:
    def mutate(doc: Any) -> None:
        target = doc
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return mutate


R0: list[str | int] = ["Records", 0]
OBJ: list[str | int] = [*R0, "s3", "object"]

RECORD_POISON = {
    "empty Records": (put(["Records"], []), "Records: expected a non-empty list, got a list"),
    "Records not a list": (put(["Records"], {"a": 1}), "Records: expected a non-empty list, got an object"),
    "record not an object": (put(R0, 42), "Records[0]: expected an object, got 42"),
    "wrong eventSource": (
        put([*R0, "eventSource"], "aws:sns"),
        "Records[0].eventSource: expected 'aws:s3', got 'aws:sns'",
    ),
    "missing eventSource": (
        drop([*R0, "eventSource"]),
        "Records[0].eventSource: expected 'aws:s3', but it is missing",
    ),
    "missing eventName": (
        drop([*R0, "eventName"]),
        "Records[0].eventName: expected a non-empty string, but it is missing",
    ),
    "eventName not a string": (
        put([*R0, "eventName"], ["ObjectCreated:Put"]),
        "Records[0].eventName: expected a non-empty string, got a list",
    ),
    "unknown eventName": (
        put([*R0, "eventName"], "ObjectExploded:Boom"),
        "Records[0].eventName: unknown S3 event name 'ObjectExploded:Boom'",
    ),
    "missing eventTime": (
        drop([*R0, "eventTime"]),
        "Records[0].eventTime: expected an ISO 8601 time like '2024-05-01T12:00:00.000Z', but it is missing",
    ),
    "eventTime a number": (put([*R0, "eventTime"], 1715678497), "Records[0].eventTime: expected an ISO 8601"),
    "eventTime prose": (put([*R0, "eventTime"], "yesterday"), "Records[0].eventTime: expected an ISO 8601"),
    "eventTime naive": (
        put([*R0, "eventTime"], "2024-05-14T09:21:37"),
        "Records[0].eventTime: expected an ISO 8601",
    ),
    "eventTime impossible date": (
        put([*R0, "eventTime"], "2024-13-45T09:21:37Z"),
        "Records[0].eventTime: not a valid time: '2024-13-45T09:21:37Z'",
    ),
    "eventTime out of range in UTC": (
        put([*R0, "eventTime"], "0001-01-01T00:00:00+01:00"),
        "Records[0].eventTime: not a valid time",
    ),
    "missing s3": (drop([*R0, "s3"]), "Records[0].s3: expected an object, but it is missing"),
    "missing bucket name": (
        drop([*R0, "s3", "bucket", "name"]),
        "Records[0].s3.bucket.name: expected a non-empty string, but it is missing",
    ),
    "bucket name a number": (
        put([*R0, "s3", "bucket", "name"], 7),
        "Records[0].s3.bucket.name: expected a non-empty string, got 7",
    ),
    "missing key": (
        drop([*OBJ, "key"]),
        "Records[0].s3.object.key: expected a non-empty string, but it is missing",
    ),
    "key not a string": (
        put([*OBJ, "key"], {"k": 1}),
        "Records[0].s3.object.key: expected a non-empty string, got an object",
    ),
    "size a string": (
        put([*OBJ, "size"], "abc"),
        "Records[0].s3.object.size: expected a non-negative integer, got 'abc'",
    ),
    "size negative": (
        put([*OBJ, "size"], -5),
        "Records[0].s3.object.size: expected a non-negative integer, got -5",
    ),
    "size a float": (
        put([*OBJ, "size"], 10.5),
        "Records[0].s3.object.size: expected a non-negative integer, got 10.5",
    ),
    "size a boolean": (
        put([*OBJ, "size"], True),
        "Records[0].s3.object.size: expected a non-negative integer, got true",
    ),
    "size too large": (
        put([*OBJ, "size"], 2**64),
        "Records[0].s3.object.size: expected a non-negative integer, got 18446744073709551616",
    ),
    "size enormous": (
        put([*OBJ, "size"], 10**200),
        "Records[0].s3.object.size: expected a non-negative integer, got an integer too large to be a size",
    ),
    "missing size on created": (
        drop([*OBJ, "size"]),
        "Records[0].s3.object.size: expected a non-negative integer, but it is missing",
    ),
    "missing eTag on created": (
        drop([*OBJ, "eTag"]),
        "Records[0].s3.object.eTag: expected a non-empty string, but it is missing",
    ),
    "empty quoted eTag": (put([*OBJ, "eTag"], '""'), "Records[0].s3.object.eTag: expected a non-empty ETag"),
    "versionId a number": (
        put([*OBJ, "versionId"], 3),
        "Records[0].s3.object.versionId: expected a non-empty string, got 3",
    ),
    "sequencer empty": (
        put([*OBJ, "sequencer"], ""),
        "Records[0].s3.object.sequencer: expected a non-empty string, got ''",
    ),
}


@pytest.mark.parametrize("case", sorted(RECORD_POISON))
def test_bad_record_field_is_poison_with_its_path(case: str) -> None:
    mutate, expected = RECORD_POISON[case]
    doc = fixture_doc("s3_put.json")
    mutate(doc)
    parsed = parse_doc(doc)
    assert parsed.events == ()
    assert reason_of(parsed).startswith(expected)


EB: list[str | int] = ["detail"]
EVENTBRIDGE_POISON = {
    "source not S3": (
        put(["source"], "aws.ec2"),
        "source: expected 'aws.s3' (an S3 EventBridge event), got 'aws.ec2'",
    ),
    "unknown detail-type": (
        put(["detail-type"], "Object Exploded"),
        "detail-type: unknown S3 detail-type 'Object Exploded'",
    ),
    "detail not an object": (put(["detail"], "x"), "detail: expected an object, got 'x'"),
    "unknown created reason": (put([*EB, "reason"], "RenameObject"), "detail.reason: expected one of"),
    "reason a list": (put([*EB, "reason"], ["PutObject"]), "detail.reason: expected one of"),
    "missing time": (drop(["time"]), "time: expected an ISO 8601 time"),
    "missing bucket": (drop([*EB, "bucket"]), "detail.bucket: expected an object, but it is missing"),
    "key a number": (put([*EB, "object", "key"], 5), "detail.object.key: expected a non-empty string, got 5"),
    "size a string": (
        put([*EB, "object", "size"], "5"),
        "detail.object.size: expected a non-negative integer, got '5'",
    ),
}


@pytest.mark.parametrize("case", sorted(EVENTBRIDGE_POISON))
def test_bad_eventbridge_event_is_poison_with_its_path(case: str) -> None:
    mutate, expected = EVENTBRIDGE_POISON[case]
    doc = fixture_doc("eventbridge_object_created.json")
    mutate(doc)
    assert reason_of(parse_doc(doc)).startswith(expected)


def test_eventbridge_deletion_without_deletion_type_is_poison() -> None:
    doc = fixture_doc("eventbridge_object_deleted.json")
    del doc["detail"]["deletion-type"]
    assert reason_of(parse_doc(doc)).startswith("detail.deletion-type: expected one of")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("", "body: not valid JSON: Expecting value at line 1 column 1"),
        ("not json", "body: not valid JSON: Expecting value at line 1 column 1"),
        ('{"Records": [', "body: not valid JSON:"),
        ("[1, 2]", "body: expected a JSON object, got a list"),
        ("42", "body: expected a JSON object, got 42"),
        ('"Records"', "body: expected a JSON object, got 'Records'"),
        ("null", "body: expected a JSON object, got null"),
        ("{}", "body: not a recognised S3 event message"),
        ('{"hello": "world"}', "body: not a recognised S3 event message"),
        ('{"Event": "s3:SomethingElse"}', "body: not a recognised S3 event message"),
        ('{"Event": "s3:TestEvent", "Bucket": 5}', "Bucket: expected a non-empty string, got 5"),
    ],
)
def test_body_that_is_not_an_s3_message_is_poison(body: str, expected: str) -> None:
    assert reason_of(parse_message(body)).startswith(expected)


def test_a_nul_byte_inside_a_json_string_is_poison_saying_the_body_is_not_valid_json() -> None:
    body = json.dumps(notification("data/a\x00b.csv"))
    assert "\\u0000" in body
    body = body.replace("\\u0000", "\x00")  # the NUL itself, not its escape: JSON-ish, but not JSON
    column = body.index("\x00") + 1
    assert reason_of(parse_message(body)) == (
        f"body: not valid JSON: an unescaped control character U+0000 in a string at line 1 column {column} "
        "(JSON needs it escaped, as \\u0000)"
    )
    wrapped = json.dumps(sns_wrap(body))  # in an SNS envelope the NUL is escaped, the Message holds it
    assert reason_of(parse_message(wrapped)).startswith(
        "Message: not valid JSON: an unescaped control character U+0000 in a string at line 1 column"
    )


def test_a_json_error_ending_in_at_does_not_say_at_twice() -> None:
    assert reason_of(parse_message('{"key": "unterminated')) == (
        "body: not valid JSON: Unterminated string starting at line 1 column 9"
    )


def test_unrecognised_shape_reason_lists_top_level_fields() -> None:
    assert "top-level fields: 'detail', 'version'" in reason_of(
        parse_message('{"detail": {}, "version": "0"}')
    )


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (5, "Message: expected a JSON string, got 5"),
        ({"Records": []}, "Message: expected a JSON string, got an object"),
        ("not json at all", "Message: not valid JSON: Expecting value"),
        ("[1]", "Message: expected a JSON object, got a list"),
        ("{}", "Message: not a recognised S3 event message"),
        (json.dumps(sns_wrap(notification())), "Message: not a recognised S3 event message"),  # no SNS in SNS
    ],
)
def test_bad_sns_message_is_poison(message: Any, expected: str) -> None:
    doc = sns_wrap("placeholder")
    doc["Message"] = message
    assert reason_of(parse_doc(doc)).startswith(expected)


def test_deeply_nested_json_is_poison_not_recursion_error() -> None:
    body = "[" * 100_000 + "]" * 100_000
    assert reason_of(parse_message(body)) == "body: not valid JSON: nested too deeply"
    nested_message = sns_wrap("[" * 50_000 + "]" * 50_000)
    assert reason_of(parse_doc(nested_message)) == "Message: not valid JSON: nested too deeply"


def test_integer_with_too_many_digits_is_poison() -> None:
    body = json.dumps(notification()).replace('"size": 10', '"size": ' + "9" * 5000)
    assert reason_of(parse_message(body)).startswith("body: not valid JSON: Exceeds the limit")


def test_non_string_body_is_poison() -> None:
    assert reason_of(parse_message(b"{}")) == "body: expected a string, got bytes"  # type: ignore[arg-type]


def test_long_bad_values_are_shortened_in_reasons() -> None:
    reason = reason_of(parse_doc(notification(size="x" * 10_000)))
    assert len(reason) < 200
    assert reason.endswith("... (10000 characters)")


# --- never raises ----------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=25,
)


def assert_well_formed(parsed: Parsed) -> None:
    assert isinstance(parsed, Parsed)
    assert parsed.poison or parsed.events or parsed.test_event or parsed.ignored
    if parsed.poison is not None:
        assert parsed.poison.reason
        assert "internal parser error" not in parsed.poison.reason
    for event in parsed.events:
        assert event.key and event.bucket
        assert event.event_time.tzinfo == UTC
        assert event.size is None or event.size >= 0
        assert len(event.event_id) == 64


@given(st.text())
@settings(deadline=None)
def test_parse_message_never_raises_on_arbitrary_text(body: str) -> None:
    assert_well_formed(parse_message(body))


@given(json_values)
@settings(deadline=None)
def test_parse_message_never_raises_on_arbitrary_json(value: Any) -> None:
    assert_well_formed(parse_message(json.dumps(value)))
    assert_well_formed(parse_doc(sns_wrap(json.dumps(value))))


def leaf_paths(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    paths: list[tuple[str | int, ...]] = [path] if path else []
    if isinstance(value, dict):
        for name, child in value.items():
            paths += leaf_paths(child, (*path, name))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            paths += leaf_paths(child, (*path, index))
    return paths


@st.composite
def mutated_fixtures(draw: st.DrawFn) -> Any:
    doc = fixture_doc(draw(st.sampled_from(FIXTURES)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = leaf_paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        target = doc
        for step in path[:-1]:
            target = target[step]
        if draw(st.booleans()):
            target[path[-1]] = draw(json_values)
        elif isinstance(target, dict):
            del target[path[-1]]
    return doc


@given(mutated_fixtures())
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_parse_message_never_raises_on_mutated_fixtures(doc: Any) -> None:
    assert_well_formed(parse_doc(doc))
