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
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.harness.endpoints import free_port
from benchmarks.harness.server import ServerProcess, probe_client
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
class ElasticMQ(ServerProcess):
    """A running ElasticMQ server. Use as a context manager, or call start()/stop().
    `heap`: the JVM's -Xmx. Its queues live in memory: 100,000 S3 notifications waiting, the JVM's RSS was
    about 360 MiB; 300,000, 815 MiB."""

    heap: str = "2g"
    _config_dir: tempfile.TemporaryDirectory[str] | None = field(default=None, init=False, repr=False)

    name = "ElasticMQ"

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
        command = [java, f"-Xmx{self.heap}", f"-Dconfig.file={config}", "-cp", f"{lib}{os.sep}*", MAIN_CLASS]
        probe = probe_client("sqs", self.url)
        self._launch(command, probe.list_queues, "ListQueues", timeout=timeout, every=0.2)
        return self

    def stop(self) -> None:
        super().stop()  # the JVM's shutdown hook stops the server
        if self._config_dir is not None:
            self._config_dir.cleanup()
            self._config_dir = None
