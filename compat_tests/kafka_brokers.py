"""Apache Kafka itself as a broker kind: the reference every scenario runs against.

- `kafka`: one Kafka 4.x node in KRaft combined mode (controller + broker), formatted with
  `kafka.tools.StorageTool format` and started as `kafka.Kafka server.properties` from the
  jars `.ci/jvm/pom.xml` resolves (compat_tests/jvm.py), with a bounded heap.
- `kafka-cluster`: three Kafka 3.9 brokers in ZooKeeper mode on one real ZooKeeper, the
  design Trafka's cluster shares (the same znodes, controller, ISR rules), so the cluster
  scenarios compare like with like. Kafka 4.x has no ZooKeeper mode.

Each runs with the suite's settings (brokers.SUITE_SETTINGS, as the Trafka brokers do) plus
what a one-node Kafka needs (internal topics at replication factor 1).

A JVM is stopped by its own PID (SIGTERM, SIGKILL after a timeout); a Kafka that does not
start fails with the tail of its log.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

from compat_tests import jvm, kafka_wire
from compat_tests.brokers import (REPO, SUITE_SETTINGS, BrokerFailed, BrokerUnavailable, ProcessBroker,
                                  ZooKeeperCluster, die_with_parent, free_port)

# Bounded heaps: the suite runs up to five of these JVMs beside Trafka and the clients.
HEAP = ["-Xms128m", "-Xmx768m"]
# Serial GC, no JIT tiers past C1: a test broker's CPU is the scarce thing on 2 cores, and
# it starts in half the time. The benchmarks run Kafka with its own defaults instead.
TEST_JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
                  "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true"]
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0

LOG4J2 = """\
Configuration:
  status: warn
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: {level}
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.request.logger
        level: warn
      - name: org.apache.kafka.controller
        level: warn
      - name: kafka.log.LogCleaner
        level: warn
"""

LOG4J1 = """\
log4j.rootLogger={level}, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.controller=INFO
log4j.logger.org.apache.zookeeper=WARN
"""

def properties(settings: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def parse_set_args(args: list[str] | None) -> dict[str, str]:
    """`--set k=v` pairs of a Trafka command line, as Kafka settings (other flags ignored)."""
    out: dict[str, str] = {}
    args = list(args or [])
    for i, arg in enumerate(args):
        if arg == "--set" and i + 1 < len(args) and "=" in args[i + 1]:
            key, _, value = args[i + 1].partition("=")
            out[key] = value
    return out


class JvmBroker(ProcessBroker):
    """A Kafka broker JVM from one of .ci/jvm's classpaths, configured by server.properties."""

    module = "kafka"
    jvm_flags = TEST_JVM_FLAGS
    heap = HEAP

    def __init__(self, name: str, workdir: Path, settings: dict[str, str],
                 log_level: str = "INFO") -> None:
        super().__init__(name, workdir)
        try:
            self.classpath = jvm.classpath_string(self.module)
            self.java = jvm.java()
        except jvm.JvmUnavailable as exc:
            if os.environ.get("CI"):
                raise BrokerFailed(f"{name}: {exc}") from exc
            raise BrokerUnavailable(f"{name}: {exc}") from exc
        self.settings = dict(settings)
        self.log_level = log_level
        self.config_path = workdir / "server.properties"

    def write_config(self) -> None:
        self.config_path.write_text(properties(self.settings))

    def logging_flags(self) -> list[str]:
        path = self.workdir / "log4j2.yaml"
        path.write_text(LOG4J2.format(level=self.log_level))
        return [f"-Dlog4j2.configurationFile={path}"]

    def argv(self) -> list[str]:
        return [self.java, *self.heap, *self.jvm_flags, *self.logging_flags(),
                f"-Dkafka.logs.dir={self.workdir}", "-cp", self.classpath, "kafka.Kafka",
                str(self.config_path)]

    def start(self) -> None:
        self.write_config()
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== start #{self.starts}: {' '.join(self.argv()[-2:])}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=REPO, env=self.env(),
                                         start_new_session=True, preexec_fn=die_with_parent)
        try:
            self.wait_ready(time.monotonic() + START_TIMEOUT_S)
        except (TimeoutError, ConnectionError, AssertionError) as exc:
            self.stop()
            raise BrokerFailed(f"{self.name} did not start: {exc}\n--- log tail ---\n"
                               f"{self.log_tail(60)}") from exc

    def wait_ready(self, deadline: float) -> None:
        kafka_wire.wait_until_serving(self.host, self.port, deadline, alive=self.alive)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_TIMEOUT_S)


class KafkaBroker(JvmBroker):
    """Apache Kafka 4.x, one KRaft node in combined mode, on 127.0.0.1:PORT (the `kafka` kind)."""

    def __init__(self, workdir: Path, extra_settings: dict[str, str] | None = None,
                 name: str = "kafka", advertise: str | None = None) -> None:
        self.controller_port = free_port()
        super().__init__(name, workdir, {})
        self.settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{advertise or self.bootstrap}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            **SUITE_SETTINGS,
            **(extra_settings or {}),
        }
        self.formatted = False

    def format(self) -> None:
        """`kafka-storage format` once per data dir: a fresh cluster id, the newest features."""
        if (self.data_dir / "meta.properties").exists():
            return
        self.write_config()
        cluster_id = kafka_cluster_id()
        with open(self.log_path, "ab") as log:
            result = subprocess.run(
                [self.java, "-Xmx256m", *TEST_JVM_FLAGS, *self.logging_flags(), "-cp", self.classpath,
                 "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.config_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, timeout=120)
        if result.returncode != 0:
            raise BrokerFailed(f"{self.name}: kafka-storage format failed ({result.returncode}):\n"
                               f"{self.log_tail()}")

    def start(self) -> None:
        self.format()
        super().start()

    def wait_ready(self, deadline: float) -> None:
        # ApiVersions answers before the broker has registered with its controller; a
        # Metadata listing this broker means topics can be created.
        super().wait_ready(deadline)
        while True:
            try:
                view = kafka_wire.metadata_v1(self.host, self.port, [])
                if view.brokers:
                    return
            except (OSError, kafka_wire.WireError):
                pass
            if not self.alive():
                raise ConnectionError("the Kafka process exited")
            if time.monotonic() > deadline:
                raise TimeoutError("no broker in Metadata")
            time.sleep(0.2)


def kafka_cluster_id() -> str:
    """A random cluster id as Kafka prints it (base64url of 16 bytes, no padding). Never one
    starting with "-", as Kafka's Uuid.randomUuid never makes: kafka-storage's argument
    parser takes `-t -xyz` for an option and the format fails (one start in 64)."""
    import base64

    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class Kafka39ZkBroker(JvmBroker):
    """Apache Kafka 3.9 in ZooKeeper mode: one broker of `kafka-cluster`."""

    module = "kafka-3.9"

    def __init__(self, workdir: Path, node_id: int, zk_connect: str, extra_settings: dict[str, str],
                 name: str) -> None:
        super().__init__(name, workdir, {})
        self.settings = {
            "broker.id": str(node_id),
            "zookeeper.connect": zk_connect,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "advertised.listeners": f"PLAINTEXT://{self.bootstrap}",
            "log.dirs": str(self.data_dir),
            **SUITE_SETTINGS,
            **extra_settings,
        }
        # Kafka 3.9 in ZooKeeper mode has no KIP-848 (group.consumer.*) settings to take.
        for key in [k for k in self.settings if k.startswith("group.consumer.")]:
            del self.settings[key]

    def logging_flags(self) -> list[str]:
        path = self.workdir / "log4j.properties"
        path.write_text(LOG4J1.format(level=self.log_level))
        return [f"-Dlog4j.configuration=file:{path}"]


class KafkaZkCluster(ZooKeeperCluster):
    """Three Kafka 3.9 brokers on one real ZooKeeper (the `kafka-cluster` kind): the cluster
    scenarios' reference, with the same settings and fast failure detection as
    `trafka-cluster`."""

    def make_node(self, node: int, workdir: Path, settings: list[str]) -> ProcessBroker:
        return Kafka39ZkBroker(workdir, node, self.zk_connect, parse_set_args(settings),
                               name=f"{self.name}-{node}")
