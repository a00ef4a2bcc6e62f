"""The demo's sample data: what `s3events demo` PUTs and sends, and the two targets it ingests into.

The bucket's S3→SQS notification covers `events/` only. Keys:

- `events/…json`: JSON Lines orders (keys that need decoding; a multipart upload, whose Put and
  CompleteMultipartUpload events are one object) and `events/readings/…csv`: CSV with a header;
- `late/…`: both formats again, outside the notification filter: S3 sends no notification for them (as
  when notifications are lost), so only backfill finds them. One late JSON line is cut off on purpose.

Targets route by file type (a glob), so each gets notified and withheld files alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

BUCKET = "s3events-demo-landing"
QUEUE = "s3events-demo"
NOTIFIED_PREFIX = "events/"
WITHHELD_PREFIX = "late/"

ORDER_KEYS = [
    "events/2026/11/22/orders {i}.json",
    "events/dt=2026-11-22/a+b=c%d {i}.json",
    "events/ünïcødé/{i}/nested/deeper.json",
]
ORDER_LINES = 10  # lines per orders file
MULTIPART_KEY = "events/big/multipart.json"
MULTIPART_LINES = 5
READING_KEYS = [f"events/readings/sensor {n}.csv" for n in (1, 2, 3)]
READING_ROWS = 4  # data rows per CSV file, after the header
CSV_HEADER = "sensor,minute,celsius\n"
LATE_ORDER_KEYS = ["late/2026/11/23/orders late 1.json", "late/dt=2026-11-23/orders+late 2.json"]
LATE_READING_KEYS = ["late/readings/sensor 9.csv"]

MALFORMED_KEY = LATE_ORDER_KEYS[0]
MALFORMED_LINE = 4  # 1-based line number in MALFORMED_KEY
MALFORMED_TEXT = '{"order": 1000, "line": 3, "qty": '
MALFORMED_WHAT = "a JSON object cut off mid-line, on purpose"


@dataclass(frozen=True, slots=True)
class DemoTarget:
    name: str
    format: str
    glob: str

    def conf(self, path: str) -> list[str]:
        prefix = f"s3events.ingest.target.{self.name}"
        return [f"{prefix}.path={path}", f"{prefix}.format={self.format}", f"{prefix}.glob={self.glob}"]


TARGETS = (DemoTarget("orders", "json", "**/*.json"), DemoTarget("readings", "csv", "**/*.csv"))


@dataclass(slots=True)
class Sample:
    """What was PUT: keys by whether a notification was sent, and the rows each target should get."""

    notified: list[str] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=lambda: {t.name: 0 for t in TARGETS})
    error_rows: dict[str, int] = field(default_factory=lambda: {t.name: 0 for t in TARGETS})

    @property
    def files(self) -> int:
        return len(self.notified) + len(self.withheld)


def _orders(order: int, lines: int) -> bytes:
    return "".join(
        f'{{"order": {order}, "line": {n}, "qty": {order % 7 + n}}}\n' for n in range(lines)
    ).encode()


def _readings(sensor: int) -> bytes:
    rows = "".join(f"s{sensor},{m},{18 + sensor + m / 4:.2f}\n" for m in range(READING_ROWS))
    return (CSV_HEADER + rows).encode()


def _late_orders(order: int, *, malformed: bool) -> bytes:
    lines = _orders(order, ORDER_LINES).decode().splitlines(keepends=True)
    if malformed:
        lines[MALFORMED_LINE - 1] = MALFORMED_TEXT + "\n"
    return "".join(lines).encode()


def put_samples(s3: Any, bucket: str, *, files: int) -> Sample:
    """PUT every sample object (`files` orders files under `events/`, then the rest) and say what went."""
    sample = Sample()

    def put(key: str, body: bytes, target: str, rows: int) -> None:
        s3.put_object(Bucket=bucket, Key=key, Body=body)
        (sample.notified if key.startswith(NOTIFIED_PREFIX) else sample.withheld).append(key)
        sample.rows[target] += rows

    for i in range(files):
        put(ORDER_KEYS[i % len(ORDER_KEYS)].format(i=i), _orders(i, ORDER_LINES), "orders", ORDER_LINES)
    _put_multipart(s3, bucket, MULTIPART_KEY, _orders(files, MULTIPART_LINES))
    sample.notified.append(MULTIPART_KEY)
    sample.rows["orders"] += MULTIPART_LINES
    for n, key in enumerate(READING_KEYS, start=1):
        put(key, _readings(n), "readings", READING_ROWS)
    for n, key in enumerate(LATE_ORDER_KEYS):
        malformed = key == MALFORMED_KEY
        put(key, _late_orders(1000 + n, malformed=malformed), "orders", ORDER_LINES - int(malformed))
    for key in LATE_READING_KEYS:
        put(key, _readings(9), "readings", READING_ROWS)
    sample.error_rows["orders"] = 1
    return sample


def _put_multipart(s3: Any, bucket: str, key: str, body: bytes) -> None:
    """One part is enough: moto still sends both Put and CompleteMultipartUpload for the object."""
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)
    part = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload["UploadId"], PartNumber=1, Body=body)
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key=key,
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]},
    )


def redeliver_and_poison(sqs: Any, queue_url: str) -> None:
    """A notification delivered a second time (the same body again) and a message that is no S3 event."""
    peeked = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    event_body = next(m["Body"] for m in peeked["Messages"] if '"Records"' in m["Body"])
    sqs.send_message(QueueUrl=queue_url, MessageBody=event_body)
    sqs.send_message(QueueUrl=queue_url, MessageBody="this is not an S3 event")
