"""Every broker kind the suite runs, by the name `--broker` takes: the factory over
brokers.py (Trafka, Tansu, external, proxied, the Trafka cluster) and kafka_brokers.py
(Apache Kafka, built on brokers.py's process plumbing), so that neither of those imports
the other's users.
"""

from __future__ import annotations

from pathlib import Path

from compat_tests.brokers import (Broker, ExternalBroker, ProxiedBroker, TansuBroker, TrafkaBroker,
                                  TrafkaCluster)
from compat_tests.kafka_brokers import KafkaBroker, KafkaZkCluster

# The broker kinds `--broker` accepts. "lossy"/"tagfix" kinds are diagnostics, never defaults.
# "trafka-cluster" is three Trafka brokers on a real ZooKeeper; the cluster scenarios
# (test_cluster.py) choose it themselves (conftest's `broker_kinds` marker).
KNOWN_KINDS = ("kafka", "trafka", "tansu", "external", "tansu-lossy", "trafka-lossy", "tansu-tagfix",
               "kafka-cluster", "trafka-cluster")


def make_broker(kind: str, workdir: Path, trafka_args: list[str] | None = None) -> Broker:
    """A not-yet-started broker of `kind`; raises BrokerUnavailable when it cannot run here."""
    if kind == "trafka":
        TrafkaBroker.check_available()
        return TrafkaBroker(workdir, trafka_args)
    if kind == "tansu":
        return TansuBroker(workdir)
    if kind == "external":
        return ExternalBroker()
    if kind in ("tansu-lossy", "trafka-lossy"):
        return ProxiedBroker(kind, kind.split("-")[0], "drop-produce", workdir, trafka_args)
    if kind == "trafka-cluster":
        return TrafkaCluster(workdir, trafka_args)
    if kind == "kafka":
        return KafkaBroker(workdir)
    if kind == "kafka-cluster":
        return KafkaZkCluster(workdir, name="kafka-cluster")
    if kind == "tansu-tagfix":
        return ProxiedBroker(kind, "tansu", "strip-apiversions-tags", workdir)
    raise ValueError(f"unknown broker kind {kind!r}; known: {', '.join(KNOWN_KINDS)}")
