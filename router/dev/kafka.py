"""The Apache Kafka engine of the local broker: one combined broker + KRaft controller from Maven Central jars.

``start()`` resolves the server jars (``dev_jars``, cached), writes a fresh directory (settings, log4j2 config,
data), formats it as a new single-voter KRaft cluster and runs ``kafka.Kafka`` on two free loopback ports
(clients, controller); ``stop()`` shuts it down and deletes the directory. Needs Java 17+ and Maven.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from subroute.dev import jars as dev_jars
from subroute.dev.process import BrokerNotAvailable, LocalBroker, free_port

# Every setting that differs from a production broker, in one place. One node, so every internal topic has one
# replica; the rest trade durability or politeness for test speed.
TEST_SETTINGS: dict[str, str] = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    # Fewer internal partitions: created on first use, 50 each by default.
    "offsets.topic.num.partitions": "10",
    "transaction.state.log.num.partitions": "10",
    # A group's first rebalance completes at once instead of waiting 3 s for more members.
    "group.initial.rebalance.delay.ms": "0",
    # Tests use sessions of 1-6 s so that a killed member is expelled quickly (the default floor is 6 s).
    "group.min.session.timeout.ms": "1000",
    # A killed transactional producer's open transaction is aborted within a second of its timeout, not ten.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    # Kafka's default, stated: topics are created on first produce or metadata request for them.
    "auto.create.topics.enable": "true",
    # Time retention (7 days, Kafka's default) deletes records by their timestamps, not their age in the log: a
    # record produced with a timestamp older than that is gone at the next check. Checked every second from a
    # second after start (not every 5 minutes from 30 s), so a test that writes such records fails every run,
    # not once in a while.
    "log.initial.task.delay.ms": "1000",
    "log.retention.check.interval.ms": "1000",
}

JVM_OPTIONS = [
    "-Xms256m",
    "-Xmx1g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-Djava.awt.headless=true",
]

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = org.apache.kafka
logger.kafka.level = WARN
logger.server.name = kafka
logger.server.level = INFO
"""


def server_properties(port: int, controller_port: int, advertised_port: int, data: Path) -> dict[str, str]:
    """The whole server configuration of a one-node cluster on 127.0.0.1."""
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{advertised_port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data),
        **TEST_SETTINGS,
    }


def new_cluster_id() -> str:
    """A KRaft cluster id: a random UUID in URL-safe base64. One in 64 such strings starts with ``-``, which the
    storage tool's argument parser takes for an option, so those are drawn again (as Kafka's own Uuid does)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaBroker(LocalBroker):
    engine = "kafka"

    def __init__(self, port: int | None = None, advertised_port: int | None = None) -> None:
        super().__init__(port, advertised_port)
        self.controller_port = free_port()
        self.directory: Path | None = None

    @property
    def log_path(self) -> Path | None:
        return self.directory / "server.log" if self.directory else None

    def _prepare(self) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise BrokerNotAvailable("the Apache Kafka engine needs Java 17+ on PATH (or use --engine tansu)")
        try:
            classpath = f"{dev_jars.resolve('kafka')}/*"
        except dev_jars.JarsNotAvailable as exc:
            raise BrokerNotAvailable(str(exc)) from exc
        self.directory = Path(tempfile.mkdtemp(prefix="subroute-kafka-"))
        settings = server_properties(
            self.port, self.controller_port, self.advertised_port, self.directory / "data"
        )
        config = self.directory / "server.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        log4j = self.directory / "log4j2.properties"
        log4j.write_text(_LOG4J2.format(log=self.directory / "server.log"))
        java_command = [java, *JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath]
        formatted = subprocess.run(
            [
                *java_command,
                "kafka.tools.StorageTool",
                "format",
                f"--cluster-id={new_cluster_id()}",
                "-c",
                str(config),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if formatted.returncode != 0:
            self._cleanup()
            raise BrokerNotAvailable(
                f"formatting the KRaft log directory failed: {formatted.stderr.strip()[-500:]}"
            )
        return [*java_command, "kafka.Kafka", str(config)]

    def _cleanup(self) -> None:
        directory, self.directory = self.directory, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
