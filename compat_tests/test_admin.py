"""Admin verbs: topics (by name and by topic id), partitions, configs."""

from __future__ import annotations

import uuid

import pytest

from compat_tests.clients.base import ZERO_UUID, ClientError, Message, kafka_uuid
from compat_tests.helpers import make_topic, wait_metadata


def test_create_and_delete_topic(client, setup_client, topic_name):
    client.create_topic(topic_name, 3)
    wait_metadata(setup_client, topic_name,
                  lambda t: t.error_code == 0 and sorted(t.partitions) == [0, 1, 2],
                  what="3 partitions after create")
    with pytest.raises(ClientError) as exists:
        client.create_topic(topic_name, 3)
    assert exists.value.code == 36, f"second create: {exists.value} (expected TOPIC_ALREADY_EXISTS)"
    client.delete_topic(topic_name)
    wait_metadata(setup_client, topic_name, lambda t: t.error_code == 3,
                  what="UNKNOWN_TOPIC_OR_PARTITION after delete")
    with pytest.raises(ClientError) as gone:
        client.delete_topic(topic_name)
    assert gone.value.code == 3, f"second delete: {gone.value} (expected UNKNOWN_TOPIC_OR_PARTITION)"


def test_create_partitions(client, setup_client, topic_name):
    make_topic(setup_client, setup_client, topic_name, 2)
    client.create_partitions(topic_name, 5)
    wait_metadata(setup_client, topic_name, lambda t: sorted(t.partitions) == [0, 1, 2, 3, 4],
                  what="5 partitions after create_partitions")
    deliveries = setup_client.produce(topic_name, [Message(b"new", partition=4)])
    assert deliveries[0].partition == 4 and deliveries[0].offset == 0
    records = setup_client.consume(topic_name, 1, start={4: 0}, timeout=10)
    assert [(r.partition, r.offset, r.value) for r in records] == [(4, 0, b"new")]


def test_describe_configs(client, setup_client, topic_name):
    configs = {"retention.ms": "3600000", "cleanup.policy": "compact"}
    make_topic(client, setup_client, topic_name, 1, configs)
    described = client.describe_configs(topic_name)
    for key, value in configs.items():
        assert described.get(key) == value, f"{key}: {described.get(key)!r} != {value!r}"


def test_alter_configs(client, setup_client, topic_name):
    make_topic(setup_client, setup_client, topic_name, 1, {"retention.ms": "3600000"})
    client.alter_configs(topic_name, {"retention.ms": "7200000"})
    described = setup_client.describe_configs(topic_name)
    assert described.get("retention.ms") == "7200000", described.get("retention.ms")


def test_describe_topic_by_id(client, setup_client, topic_name):
    """KIP-516: a topic described by its id (Metadata v12+ / DescribeTopicPartitions with a
    topic id, no name) is the topic described by name; an unknown id is UNKNOWN_TOPIC_ID."""
    make_topic(client, setup_client, topic_name, 3)
    by_name = client.describe_topic(topic_name)
    assert by_name.name == topic_name and sorted(by_name.partitions) == [0, 1, 2], by_name
    assert by_name.topic_id != ZERO_UUID, f"{topic_name} described with the zero topic id"
    by_id = client.describe_topic_by_id(by_name.topic_id)
    assert by_id == by_name
    unknown = kafka_uuid(uuid.uuid4().bytes)
    with pytest.raises(ClientError) as missing:
        client.describe_topic_by_id(unknown)
    assert missing.value.code == 100, f"{missing.value} (expected UNKNOWN_TOPIC_ID)"
