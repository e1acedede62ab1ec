"""Dynamic broker configs (KIP-226) in a 3-broker cluster with a real ZooKeeper, driven by
confluent-kafka's AdminClient: per-broker (`/config/brokers/<id>`) and cluster-default
(`/config/brokers/<default>`) overrides are stored as Kafka's ZooKeeper mode stores them,
applied by every broker without a restart (retention of topics without an override,
max.message.bytes of produces), kept by a broker restarted later, and reported with their
sources and synonyms by DescribeConfigs."""

from __future__ import annotations

import json

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource)
from kazoo.client import KazooClient

from tests.cluster.clusterkit import Cluster
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(180)

BROKER = ConfigResource.Type.BROKER
TOPIC = ConfigResource.Type.TOPIC
SET, DELETE, APPEND = AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND
INVALID_CONFIG, INVALID_REQUEST = 40, 42


def zk_read(zk_connect: str, path: str) -> dict | None:
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    try:
        if not client.exists(path):
            return None
        if path.endswith("/changes"):
            return {c: json.loads(client.get(f"{path}/{c}")[0]) for c in client.get_children(path)}
        return json.loads(client.get(path)[0])
    finally:
        client.stop()
        client.close()


def admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": 20000})


def alter(client: AdminClient, resource_type, name: str, ops: list[tuple[str, object, str | None]],
          validate_only: bool = False):
    """IncrementalAlterConfigs of one resource; None on success, else the KafkaError."""
    resource = ConfigResource(resource_type, name, incremental_configs=[
        ConfigEntry(n, v, incremental_operation=op) for n, op, v in ops])
    future = client.incremental_alter_configs([resource], validate_only=validate_only)[resource]
    try:
        future.result(timeout=30)
        return None
    except ck.KafkaException as exc:
        return exc.args[0]


def alter_default(cluster: Cluster, ops: list[tuple[str, object, str | None]], node: int = 1,
                  validate_only: bool = False) -> tuple[int, str | None]:
    """IncrementalAlterConfigs of the cluster default (resource name ""), which
    confluent-kafka cannot name (librdkafka refuses an empty resource name): raw v1."""
    body = {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
        {"name": n, "config_operation": int(op.value), "value": v} for n, op, v in ops]}],
        "validate_only": validate_only}
    response = cluster.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body, node)["responses"][0]
    return response["error_code"], response["error_message"]


def synonyms(cluster: Cluster, node: int, resource_type: int, name: str, key: str) -> list[tuple[str, str, int]]:
    """The synonym chain of one config, raw: confluent-kafka keeps synonyms in a dict by
    name, so a chain of one name's values (per-broker, default, static) collapses there."""
    body = {"resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": [key]}],
            "include_synonyms": True, "include_documentation": False}
    result = cluster.call(ApiKey.DESCRIBE_CONFIGS, 4, body, node)["results"][0]
    assert result["error_code"] == 0, result
    return [(s["name"], s["value"], s["source"]) for s in result["configs"][0]["synonyms"]]


def described(cluster: Cluster, node: int, resource_type: int, name: str, key: str) -> tuple[str, int]:
    """(value, source) of one config as broker `node` itself describes it (raw: the
    AdminClient picks the broker it asks)."""
    body = {"resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": [key]}],
            "include_synonyms": False, "include_documentation": False}
    result = cluster.call(ApiKey.DESCRIBE_CONFIGS, 4, body, node)["results"][0]
    assert result["error_code"] == 0, result
    return result["configs"][0]["value"], result["configs"][0]["config_source"]


def describe_default(cluster: Cluster, node: int = 1) -> dict[str, tuple[str, int]]:
    body = {"resources": [{"resource_type": 4, "resource_name": "", "configuration_keys": None}],
            "include_synonyms": True, "include_documentation": False}
    result = cluster.call(ApiKey.DESCRIBE_CONFIGS, 4, body, node)["results"][0]
    assert result["error_code"] == 0, result
    return {c["name"]: (c["value"], c["config_source"]) for c in result["configs"]}


def describe(client: AdminClient, resource_type, name: str) -> dict:
    """DescribeConfigs of one resource (librdkafka always asks for the synonyms)."""
    resource = ConfigResource(resource_type, name)
    return client.describe_configs([resource], request_timeout=30)[resource].result(timeout=30)


def segments(cluster: Cluster, node: int, topic: str) -> int:
    return len(list((cluster.brokers[node].data_dir / f"{topic}-0").glob("*.log")))


def full_isr(cluster: Cluster, topic: str, size: int) -> dict:
    return cluster.wait_for(lambda: (lambda p: p if p and len(p["isr_nodes"]) == size else None)(
        cluster.partition(topic, 0)), 30, f"a full ISR of {topic}")


def produce(cluster: Cluster, topic: str, values: list[bytes]) -> list:
    """acks=all produces; the delivery errors (None for a delivered record)."""
    errors: list = []
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0,
                            "batch.num.messages": 1, "message.timeout.ms": 30000})
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda err, _msg: errors.append(err))
        producer.poll(0)
    assert producer.flush(40) == 0
    return errors


def test_cluster_default_applies_to_every_broker_and_survives_a_restart(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 3, "--set", "log.retention.check.interval.ms=300") as cluster:
        client = admin(cluster)
        # small segments (a topic override) but no retention override: retention follows the brokers
        assert cluster.create_topic("aged", 1, 3, {"segment.bytes": "2000"})["error_code"] == 0
        assert cluster.create_topic("kept", 1, 3, {"segment.bytes": "2000", "retention.ms": "86400000"})[
            "error_code"] == 0
        full_isr(cluster, "aged", 3)
        full_isr(cluster, "kept", 3)
        for topic in ("aged", "kept"):
            assert produce(cluster, topic, [b"x" * 100 + b"%d" % i for i in range(100)]) == [None] * 100
        for node in (1, 2, 3):
            cluster.wait_for(lambda: segments(cluster, node, "aged") >= 4, 30, f"segments on broker {node}")
        before = {node: segments(cluster, node, "kept") for node in (1, 2, 3)}

        # the cluster-wide default: one request, to any broker
        assert alter_default(cluster, [("log.retention.ms", SET, "1000"), ("message.max.bytes", SET, "3000")],
                             node=3) == (0, None)
        stored = zk_read(zk_connect, "/config/brokers/<default>")
        assert stored == {"version": 1, "config": {"log.retention.ms": "1000", "message.max.bytes": "3000"}}
        notices = zk_read(zk_connect, "/config/changes")
        assert {"version": 2, "entity_path": "brokers/<default>"} in notices.values()

        # every replica deletes the old segments of the topic without an override ...
        for node in (1, 2, 3):
            cluster.wait_for(lambda: segments(cluster, node, "aged") <= 2, 30, f"retention on broker {node}")
        assert cluster.list_offset("aged", -2, cluster.partition("aged", 0)["leader_id"]) > 0
        # ... and keeps those of the topic with its own retention.ms
        assert {node: segments(cluster, node, "kept") for node in (1, 2, 3)} == before

        # the topic's effective config, as every broker describes it
        for node in (1, 2, 3):
            cluster.wait_for(lambda: described(cluster, node, 2, "aged", "retention.ms") == (
                "1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value), 20, f"broker {node} describes the default")
            assert synonyms(cluster, node, 2, "aged", "retention.ms") == [
                ("log.retention.ms", "1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
                ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG.value)]  # Kafka 4.4
            assert described(cluster, node, 2, "aged", "max.message.bytes")[0] == "3000"
            assert described(cluster, node, 2, "kept", "retention.ms") == (
                "86400000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        assert describe(client, TOPIC, "aged")["retention.ms"].value == "1000"  # and to the AdminClient

        # message.max.bytes: a larger batch is refused by the leader, a small one accepted
        errors = produce(cluster, "aged", [b"y" * 5000, b"small"])
        assert errors[0] is not None and errors[0].code() == ck.KafkaError.MSG_SIZE_TOO_LARGE, errors
        assert errors[1] is None

        # a broker restarted later reads the defaults from ZooKeeper before it serves
        cluster.brokers[2].stop()
        cluster.brokers[2].start()
        cluster.wait_for(lambda: len(cluster.metadata()["brokers"]) == 3, 30, "broker 2 back")
        configs = describe(client, BROKER, "2")
        assert (configs["message.max.bytes"].value, configs["message.max.bytes"].source) == (
            "3000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        assert described(cluster, 2, 2, "aged", "max.message.bytes")[0] == "3000"

        # deleting the default brings the static/built-in value back everywhere
        assert alter_default(cluster, [("message.max.bytes", DELETE, None)]) == (0, None)
        for node in (1, 2, 3):
            cluster.wait_for(lambda: described(cluster, node, 2, "aged", "max.message.bytes")[0] == "1048588", 20,
                             f"broker {node} back to the built-in message.max.bytes")
        assert produce(cluster, "aged", [b"y" * 5000]) == [None]


def test_per_broker_overrides_sources_and_errors(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 3, "--set", "log.segment.bytes=50000000") as cluster:
        client = admin(cluster)
        assert alter_default(cluster, [("log.retention.ms", SET, "3600000"), ("num.replica.fetchers", SET, "2")],
                             node=2) == (0, None)
        assert alter(client, BROKER, "1", [("log.retention.ms", SET, "7200000")]) is None  # routed to broker 1
        assert zk_read(zk_connect, "/config/brokers/1") == {"version": 1, "config": {"log.retention.ms": "7200000"}}
        notices = zk_read(zk_connect, "/config/changes")
        assert {"version": 2, "entity_path": "brokers/1"} in notices.values()

        one = describe(client, BROKER, "1")
        entry = one["log.retention.ms"]
        assert (entry.value, entry.source, entry.is_read_only) == (
            "7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
        assert [(v, src) for _, v, src in synonyms(cluster, 1, 4, "1", "log.retention.ms")] == [
            ("7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
            ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
            ("168", ConfigSource.DEFAULT_CONFIG.value)]  # log.retention.hours (Kafka 4.4)
        assert (one["log.segment.bytes"].value, one["log.segment.bytes"].source) == (
            "50000000", ConfigSource.STATIC_BROKER_CONFIG.value)
        # A replication quota is a dynamic-only config in Kafka (no built-in synonym after it)
        assert alter(client, BROKER, "1", [("leader.replication.throttled.rate", SET, "7000000")]) is None
        assert cluster.wait_for(lambda: synonyms(cluster, 1, 4, "1", "leader.replication.throttled.rate"), 20,
                                "the rate described") == [
            ("leader.replication.throttled.rate", "7000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)]
        assert alter(client, BROKER, "1", [("leader.replication.throttled.rate", DELETE, None)]) is None
        assert one["broker.id"].is_read_only and one["zookeeper.connect"].is_read_only
        assert one["num.replica.fetchers"].value == "2"
        cluster.wait_for(lambda: describe(client, BROKER, "3")["log.retention.ms"].value == "3600000", 20,
                         "broker 3 follows the default")
        assert describe(client, BROKER, "3")["log.retention.ms"].source == \
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        assert describe_default(cluster, 3) == {
            "log.retention.ms": ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
            "num.replica.fetchers": ("2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)}

        # a topic created now inherits broker 1's own value there, the default elsewhere
        assert cluster.create_topic("fresh", 1, 3)["error_code"] == 0
        full_isr(cluster, "fresh", 3)
        assert described(cluster, 1, 2, "fresh", "retention.ms") == (
            "7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        assert described(cluster, 2, 2, "fresh", "retention.ms") == (
            "3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)

        # errors, with Kafka's codes and messages
        error = alter(client, BROKER, "1", [("broker.id", SET, "9")])
        assert error.code() == INVALID_REQUEST
        assert "Cannot update these configs dynamically: Set(broker.id)" in error.str()
        assert alter_default(cluster, [("log.dirs", SET, "/tmp/x")]) == (
            INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.dirs)")
        # a name the broker does not know is a custom config, kept as Kafka keeps it
        # (described read-only, its value hidden), and deleted again
        assert alter_default(cluster, [("no.such.config", SET, "1")]) == (0, None)
        assert describe_default(cluster)["no.such.config"] == (None, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        assert alter_default(cluster, [("no.such.config", DELETE, None)]) == (0, None)
        assert alter_default(cluster, [("no.such.config", APPEND, "1")]) == (
            INVALID_CONFIG, "Unknown config name: no.such.config")
        assert alter_default(cluster, [("log.retention.ms", SET, "soon")])[0] == INVALID_REQUEST
        assert alter_default(cluster, [("num.replica.fetchers", SET, "9")])[0] == INVALID_REQUEST
        assert alter(client, BROKER, "2", [("zookeeper.connect", SET, "elsewhere:2181")]).code() == INVALID_REQUEST
        body = {"resources": [{"resource_type": 4, "resource_name": "2", "configs": [
            {"name": "log.retention.ms", "config_operation": 0, "value": "1"}]}], "validate_only": False}
        wrong = cluster.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body, 1)["responses"][0]
        assert wrong["error_code"] == INVALID_REQUEST, wrong  # broker 2's config, sent to broker 1

        # validate_only changes nothing
        assert alter(client, BROKER, "1", [("log.retention.ms", SET, "1000")], validate_only=True) is None
        assert describe(client, BROKER, "1")["log.retention.ms"].value == "7200000"
        assert zk_read(zk_connect, "/config/brokers/1")["config"] == {"log.retention.ms": "7200000"}

        # DELETE of the per-broker value: broker 1 falls back to the cluster default
        assert alter(client, BROKER, "1", [("log.retention.ms", DELETE, None)]) is None
        entry = describe(client, BROKER, "1")["log.retention.ms"]
        assert (entry.value, entry.source) == ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)

        # legacy AlterConfigs replaces the default's whole set
        body = {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
            {"name": "log.retention.ms", "value": "1800000"}]}], "validate_only": False}
        assert cluster.call(ApiKey.ALTER_CONFIGS, 2, body, 2)["responses"][0]["error_code"] == 0
        assert zk_read(zk_connect, "/config/brokers/<default>")["config"] == {"log.retention.ms": "1800000"}
        for node in (1, 2, 3):
            cluster.wait_for(lambda: describe(client, BROKER, str(node))["num.replica.fetchers"].value == "1", 20,
                             f"broker {node} drops the default num.replica.fetchers")


def test_enabling_unclean_election_as_cluster_default_elects_offline_partitions(tmp_path, zk_connect):
    """unclean.leader.election.enable turned on for all brokers: the controller re-runs the
    elections of offline partitions at once (Kafka's controller does on this change)."""
    from tests.cluster.test_cluster_unclean_election import assert_offline, stale_follower_alone, zk_state

    with Cluster(tmp_path, zk_connect, 3) as cluster:
        leader, follower, _before, _after = stale_follower_alone(cluster, "later", {})
        epoch = zk_state(zk_connect, "later")["leader_epoch"]
        assert_offline(cluster, zk_connect, "later", 3)
        assert alter_default(cluster, [("unclean.leader.election.enable", SET, "true")], node=follower) == (0, None)
        cluster.wait_for(lambda: cluster.partition("later", 0, follower)["leader_id"] == follower, 20,
                         "the stale follower elected after the broker default changed")
        state = zk_state(zk_connect, "later")
        assert state["isr"] == [follower] and state["leader_epoch"] > epoch
        assert state["leader_recovery_state"] == 1  # RECOVERING (KIP-704)
