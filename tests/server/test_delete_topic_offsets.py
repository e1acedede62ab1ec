"""Deleting a topic drops the committed offsets groups hold for it (Kafka does the same).

Without that, a topic re-created under the same name would hand an old group its former
positions, past the end of the new, empty log (or into the middle of different data).
Real clients over loopback: confluent-kafka commits and reads offsets, its AdminClient
deletes and re-creates the topic; kafka-python's admin lists the group's offsets; a
broker restart checks the tombstones were written to __consumer_offsets, not only dropped
from memory.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient

from compat_tests.brokers import TrafkaBroker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    TrafkaBroker.check_available()
    b = TrafkaBroker(tmp_path_factory.mktemp("delete-topic-offsets"))
    b.start()
    yield b
    b.stop()


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "client.id": "delete-topic-offsets"})


def create(broker, name: str, partitions: int) -> None:
    client = admin(broker)  # kept alive until the future resolves
    client.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)[name].result(timeout=15)


def delete(broker, name: str) -> None:
    client = admin(broker)
    client.delete_topics([name], operation_timeout=10)[name].result(timeout=15)
    # Topic deletion is not instantaneous in Kafka's model either: wait until it is gone.
    deadline = time.monotonic() + 15
    while name in client.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{name} still listed after DeleteTopics"
        time.sleep(0.1)


def committed(broker, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
        return [tp.offset for tp in got]
    finally:
        consumer.close()


def commit(broker, group: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def test_delete_topic_drops_its_committed_offsets_and_keeps_others(broker):
    doomed, kept = f"doomed-{uuid.uuid4().hex[:8]}", f"kept-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    create(broker, doomed, 2)
    create(broker, kept, 1)
    commit(broker, group, {(doomed, 0): 5, (doomed, 1): 7, (kept, 0): 3})
    assert committed(broker, group, doomed, 2) == [5, 7]

    delete(broker, doomed)
    create(broker, doomed, 2)  # same name, new topic: nothing committed for it
    assert committed(broker, group, doomed, 2) == [-1001, -1001]  # OFFSET_INVALID: no committed offset
    assert committed(broker, group, kept, 1) == [3]

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="delete-topic-offsets-kp")
    try:
        listed = kp.list_group_offsets(group)[group]
    finally:
        kp.close()
    assert {(tp.topic, tp.partition): om.offset for tp, om in listed.items()} == {(kept, 0): 3}

    broker.restart()  # the removal was written (tombstones), not only forgotten in memory
    assert committed(broker, group, doomed, 2) == [-1001, -1001]
    assert committed(broker, group, kept, 1) == [3]
