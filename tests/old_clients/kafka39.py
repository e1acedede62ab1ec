"""Apache Kafka 3.9 as one broker: the reference for the request versions Kafka 4.0 removed.

Kafka 3.9 is the last release that serves them (Fetch v0-3, ListOffsets v0, OffsetCommit
v0-1, ...), so the old-version tests compare Trafka's answers with its answers.

- `Kafka39KRaftBroker`: one KRaft node in combined mode (controller + broker), the
  counterpart of a single Trafka broker (no ZooKeeper);
- `Kafka39ZkBroker`: one broker in ZooKeeper mode on a real ZooKeeper, the counterpart of a
  Trafka broker with zookeeper.connect set (the only place OffsetCommit/OffsetFetch v0 store
  anything: ZooKeeper's /consumers znodes).

Both come from the jars of the `kafka-3.9` module of .ci/jvm/pom.xml (compat_tests/jvm.py)
and use the JVM plumbing of compat_tests/kafka_brokers.py (bounded heap, stopped by PID).
"""

from __future__ import annotations

from pathlib import Path

from compat_tests import kafka_brokers
from compat_tests.brokers import BrokerFailed, BrokerUnavailable, ProcessBroker, free_port

SETTINGS = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
}


class Kafka39KRaftBroker(kafka_brokers.KafkaBroker):
    """Kafka 3.9.2, one KRaft node in combined mode on 127.0.0.1:PORT."""

    module = "kafka-3.9"

    def __init__(self, workdir: Path, extra_settings: dict[str, str] | None = None,
                 name: str = "kafka-3.9", advertise: str | None = None, port: int | None = None) -> None:
        super().__init__(workdir, {**SETTINGS, **(extra_settings or {})}, name=name, advertise=advertise)
        if port is not None:  # a fixed port (inside a network namespace of its own)
            self.port = port
            self.settings["listeners"] = f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{self.controller_port}"
            self.settings["advertised.listeners"] = f"PLAINTEXT://{advertise or self.bootstrap}"
        # Kafka 3.9 has no share coordinator settings; leaving them would only log warnings.
        for key in [k for k in self.settings if k.startswith("share.coordinator.")]:
            del self.settings[key]

    def logging_flags(self) -> list[str]:
        path = self.workdir / "log4j.properties"
        path.write_text(kafka_brokers.LOG4J1.format(level=self.log_level))
        return [f"-Dlog4j.configuration=file:{path}"]


class Kafka39ZkBroker(ProcessBroker):
    """Kafka 3.9.2 in ZooKeeper mode: one real ZooKeeper and one broker (node id 1)."""

    def __init__(self, workdir: Path, extra_settings: dict[str, str] | None = None,
                 name: str = "kafka-3.9-zk") -> None:
        from cli.zookeeper_server import ZooKeeperServer

        reason = ZooKeeperServer.unavailable_reason()
        if reason:
            raise BrokerUnavailable(f"no ZooKeeper for {name}: {reason}")
        super().__init__(name, workdir)
        (workdir / "zookeeper").mkdir(parents=True, exist_ok=True)
        self.zk = ZooKeeperServer(data_dir=workdir / "zookeeper")
        self.zk_connect = f"{self.zk.connect_string}/kafka39"
        self.broker = kafka_brokers.Kafka39ZkBroker(workdir / "broker", 1, self.zk_connect,
                                                    {**SETTINGS, **(extra_settings or {})}, name)
        self.port = self.broker.port

    def start(self) -> None:
        if not self.zk.running:
            try:
                self.zk.start()
            except RuntimeError as exc:
                raise BrokerFailed(f"ZooKeeper did not start: {exc}") from exc
        self.broker.start()

    def stop(self) -> None:
        self.broker.stop()
        self.zk.stop()

    def alive(self) -> bool:
        return self.zk.running and self.broker.alive()

    def log_tail(self, lines: int = 40) -> str:
        return self.broker.log_tail(lines)


__all__ = ["Kafka39KRaftBroker", "Kafka39ZkBroker", "free_port"]
