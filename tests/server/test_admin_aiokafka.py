"""The admin APIs through aiokafka, which speaks only non-flexible versions.

aiokafka's AIOKafkaAdminClient picks DescribeConfigs v2, AlterConfigs v1,
CreatePartitions v1 and DeleteRecords v1-2 against Trafka: the pre-KIP-482 encodings the
other clients never use. One broker process, one event loop per test.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.admin.records_to_delete import RecordsToDelete
from aiokafka.structs import TopicPartition

from compat_tests.brokers import TrafkaBroker

pytestmark = pytest.mark.timeout(120)

DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG = 0, 3, 40


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    TrafkaBroker.check_available()
    b = TrafkaBroker(tmp_path_factory.mktemp("admin-aiokafka"))
    b.start()
    yield b
    b.stop()


def run(broker, scenario):
    """Run `scenario(admin)` with a started admin client, on a fresh event loop."""
    async def main():
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="admin-aiokafka",
                                    request_timeout_ms=10000)
        await admin.start()
        try:
            return await asyncio.wait_for(scenario(admin), 60)
        finally:
            await admin.close()

    return asyncio.run(main())


def test_configs(broker):
    name = f"aio-{uuid.uuid4().hex[:10]}"

    async def scenario(admin):
        await admin.create_topics([NewTopic(name, 1, 1, topic_configs={"retention.ms": "3600000"})])
        [described] = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name, {"retention.ms": None, "segment.ms": None})],
            include_synonyms=True)
        [resource] = described.to_object()["resources"]
        entries = {e["config_names"]: e for e in resource["config_entries"]}
        assert entries["retention.ms"]["config_value"] == "3600000"
        assert entries["retention.ms"]["config_source"] == DYNAMIC_TOPIC_CONFIG
        assert entries["segment.ms"]["config_source"] == DEFAULT_CONFIG
        # Kafka has no built-in log.retention.ms (log.retention.hours gives it): the topic's own
        # value is the whole chain.
        assert [s["config_name"] for s in entries["retention.ms"]["config_synonyms"]] == ["retention.ms"]
        [altered] = await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, {"segment.ms": "60000"})])
        assert altered.to_object()["resources"][0]["error_code"] == NONE
        [bad] = await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, {"segment.ms": "never"})])
        assert bad.to_object()["resources"][0]["error_code"] == INVALID_CONFIG
        [described] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name, None)])
        entries = {e["config_names"]: e for e in described.to_object()["resources"][0]["config_entries"]}
        assert entries["segment.ms"]["config_value"] == "60000"
        assert entries["retention.ms"]["config_source"] == DEFAULT_CONFIG  # replaced: no longer set
        [missing] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "no-such-aio", None)])
        assert missing.to_object()["resources"][0]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION

    run(broker, scenario)


def test_partitions_records_cluster(broker):
    name = f"aio-{uuid.uuid4().hex[:10]}"

    async def scenario(admin):
        await admin.create_topics([NewTopic(name, 1, 1)])
        response = await admin.create_partitions({name: NewPartitions(3)})
        assert response.to_object()["topic_errors"] == [{"topic": name, "error_code": NONE, "error_message": None}]
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await producer.start()
        try:
            for i in range(6):
                await producer.send_and_wait(name, f"v{i}".encode(), partition=2)
        finally:
            await producer.stop()
        low = await admin.delete_records({TopicPartition(name, 2): RecordsToDelete(4)})
        assert low == {TopicPartition(name, 2): 4}
        cluster = await admin.describe_cluster()
        assert cluster["controller_id"] == 1
        assert [(b["node_id"], b["port"]) for b in cluster["brokers"]] == [(1, broker.port)]

    run(broker, scenario)
