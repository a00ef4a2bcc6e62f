"""A stand-in in front of the local endpoint that answers GetBucketNotificationConfiguration as S3 does
for a bucket whose EventBridge delivery is on.

Real S3 reports an enabled EventBridge delivery as an empty `<EventBridgeConfiguration/>` element in that
answer (botocore parses it as `"EventBridgeConfiguration": {}`). moto accepts the element in a
PutBucketNotificationConfiguration but never answers it, so a tool that drops it while rewriting a bucket's
notifications (and so switches EventBridge off for every rule on that bucket) passes every test against
moto alone. This proxy remembers, per bucket, whether the last notification PUT carried the element, adds
it to the GET answer as S3 does, and keeps the body of every notification PUT for the test to read. Every
request is forwarded to the endpoint unchanged.

Dev and test tooling only: it is not on any production path. Run it in the process of a test whose code
under test runs in child processes (the CLI), like `FaultProxy`.
"""

from __future__ import annotations

import http.client
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

_ELEMENT = b"<EventBridgeConfiguration"
_EMPTY = b"<EventBridgeConfiguration/>"
_CLOSE = b"</NotificationConfiguration>"
_SKIPPED_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length"}


@dataclass
class EventBridgeStandIn:
    """A threaded reverse proxy to `upstream` (the moto endpoint). Use as a context manager."""

    upstream: str
    eventbridge: set[str] = field(default_factory=set)  # buckets whose EventBridge delivery is on
    puts: list[tuple[str, bytes]] = field(default_factory=list)  # (bucket, body) of each notification PUT
    _server: ThreadingHTTPServer | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def puts_to(self, bucket: str) -> list[bytes]:
        with self._lock:
            return [body for name, body in self.puts if name == bucket]

    def start(self) -> EventBridgeStandIn:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="eventbridge-standin", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> EventBridgeStandIn:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _noted(self, method: str, path: str, body: bytes) -> str | None:
        """The bucket of a notification-configuration request (path-style addressing), else None; a PUT's
        EventBridge element is remembered."""
        parts = urlsplit(path)
        if "notification" not in parse_qs(parts.query, keep_blank_values=True):
            return None
        bucket = parts.path.strip("/").split("/")[0]
        if method == "PUT":
            with self._lock:
                self.puts.append((bucket, body))
                if _ELEMENT in body:
                    self.eventbridge.add(bucket)
                else:
                    self.eventbridge.discard(bucket)
        return bucket

    def _answer(self, bucket: str | None, method: str, status: int, payload: bytes) -> bytes:
        """A GET's answer with the element S3 would send for a bucket whose EventBridge delivery is on."""
        with self._lock:
            on = bucket in self.eventbridge
        if bucket is None or method != "GET" or status != 200 or not on or _ELEMENT in payload:
            return payload
        if _CLOSE in payload:
            return payload.replace(_CLOSE, _EMPTY + _CLOSE, 1)
        opened = payload.rstrip()
        if opened.endswith(b"/>"):  # <NotificationConfiguration xmlns="..."/>
            return opened[:-2] + b">" + _EMPTY + _CLOSE
        return payload


def _handler(standin: EventBridgeStandIn) -> type[BaseHTTPRequestHandler]:
    upstream = urlsplit(standin.upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            bucket = standin._noted(self.command, self.path, body)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _SKIPPED_HEADERS}
            if body or self.command in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            connection = http.client.HTTPConnection(
                upstream.hostname or "127.0.0.1", upstream.port, timeout=120
            )
            try:
                connection.request(self.command, self.path, body=body, headers=headers)
                response = connection.getresponse()
                payload = standin._answer(bucket, self.command, response.status, response.read())
                answer_headers = response.getheaders()
                status, reason = response.status, response.reason
            finally:
                connection.close()
            self.send_response(status, reason)
            for name, value in answer_headers:
                if name.lower() not in _SKIPPED_HEADERS:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle  # http.server's names

    return Handler
