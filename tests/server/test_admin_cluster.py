"""DescribeCluster and DescribeLogDirs against a real broker process.

kafka-python's KafkaAdminClient (both APIs) and confluent-kafka's AdminClient
(describe_cluster; it has no describe_log_dirs) over loopback, plus raw requests (built
with wire/) for every served version, topics=null, and endpoint types. Partition sizes
are checked against the segment files on disk.
"""

from __future__ import annotations

import os
import uuid

import pytest

from tests.brokerproc import raw_request
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient

from compat_tests.brokers import TrafkaBroker

pytestmark = pytest.mark.timeout(120)

NODE_ID = 7
CLUSTER_ID = "trafka-admin-test-cluster"
NONE, MISMATCHED_ENDPOINT_TYPE, UNSUPPORTED_ENDPOINT_TYPE = 0, 114, 115
DESCRIBE_LOG_DIRS, DESCRIBE_CLUSTER = 35, 60
NOT_REQUESTED = -2147483648



@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    TrafkaBroker.check_available()
    b = TrafkaBroker(tmp_path_factory.mktemp("admin-cluster"),
                     extra_args=["--node-id", str(NODE_ID), "--cluster-id", CLUSTER_ID])
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def kp(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="admin-cluster-kp",
                              request_timeout_ms=10000)
    yield client
    client.close()


@pytest.fixture(scope="module")
def ck(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap, "client.id": "admin-cluster-ck"})


def raw(broker, api_key: int, version: int, body: dict) -> dict:
    return raw_request(broker.host, broker.port, api_key, version, body, client_id="admin-cluster-raw")


def new_topic(ck, partitions: int) -> str:
    name = f"dir-{uuid.uuid4().hex[:10]}"
    ck.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=15)
    return name


def produce(broker, name: str, partition: int, count: int, size: int = 100) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(name, value=bytes(size), partition=partition)
        producer.poll(0)
    assert producer.flush(15) == 0


def segment_bytes(broker, name: str, partition: int) -> int:
    return sum(p.stat().st_size for p in (broker.data_dir / f"{name}-{partition}").glob("*.log"))


# ------------------------------------------------------------------ DescribeCluster


def test_describe_cluster_kafka_python(broker, kp):
    got = kp.describe_cluster()
    assert got["cluster_id"] == CLUSTER_ID
    assert got["controller_id"] == NODE_ID
    assert [(b["broker_id"], b["host"], b["port"]) for b in got["brokers"]] == [(NODE_ID, "127.0.0.1", broker.port)]


def test_describe_cluster_confluent(broker, ck):
    result = ck.describe_cluster(include_authorized_operations=True).result(timeout=15)
    assert result.cluster_id == CLUSTER_ID
    assert result.controller.id == NODE_ID
    assert [(n.id, n.host, n.port) for n in result.nodes] == [(NODE_ID, "127.0.0.1", broker.port)]
    # the operations Kafka has for a CLUSTER resource (AclEntry.supportedOperations), as
    # librdkafka's 0081 DescribeCluster test expects them; WRITE is not one of them
    assert sorted(op.name for op in result.authorized_operations) == sorted(
        ["ALTER", "ALTER_CONFIGS", "CLUSTER_ACTION", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE"])
    plain = ck.describe_cluster().result(timeout=15)
    assert not plain.authorized_operations


def test_describe_cluster_raw(broker):
    for version in (0, 1):
        body = raw(broker, DESCRIBE_CLUSTER, version, {"include_cluster_authorized_operations": False,
                                                       "endpoint_type": 1})
        assert body["error_code"] == NONE
        assert body["cluster_id"] == CLUSTER_ID and body["controller_id"] == NODE_ID
        assert body["cluster_authorized_operations"] == NOT_REQUESTED
        assert body["brokers"] == [{"broker_id": NODE_ID, "host": "127.0.0.1", "port": broker.port, "rack": None}]
        if version == 1:
            assert body["endpoint_type"] == 1
    asked = raw(broker, DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1})
    assert asked["cluster_authorized_operations"] > 0
    controllers = raw(broker, DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False,
                                                     "endpoint_type": 2})
    assert controllers["error_code"] == MISMATCHED_ENDPOINT_TYPE and controllers["brokers"] == []
    unknown = raw(broker, DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 9})
    assert unknown["error_code"] == UNSUPPORTED_ENDPOINT_TYPE


# ------------------------------------------------------------------ DescribeLogDirs


def test_describe_log_dirs_kafka_python(broker, kp, ck):
    name = new_topic(ck, 2)
    produce(broker, name, 0, 20)
    [answer] = kp.describe_log_dirs({name: [0, 1]})
    assert answer["broker"] == NODE_ID
    [log_dir] = answer["log_dirs"]
    assert log_dir["error_code"] == NONE
    assert log_dir["log_dir"] == str(broker.data_dir.resolve())
    [topic] = log_dir["topics"]
    sizes = {p["partition_index"]: p for p in topic["partitions"]}
    assert sizes[0]["partition_size"] == segment_bytes(broker, name, 0) > 20 * 100
    assert sizes[1]["partition_size"] == 0
    assert sizes[0]["offset_lag"] == 0 and sizes[0]["is_future_key"] is False
    statvfs = os.statvfs(broker.data_dir)
    assert log_dir["total_bytes"] == statvfs.f_blocks * statvfs.f_frsize
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    # all topics (kafka-python lists them through Metadata first)
    [everything] = kp.describe_log_dirs()
    names = {t["name"] for t in everything["log_dirs"][0]["topics"]}
    assert name in names


def test_describe_log_dirs_raw(broker, ck):
    name = new_topic(ck, 3)
    produce(broker, name, 1, 5)
    for version in (1, 2, 3, 4):
        body = raw(broker, DESCRIBE_LOG_DIRS, version, {"topics": None})
        [result] = body["results"]
        assert result["log_dir"] == str(broker.data_dir.resolve())
        by_name = {t["name"]: t for t in result["topics"]}
        assert sorted(p["partition_index"] for p in by_name[name]["partitions"]) == [0, 1, 2]
        if version >= 3:
            assert body["error_code"] == NONE
        if version >= 4:
            assert result["total_bytes"] > 0 and result["usable_bytes"] > 0
    # only what was asked for and exists: unknown topics and partitions are left out
    body = raw(broker, DESCRIBE_LOG_DIRS, 4, {"topics": [{"topic": name, "partitions": [1, 9]},
                                                         {"topic": "no-such-topic-ld", "partitions": [0]}]})
    [result] = body["results"]
    assert result["topics"] == [{"name": name, "partitions": [
        {"partition_index": 1, "partition_size": segment_bytes(broker, name, 1), "offset_lag": 0,
         "is_future_key": False}]}]
    body = raw(broker, DESCRIBE_LOG_DIRS, 4, {"topics": []})
    assert body["results"][0]["topics"] == []
