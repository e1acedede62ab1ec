"""Topic configs in a cluster live in ZooKeeper: an alter on any broker is written to
/config/topics/<t> with a change notice, every broker hosting the topic applies it, and a
broker without a replica describes the topic from ZooKeeper."""

from __future__ import annotations

import confluent_kafka as ck
import pytest

from tests.cluster.clusterkit import Cluster
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(180)

TOPIC = 2  # ConfigResource.Type
DYNAMIC_TOPIC_CONFIG = 1


def describe(cluster: Cluster, node: int, topic: str, keys: list[str]) -> dict[str, tuple[str, int]]:
    body = {"resources": [{"resource_type": TOPIC, "resource_name": topic, "configuration_keys": keys}],
            "include_synonyms": False, "include_documentation": False}
    result = cluster.call(ApiKey.DESCRIBE_CONFIGS, 4, body, node)["results"][0]
    assert result["error_code"] == 0, result
    return {c["name"]: (c["value"], c["config_source"]) for c in result["configs"]}


def incremental_set(cluster: Cluster, node: int, topic: str, configs: dict[str, str]) -> dict:
    body = {"resources": [{"resource_type": TOPIC, "resource_name": topic,
                           "configs": [{"name": k, "config_operation": 0, "value": v} for k, v in configs.items()]}],
            "validate_only": False}
    return cluster.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body, node)["responses"][0]


def segments(cluster: Cluster, node: int, topic: str, index: int) -> int:
    return len(list((cluster.brokers[node].data_dir / f"{topic}-{index}").glob("*.log")))


def test_alter_on_one_broker_is_seen_and_applied_everywhere(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 3, "--set", "log.retention.check.interval.ms=300") as cluster:
        assert cluster.create_topic("logs", 1, 2, {"segment.bytes": "2000"})["error_code"] == 0
        info = cluster.wait_for(lambda: (lambda p: p if p and len(p["isr_nodes"]) == 2 else None)(
            cluster.partition("logs", 0)), 20, "a full ISR")
        hosts = sorted(info["replica_nodes"])
        outsider = next(n for n in (1, 2, 3) if n not in hosts)

        # IncrementalAlterConfigs on a broker that hosts no replica: ZooKeeper has the topic
        altered = incremental_set(cluster, outsider, "logs", {"max.message.bytes": "300000"})
        assert altered["error_code"] == 0, altered
        for node in (1, 2, 3):
            cluster.wait_for(lambda: describe(cluster, node, "logs", ["max.message.bytes"])["max.message.bytes"]
                             == ("300000", DYNAMIC_TOPIC_CONFIG), 10, f"broker {node} sees max.message.bytes")
        # the creation's segment.bytes is still there (an incremental change keeps the rest)
        assert describe(cluster, outsider, "logs", ["segment.bytes"])["segment.bytes"] == ("2000", DYNAMIC_TOPIC_CONFIG)

        # data in many small segments on both replicas
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0,
                                "batch.num.messages": 1})
        for i in range(120):
            producer.produce("logs", value=b"x" * 100 + b"%d" % i)
            producer.poll(0)
        assert producer.flush(30) == 0
        for node in hosts:
            cluster.wait_for(lambda: segments(cluster, node, "logs", 0) >= 4, 20, f"segments on broker {node}")

        # AlterConfigs (the whole set) on broker 1: retention shortened, applied on every replica
        body = {"resources": [{"resource_type": TOPIC, "resource_name": "logs",
                               "configs": [{"name": "segment.bytes", "value": "2000"},
                                           {"name": "retention.bytes", "value": "2000"}]}],
                "validate_only": False}
        response = cluster.call(ApiKey.ALTER_CONFIGS, 2, body, 1)["responses"][0]
        assert response["error_code"] == 0, response
        for node in hosts:
            cluster.wait_for(lambda: segments(cluster, node, "logs", 0) <= 2, 20,
                             f"retention applied on broker {node}")
        for node in (1, 2, 3):
            got = describe(cluster, node, "logs", ["retention.bytes", "max.message.bytes"])
            assert got["retention.bytes"] == ("2000", DYNAMIC_TOPIC_CONFIG), (node, got)
            assert got["max.message.bytes"][1] != DYNAMIC_TOPIC_CONFIG, (node, got)  # AlterConfigs replaced the set

        # an unknown topic is unknown on every broker; validate_only writes nothing
        missing = incremental_set(cluster, outsider, "nope", {"retention.ms": "1000"})
        assert missing["error_code"] == 3, missing  # UNKNOWN_TOPIC_OR_PARTITION
        body["resources"][0]["configs"] = [{"name": "retention.ms", "value": "12345"}]
        body["validate_only"] = True
        assert cluster.call(ApiKey.ALTER_CONFIGS, 2, body, outsider)["responses"][0]["error_code"] == 0
        assert describe(cluster, outsider, "logs", ["retention.ms"])["retention.ms"][1] != DYNAMIC_TOPIC_CONFIG
        bad = incremental_set(cluster, outsider, "logs", {"retention.ms": "soon"})
        assert bad["error_code"] == 40, bad  # INVALID_CONFIG


def test_a_broker_down_during_an_alter_catches_up(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 3) as cluster:
        assert cluster.create_topic("catch", 1, 3)["error_code"] == 0
        cluster.wait_for(lambda: (lambda p: p if p and len(p["isr_nodes"]) == 3 else None)(
            cluster.partition("catch", 0)), 20, "a full ISR")
        cluster.brokers[3].stop()
        assert incremental_set(cluster, 1, "catch", {"retention.ms": "7200000"})["error_code"] == 0
        cluster.brokers[3].start()
        cluster.wait_for(lambda: describe(cluster, 3, "catch", ["retention.ms"])["retention.ms"]
                         == ("7200000", DYNAMIC_TOPIC_CONFIG), 20, "broker 3 applies the change made while it was down")
