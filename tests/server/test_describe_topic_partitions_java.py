"""The stock Java Admin (kafka-clients 3.9.2) describes topics with DescribeTopicPartitions
(75) now that Trafka advertises it, and pages with the cursor when a topic has more
partitions than DescribeTopicsOptions.partitionSizeLimitPerResponse. Driven through the
compat harness's JVM adapter (compat_tests/clients/java_client.py, verb describe_topics);
skipped with the reason when java or the cached client jars are missing (an error under CI,
as the harness does). The broker runs at DEBUG so its DescribeTopicPartitions log lines
prove which API the client used and that it followed the cursor."""

from __future__ import annotations

import re

import pytest

from compat_tests.clients.base import NotSupportedByClient
from tests.brokerproc import BrokerProcess, raw_request
from wire.primitives import ZERO_UUID
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def broker_and_java(tmp_path):
    from compat_tests.clients.java_client import JavaClient

    with BrokerProcess(tmp_path / "data", "--log-level", "DEBUG") as broker:
        try:
            client = JavaClient(broker.bootstrap)
        except NotSupportedByClient as exc:
            pytest.skip(str(exc))
        try:
            yield broker, client
        finally:
            client.close()


def create(broker, name: str, partitions: int) -> None:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout_ms": 10000, "validate_only": False}
    assert raw_request("127.0.0.1", broker.port, ApiKey.CREATE_TOPICS, 7, body)["topics"][0]["error_code"] == 0


def test_java_admin_describes_topics_with_cursor_paging(broker_and_java):
    broker, java = broker_and_java
    create(broker, "paged", 9)
    create(broker, "small", 2)
    answer = java._call("describe_topics", names=["small", "paged", "absent"], partition_limit=4,
                        authorized_operations=True)["topics"]
    meta = raw_request("127.0.0.1", broker.port, ApiKey.METADATA, 12,
                       {"topics": [{"name": n, "topic_id": ZERO_UUID} for n in ("paged", "small")],
                        "allow_auto_topic_creation": False, "include_topic_authorized_operations": True})
    for topic in meta["topics"]:
        got = answer[topic["name"]]
        assert got["error"] == 0 and got["internal"] is False
        assert got["topic_id"] != str(ZERO_UUID)
        assert [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in got["partitions"]] == \
            [(p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"]) for p in topic["partitions"]]
        assert {"READ", "WRITE", "DESCRIBE", "DELETE", "ALTER"} <= set(got["authorized_operations"])
    assert len(answer["paged"]["partitions"]) == 9
    assert answer["absent"]["error"] == 3 and answer["absent"]["exception"] == "UnknownTopicOrPartitionException"

    # The broker's log: the client asked with DescribeTopicPartitions, limit 4, and came back
    # with the cursors the broker gave it until the listing was complete.
    lines = [line for line in broker.log_path.read_text(errors="replace").splitlines()
             if "DescribeTopicPartitions from" in line and "-> " in line]
    assert lines, broker.log_tail()
    assert all("limit 4" in line for line in lines)
    cursors = re.findall(r"cursor (\S+, \d+\)|None) ->", "\n".join(lines))
    assert "None" in cursors and "('paged', 4)" in cursors and "('paged', 8)" in cursors, lines
    assert any(line.endswith("next cursor None") for line in lines)
