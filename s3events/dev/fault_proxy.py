"""An HTTP proxy between our processes and the local S3/SQS endpoint that injects faults on chosen
requests: the failures real S3 and SQS produce and a well-behaved local endpoint never does.

Point `s3events.aws.endpoint.url` at `FaultProxy.url`; every request is forwarded to the endpoint unless a
rule picks it. Kinds of fault:
- `drop_before`: the connection is closed before the request reaches the endpoint;
- `drop_after`: the request is forwarded and answered, then the connection is closed before the answer
  is written: the caller sees a failure of a request that succeeded (a PutObject or DeleteMessageBatch
  whose answer was lost), the case that matters most for exactly-once;
- `status`: an error answer (500, 503 SlowDown) without forwarding; `throttle`: the service's own
  throttling answer (SQS ThrottlingException in its JSON protocol, S3 503 SlowDown);
- `cut_body`: the answer's headers and half its body, then the connection dies (a body cut mid-stream);
- `latency`: the request is held `delay` seconds, then forwarded.

Dev and test tooling only: it is not on any production path.
"""

from __future__ import annotations

import collections
import contextlib
import http.client
import json
import random
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

FaultKind = Literal["drop_before", "drop_after", "status", "throttle", "cut_body", "latency"]
STAT_NAMES = ("requests", "list_requests", "listed_keys")
# GET .../stats answers `stats` as JSON, GET .../journal the requests counted since the last reset (method
# and path, the latest JOURNAL_SIZE); POST .../reset zeroes both.
CONTROL = "/__fault_proxy/"
JOURNAL_SIZE = 10_000
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
}


@dataclass
class Fault:
    """Inject `kind` into the next `times` requests whose method and path (with query) match."""

    kind: FaultKind
    path: str = ""  # a regular expression searched in the request path, e.g. r"/_delta_log/\d{20}\.json$"
    method: str | None = None  # None: any method
    operation: str | None = None  # an SQS operation, e.g. "DeleteMessageBatch" (JSON or query protocol)
    times: int = 1
    status: int = 503
    code: str = "SlowDown"  # the error code in an S3-style XML body of a `status` fault
    delay: float = 0.5  # seconds a `latency` fault holds the request before forwarding it

    def matches(self, method: str, path: str, operation: str) -> bool:
        return (
            self.times > 0
            and (self.method is None or self.method == method)
            and (self.operation is None or self.operation == operation)
            and bool(re.search(self.path, path))
        )


@dataclass(frozen=True, slots=True)
class Injected:
    kind: FaultKind
    method: str
    path: str
    operation: str


@dataclass
class FaultProxy:
    """A threaded reverse proxy to `upstream` (e.g. the moto endpoint). Use as a context manager."""

    upstream: str
    faults: list[Fault] = field(default_factory=list)
    # Besides the rules: this fraction of all other requests gets one of `random_kinds`, seeded.
    rate: float = 0.0
    seed: int = 0
    random_kinds: tuple[FaultKind, ...] = ("status", "drop_before", "drop_after")
    # The endpoint is gone: every request's connection is cut before it reaches the endpoint (counted in
    # `refused`, not `injected`), until this is set back to False.
    down: bool = False
    refused: int = 0
    injected: list[Injected] = field(default_factory=list)
    forwarded: int = 0
    # Requests forwarded, by S3 LIST and keys those LISTs returned: what a caller's work costs the store.
    stats: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STAT_NAMES, 0))
    journal: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=JOURNAL_SIZE))
    # A stand-in for an answer the endpoint gives otherwise than AWS would (see eventbridge_standin): each
    # forwarded answer's body goes through it, (method, path, request body, status, body) -> body.
    rewrite: Callable[[str, str, bytes, int, bytes], bytes] | None = None
    _random: random.Random = field(init=False, repr=False)
    _server: ThreadingHTTPServer | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def _pick(self, method: str, path: str, operation: str) -> Fault | None:
        with self._lock:
            if self.down:
                self.refused += 1
                return Fault("drop_before")
            for fault in self.faults:
                if fault.matches(method, path, operation):
                    fault.times -= 1
                    self.injected.append(Injected(fault.kind, method, path, operation))
                    return fault
            if self.rate and self._random.random() < self.rate:
                kind = self._random.choice(self.random_kinds)
                self.injected.append(Injected(kind, method, path, operation))
                return Fault(
                    kind,
                    status=503,
                    code="SlowDown" if not operation else "ServiceUnavailable",
                    delay=self._random.uniform(0.05, 1.0),
                )
            self.forwarded += 1
            return None

    def _count(self, method: str, path: str, payload: bytes) -> None:
        with self._lock:
            self.stats["requests"] += 1
            self.journal.append(f"{method} {path}")
            if method == "GET" and "list-type=2" in path:
                self.stats["list_requests"] += 1
                self.stats["listed_keys"] += payload.count(b"<Key>")

    def _control(self, path: str) -> bytes:
        with self._lock:
            if path.endswith("/reset"):
                self.stats = dict.fromkeys(STAT_NAMES, 0)
                self.journal.clear()
            if path.endswith("/journal"):
                return json.dumps(list(self.journal)).encode()
            return json.dumps(self.stats).encode()

    def start(self) -> FaultProxy:
        self._server = _QuietServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


class _QuietServer(ThreadingHTTPServer):
    # delta-rs opens dozens of connections at once (a table open, a compaction); with socketserver's
    # backlog of 5 the kernel dropped the overflow and TCP's retransmission backoff stalled callers for
    # a minute and more, which looked like a hang in delta-rs.
    request_queue_size = 1024

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gave up on its answer (a timeout, or our own cut) is not news


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to `proxy`."""
    return type("Handler", (_Handler,), {"proxy": proxy})


class _Handler(BaseHTTPRequestHandler):
    """Forwards every request to the proxy's upstream, or answers it with the fault the proxy picks."""

    protocol_version = "HTTP/1.1"
    proxy: ClassVar[FaultProxy]

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet: tests read `self.proxy.injected` instead

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _cut(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _handle(self) -> None:
        body = self._body()
        if self.path.startswith(CONTROL):
            self._answer(200, self.proxy._control(self.path), "application/json")
            return
        fault = self.proxy._pick(self.command, self.path, _operation(self.headers.get("X-Amz-Target"), body))
        if fault is not None and fault.kind == "drop_before":
            self._cut()
            return
        if fault is not None and fault.kind == "status":
            self._error(fault)
            return
        if fault is not None and fault.kind == "throttle":
            self._throttle(fault)
            return
        if fault is not None and fault.kind == "latency":
            time.sleep(fault.delay)  # the proxy plays a slow network; the caller's timeouts decide
        status, reason, answer_headers, payload = self._forward(body)
        if fault is not None and fault.kind == "drop_after":  # it happened; the caller never knows
            self._cut()
            return
        if fault is not None and fault.kind == "cut_body" and len(payload) > 1:
            self._send_head(status, reason, answer_headers, len(payload))
            self.wfile.write(payload[: len(payload) // 2])  # then the connection dies mid-body
            self._cut()
            return
        self.proxy._count(self.command, self.path, payload)
        self._send_head(status, reason, answer_headers, len(payload))
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _forward(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """The upstream's answer to this request: status, reason, headers and body (maybe rewritten)."""
        upstream = urlsplit(self.proxy.upstream)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        if body or self.command in ("PUT", "POST"):
            headers["Content-Length"] = str(len(body))
        connection = http.client.HTTPConnection(upstream.hostname or "127.0.0.1", upstream.port, timeout=120)
        try:
            connection.request(self.command, self.path, body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read()
            if self.proxy.rewrite is not None:
                payload = self.proxy.rewrite(self.command, self.path, body, response.status, payload)
            return response.status, response.reason, response.getheaders(), payload
        finally:
            connection.close()

    def _send_head(self, status: int, reason: str, headers: list[tuple[str, str]], length: int) -> None:
        self.send_response(status, reason)
        for name, value in headers:
            if name.lower() == "content-length" and self.command == "HEAD":
                length = int(value)  # a HEAD answer has no body: its length is the object's
            elif name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def _throttle(self, fault: Fault) -> None:
        """The throttling answer of the service asked: SQS's JSON protocol, or S3's SlowDown."""
        if self.headers.get("X-Amz-Target"):
            payload = json.dumps(
                {"__type": "com.amazonaws.sqs#ThrottlingException", "message": "injected: Rate exceeded"}
            ).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/x-amz-json-1.0")
            self.send_header("x-amzn-query-error", "ThrottlingException;Sender")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self._error(Fault("status", status=503, code="SlowDown"))

    def _error(self, fault: Fault) -> None:
        payload = (
            f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{fault.code}</Code>"
            f"<Message>injected by the fault proxy</Message></Error>"
        ).encode()
        self._answer(fault.status, payload, "application/xml")

    def _answer(self, status: int, payload: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle  # http.server's names


def _operation(target: str | None, body: bytes) -> str:
    """The AWS operation of a JSON-protocol (X-Amz-Target: AmazonSQS.ReceiveMessage) or query-protocol
    (Action=ReceiveMessage in the form body) request; "" for S3's REST calls."""
    if target:
        return target.rsplit(".", 1)[-1]
    found = re.search(rb"(?:^|&)Action=([A-Za-z]+)", body)
    return found.group(1).decode() if found else ""


class ProxyProcess:
    """The control API of a proxy started by `proxy_process`."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _call(self, action: str, method: str) -> Any:
        request = urllib.request.Request(f"{self.url}{CONTROL}{action}", method=method)
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())

    def reset(self) -> None:
        self._call("reset", "POST")

    def stats(self) -> dict[str, int]:
        return dict(self._call("stats", "GET"))

    def journal(self) -> list[str]:
        return list(self._call("journal", "GET"))


@contextlib.contextmanager
def proxy_process(upstream: str, *, rate: float = 0.0, seed: int = 0) -> Iterator[ProxyProcess]:
    """A proxy in a process of its own, for callers that go through it with deltalake (see `main`)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "s3events.dev.fault_proxy", upstream, f"--rate={rate}", f"--seed={seed}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield ProxyProcess(process.stdout.readline().strip())
    finally:
        process.terminate()
        process.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    """`python -m s3events.dev.fault_proxy UPSTREAM_URL`: serve a proxy in a process of its own (a
    caller that uses deltalake must not host it: delta-rs holds the GIL in some blocking calls); prints
    its URL on the first line, then serves until killed."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m s3events.dev.fault_proxy")
    parser.add_argument("upstream")
    parser.add_argument("--rate", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    proxy = FaultProxy(args.upstream, rate=args.rate, seed=args.seed).start()
    print(proxy.url, flush=True)
    threading.Event().wait()  # until killed
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
