"""A stand-in in front of the local endpoint that answers GetBucketNotificationConfiguration as S3 does
for a bucket whose EventBridge delivery is on.

Real S3 reports an enabled EventBridge delivery as an empty `<EventBridgeConfiguration/>` element in that
answer (botocore parses it as `"EventBridgeConfiguration": {}`). moto accepts the element in a
PutBucketNotificationConfiguration but never answers it, so a tool that drops it while rewriting a bucket's
notifications (and so switches EventBridge off for every rule on that bucket) passes every test against
moto alone. This stand-in remembers, per bucket, whether the last notification PUT carried the element,
adds it to the GET answer as S3 does, and keeps the body of every notification PUT for a test to read.
It runs as the `rewrite` of a `FaultProxy` (no faults): every request is forwarded unchanged.

Dev and test tooling only: it is not on any production path. Run it in the process of a test whose code
under test runs in child processes (the CLI), like `FaultProxy`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from s3events.dev.fault_proxy import FaultProxy

_ELEMENT = b"<EventBridgeConfiguration"
_EMPTY = b"<EventBridgeConfiguration/>"
_CLOSE = b"</NotificationConfiguration>"


@dataclass
class EventBridgeStandIn:
    """Use as a context manager: `url` is the endpoint to point clients at while it runs."""

    upstream: str
    eventbridge: set[str] = field(default_factory=set)  # buckets whose EventBridge delivery is on
    puts: list[tuple[str, bytes]] = field(default_factory=list)  # (bucket, body) of each notification PUT
    _proxy: FaultProxy | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def url(self) -> str:
        assert self._proxy is not None, "enter it first"
        return self._proxy.url

    def puts_to(self, bucket: str) -> list[bytes]:
        with self._lock:
            return [body for name, body in self.puts if name == bucket]

    def __enter__(self) -> EventBridgeStandIn:
        self._proxy = FaultProxy(self.upstream, rewrite=self.rewrite).start()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._proxy is not None:
            self._proxy.stop()
            self._proxy = None

    def rewrite(self, method: str, path: str, body: bytes, status: int, payload: bytes) -> bytes:
        """A notification PUT that succeeded is remembered; a GET's answer gets the element S3 would send
        for a bucket whose EventBridge delivery is on. Anything else passes as it is."""
        parts = urlsplit(path)  # path-style addressing: /<bucket>?notification
        if status != 200 or "notification" not in parse_qs(parts.query, keep_blank_values=True):
            return payload
        bucket = parts.path.strip("/").split("/")[0]
        with self._lock:
            if method == "PUT":
                self.puts.append((bucket, body))
                if _ELEMENT in body:
                    self.eventbridge.add(bucket)
                else:
                    self.eventbridge.discard(bucket)
            on = bucket in self.eventbridge
        if method != "GET" or not on or _ELEMENT in payload:
            return payload
        if _CLOSE in payload:
            return payload.replace(_CLOSE, _EMPTY + _CLOSE, 1)
        opened = payload.rstrip()
        if opened.endswith(b"/>"):  # <NotificationConfiguration xmlns="..."/>
            return opened[:-2] + b">" + _EMPTY + _CLOSE
        return payload
