"""Every life an object can have, as a model-based test against the real flows on the local endpoint.

Hypothesis drives random sequences of S3 operations (PUT of new or the same bytes, multipart upload,
DELETE), queue trouble (redelivered and reordered notifications, lost creation notifications) and runs of
capture, backfill and ingest. Ingest runs as two processes (every `run_ingest` call is a fresh process
state): one with `missing.checkpoint.strategy=earliest`, one with `latest`, each writing an appending
target (`on.object.removed=ignore`) and a mirroring one (`delete`).

The oracle is the README's "Object lifecycle" table. After every step no target holds a line twice; after
a full sync (capture drained, backfill when notifications were lost, ingest) a mirroring target holds
exactly the lines of the objects that exist, from the bytes S3 holds now, and an appending target holds
every current content plus only contents the object once had.

`pytest -m long` (make test-long) runs many more and longer examples.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from s3events.backfill.run import run_backfill
from s3events.capture.service import run_capture
from s3events.config import load_settings
from s3events.dev import provision
from s3events.infra import aws
from s3events.ingest.service import run_ingest
from tests.conftest import Stack, long_run, read_table

pytestmark = pytest.mark.integration

LONG = long_run()
KEYS = ("in/a.json", "in/b c+d%.json")
OLD_KEY = "old/before-the-first-run.json"  # written before the `latest` process's first run only
CONTENTS = (0, 1, 2)
# Weighted: what a step does (S3 operations most often, so that runs find something to do).
ACTIONS = (
    ["upload"] * 6
    + ["delete"] * 3
    + ["redeliver", "lose_creation_notifications", "capture", "capture", "backfill", "ingest", "sync"]
)
TARGETS = {  # name -> (missing.checkpoint.strategy, on.object.removed)
    "keep": ("earliest", "ignore"),
    "mirror": ("earliest", "delete"),
    "keep_latest": ("latest", "ignore"),
    "mirror_latest": ("latest", "delete"),
}


def body(content: int) -> bytes:
    return b"".join(json.dumps({"c": content, "n": n}).encode() + b"\n" for n in range(2))


class ObjectLives(RuleBasedStateMachine):
    # Set per test run by the fixture below (hypothesis builds a new machine per example).
    env: ClassVar[dict[str, Any]] = {}

    @initialize()
    def start(self) -> None:
        options: aws.AwsOptions = self.env["aws_options"]
        suffix = uuid.uuid4().hex[:10]
        made = provision.notifying_bucket(options, bucket=f"lives-{suffix}", queue=f"lives-{suffix}")
        root = Path(self.env["tmp"]) / suffix
        self.stack = Stack(made.bucket, made.queue_url, options.endpoint_url or "", str(root / "metadata"))
        self.s3 = aws.client(options, "s3")
        self.sqs = aws.client(options, "sqs")
        self.paths = {name: str(root / name) for name in TARGETS}
        self.current: dict[str, tuple[int, str] | None] = {}  # key -> (content, etag) S3 holds now
        self.ever: dict[str, set[int]] = {}  # key -> every content it held
        self.lost = False  # some creation notifications were dropped: a sync must backfill
        # Before the `latest` process's first run: an object only `earliest` targets may hold.
        self._put(OLD_KEY, 0)
        self.capture()
        self.ingest(strategies=("latest",))

    # ----------------------------------------------------------------------------------- S3 operations

    def _put(self, key: str, content: int, *, multipart: bool = False) -> None:
        data = body(content)
        if multipart:
            upload = self.s3.create_multipart_upload(Bucket=self.stack.bucket, Key=key)
            part = self.s3.upload_part(
                Bucket=self.stack.bucket, Key=key, UploadId=upload["UploadId"], PartNumber=1, Body=data
            )
            response = self.s3.complete_multipart_upload(
                Bucket=self.stack.bucket,
                Key=key,
                UploadId=upload["UploadId"],
                MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]},
            )
        else:
            response = self.s3.put_object(Bucket=self.stack.bucket, Key=key, Body=data)
        self.current[key] = (content, response["ETag"].strip('"'))
        self.ever.setdefault(key, set()).add(content)

    @rule(data=st.data())
    def step(self, data: st.DataObject) -> None:
        """One step of a life; S3 operations are drawn more often than runs, so lives are eventful."""
        action = data.draw(st.sampled_from(ACTIONS), label="action")
        if action == "upload":
            key = data.draw(st.sampled_from(KEYS), label="key")
            content = data.draw(st.sampled_from(CONTENTS), label="content")
            self.upload(key, content, multipart=data.draw(st.booleans(), label="multipart"))
        elif action == "delete":
            self.delete(data.draw(st.sampled_from(KEYS), label="key"))
        else:
            getattr(self, action)()

    def upload(self, key: str, content: int, *, multipart: bool) -> None:
        """New bytes, or the same bytes again (also after a removal)."""
        self._put(key, content, multipart=multipart)

    def delete(self, key: str) -> None:
        self.s3.delete_object(Bucket=self.stack.bucket, Key=key)
        self.current[key] = None

    # ------------------------------------------------------------------------------------- queue trouble

    def _receive(self) -> list[dict[str, Any]]:
        answer = self.sqs.receive_message(
            QueueUrl=self.stack.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=30, WaitTimeSeconds=0
        )
        return list(answer.get("Messages", []))

    def _release(self, message: dict[str, Any]) -> None:
        self.sqs.change_message_visibility(
            QueueUrl=self.stack.queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )

    def redeliver(self) -> None:
        """Notifications delivered twice, the copies after the ones sent later."""
        for message in self._receive():
            self.sqs.send_message(QueueUrl=self.stack.queue_url, MessageBody=message["Body"])
            self._release(message)

    def lose_creation_notifications(self) -> None:
        """Upload notifications that never arrive (removals do: a lost removal cannot be found by
        listing, and no policy can act on what it never hears of)."""
        for message in self._receive():
            if '"ObjectCreated:' in message["Body"] and '"ObjectRemoved:' not in message["Body"]:
                self.sqs.delete_message(QueueUrl=self.stack.queue_url, ReceiptHandle=message["ReceiptHandle"])
                self.lost = True
            else:
                self._release(message)

    # ------------------------------------------------------------------------------------------- runs

    def _settings(self, strategy: str) -> Any:
        names = [name for name, (s, _) in TARGETS.items() if s == strategy]
        conf: dict[str, object] = {
            "ingest__targets": ",".join(names),
            "ingest__missing__checkpoint__strategy": strategy,
        }
        for name in names:
            conf[f"ingest__target__{name}__path"] = self.paths[name]
            conf[f"ingest__target__{name}__format"] = "json"
            conf[f"ingest__target__{name}__on__object__removed"] = TARGETS[name][1]
        return load_settings(None, self.stack.conf(**conf))

    def capture(self) -> None:
        run_capture(load_settings(None, self.stack.conf()), once=True)

    def backfill(self) -> None:
        run_backfill(load_settings(None, self.stack.conf()), sources=[f"s3://{self.stack.bucket}"])

    def ingest(self, strategies: tuple[str, ...] = ("earliest", "latest")) -> None:
        for strategy in strategies:
            totals = run_ingest(self._settings(strategy), once=True, spark=self.env["spark"])
            assert not totals.failed, totals.failed

    def sync(self) -> None:
        """Everything caught up; then each target must hold exactly what the policy says."""
        self.capture()
        if self.lost:
            self.backfill()
            self.lost = False
        self.ingest()
        for name in TARGETS:
            self._check_exact(name)

    def teardown(self) -> None:
        if hasattr(self, "stack"):
            self.sync()  # every life ends with the exact check

    # ----------------------------------------------------------------------------------------- oracle

    def _rows(self, name: str) -> list[dict[str, Any]]:
        path = self.paths[name]
        return read_table(path) if Path(path, "_delta_log").exists() else []

    def _expected_keys(self, name: str) -> list[str]:
        keys = [k for k in self.current if k != OLD_KEY or TARGETS[name][0] == "earliest"]
        return [k for k in keys if self.current[k] is not None]

    @invariant()
    def no_line_twice_and_no_foreign_content(self) -> None:
        if not hasattr(self, "stack"):
            return
        for name in TARGETS:
            rows = self._rows(name)
            lines = Counter((r["_source_file"], r["_source_etag"], r["c"], r["n"]) for r in rows)
            assert all(n == 1 for n in lines.values()), (name, lines)
            for r in rows:
                key = r["_source_file"].removeprefix(f"s3://{self.stack.bucket}/")
                assert r["c"] in self.ever[key], (name, key, r["c"])

    def _check_exact(self, name: str) -> None:
        rows = self._rows(name)
        held = Counter((r["_source_file"], r["_source_etag"], r["c"], r["n"]) for r in rows)
        wanted = Counter()
        for key in self._expected_keys(name):
            content, etag = self.current[key]  # type: ignore[misc]
            for n in range(2):
                wanted[(f"s3://{self.stack.bucket}/{key}", etag, content, n)] += 1
        if TARGETS[name][1] == "delete":
            assert held == wanted, (name, sorted(held), sorted(wanted))
        else:
            missing = wanted - held
            assert not missing, (name, sorted(missing))
            if TARGETS[name][0] == "latest":
                assert not any(f.endswith(OLD_KEY) for f, *_ in held), name


ObjectLives.TestCase.settings = settings(
    max_examples=60 if LONG else 6,
    stateful_step_count=40 if LONG else 20,
    derandomize=not LONG,  # CI runs the same lives every time; the long run explores new ones
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture
def lives_env(aws_options, spark, tmp_path):
    ObjectLives.env = {"aws_options": aws_options, "spark": spark, "tmp": str(tmp_path)}
    yield
    ObjectLives.env = {}


@pytest.mark.long
@pytest.mark.timeout(3600 if LONG else 900)
def test_every_life_of_an_object_ends_with_what_the_policy_promises(lives_env):
    ObjectLives.TestCase("runTest").runTest()
