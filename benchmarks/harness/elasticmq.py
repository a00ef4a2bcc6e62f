"""ElasticMQ, a JVM SQS-compatible server, as a child process on 127.0.0.1 for the benchmarks.

moto's SQS answers each ReceiveMessage in O(queue depth) (0.4 s per call at 1,000 messages waiting), so a
backlog of 100,000 messages is out of its reach; ElasticMQ keeps its queues in memory and answers in
milliseconds at any depth. Its server and dependencies (~37 MB of jars) are fetched from Maven Central
with `mvn` on first use and kept in `.elasticmq/<version>/` at the repository root (git-ignored); Java 17
and mvn must be on PATH. The benchmarks only: CI and the tests never need it.

    with ElasticMQ() as sqs_server:
        client = boto3.client("sqs", endpoint_url=sqs_server.url, region_name="us-east-1")
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import boto3
import botocore.config
import botocore.exceptions

from benchmarks.harness.endpoints import LOCAL_ENV, die_with_parent, free_port, stop_process
from benchmarks.harness.procs import rss_bytes
from s3events.errors import FatalError

VERSION = "1.7.1"
ARTIFACT = ("org.elasticmq", "elasticmq-server_2.13", VERSION)
MAIN_CLASS = "org.elasticmq.server.Main"
CACHE = Path(__file__).resolve().parent.parent / ".elasticmq"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.s3events.benchmarks</groupId>
  <artifactId>elasticmq-fetch</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>{0}</groupId>
      <artifactId>{1}</artifactId>
      <version>{2}</version>
    </dependency>
  </dependencies>
</project>
"""

# Typesafe config: the server's defaults, then our address. The queue URLs it hands out name node-address.
_CONFIG = """include classpath("application.conf")
node-address {{ protocol = "http", host = "127.0.0.1", port = {port}, context-path = "" }}
rest-sqs {{ enabled = true, bind-port = {port}, bind-hostname = "127.0.0.1", sqs-limits = strict }}
generate-node-address = false
"""


def _tool(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise FatalError(f"{name} was not found on PATH; ElasticMQ needs Java 17+ and Maven (mvn)")
    return found


def jars(cache: Path = CACHE) -> Path:
    """The directory of ElasticMQ's server jars, fetched with mvn into `cache` the first time.
    A fetch lands in a temporary directory beside the cache and is renamed into place whole, so an
    interrupted fetch leaves nothing that looks complete."""
    target = cache / VERSION
    if (target / "COMPLETE").exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".fetch-") as tmp:
        work = Path(tmp)
        (work / "pom.xml").write_text(_POM.format(*ARTIFACT))
        lib = work / "lib"
        command = [
            _tool("mvn"),
            "-q",
            "-B",
            "-f",
            str(work / "pom.xml"),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={lib}",
            "-DincludeScope=runtime",
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0 or not any(lib.glob("elasticmq-server_*.jar")):
            raise FatalError(
                f"fetching {':'.join(ARTIFACT)} with mvn failed (exit {done.returncode}):\n"
                f"{(done.stdout + done.stderr)[-2000:]}"
            )
        (lib / "COMPLETE").write_text(":".join(ARTIFACT) + "\n")
        try:
            lib.rename(target)
        except OSError:
            if not (target / "COMPLETE").exists():  # not another process's finished fetch: ours failed
                raise
    return target


@dataclass
class ElasticMQ:
    """A running ElasticMQ server. Use as a context manager, or call start()/stop().
    `heap`: the JVM's -Xmx. Its queues live in memory: 100,000 S3 notifications waiting, the JVM's RSS was
    about 360 MiB; 300,000, 815 MiB."""

    port: int = 0
    log_path: Path | None = None
    heap: str = "2g"
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _config_dir: tempfile.TemporaryDirectory[str] | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self, *, timeout: float = 120.0) -> ElasticMQ:
        """Start the server and wait until it answers an SQS call (ListQueues); the JVM takes ~5 s to
        start on an idle machine, far longer on a busy one, hence the generous deadline."""
        lib = jars()
        java = _tool("java")
        if not self.port:
            self.port = free_port()
        self._config_dir = tempfile.TemporaryDirectory(prefix="elasticmq-")
        config = Path(self._config_dir.name) / "elasticmq.conf"
        config.write_text(_CONFIG.format(port=self.port))
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self._process = subprocess.Popen(
            [
                java,
                f"-Xmx{self.heap}",
                f"-Dconfig.file={config}",
                "-cp",
                f"{lib}{os.sep}*",
                MAIN_CLASS,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
        probe = boto3.client(
            "sqs",
            endpoint_url=self.url,
            region_name=LOCAL_ENV["AWS_REGION"],
            aws_access_key_id=LOCAL_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=LOCAL_ENV["AWS_SECRET_ACCESS_KEY"],
            config=botocore.config.Config(
                connect_timeout=1, read_timeout=5, retries={"mode": "standard", "max_attempts": 1}
            ),
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code = self._process.returncode
                self.stop()
                raise FatalError(f"ElasticMQ exited at start-up with code {code}")
            try:
                probe.list_queues()
                return self
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
                time.sleep(0.2)  # polling for readiness of a child process
        self.stop()
        raise FatalError(f"ElasticMQ did not answer ListQueues on {self.url} within {timeout:.0f}s")

    def rss_mib(self) -> float:
        """The server's resident memory (the JVM), MiB; nan when it is not running."""
        held = rss_bytes(self._process.pid) if self._process else 0
        return held / 2**20 if held else float("nan")

    def stop(self) -> None:
        stop_process(self._process)  # the JVM's shutdown hook stops the server
        self._process = None
        if self._config_dir is not None:
            self._config_dir.cleanup()
            self._config_dir = None

    def __enter__(self) -> ElasticMQ:
        return self.start() if self._process is None else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
