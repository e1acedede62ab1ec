"""A fresh broker holds an empty group's first rebalance group.initial.rebalance.delay.ms =
3000 (Kafka's default, KIP-134), so consumers started together get their partitions in one
generation. With no delay (Trafka's old default) the first consumer took every partition
alone, then handed half over in two more rebalances: librdkafka's own 0113 cooperative
rebalance test (l_unsubscribe) counts the assign callbacks and failed ("consumer 1's
assign_call_cnt to be 1 not: 3"), as it fails against Kafka with the delay set to 0."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # the suite's environment turns the delay off (conftest.py): this broker has the default
    with BrokerProcess(tmp_path_factory.mktemp("initial-delay") / "data",
                       env={"TRAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": None}) as b:
        yield b


def test_the_default_is_kafkas(broker):
    body = {"resources": [{"resource_type": 4, "resource_name": "1",
                           "configuration_keys": ["group.initial.rebalance.delay.ms"]}],
            "include_synonyms": False, "include_documentation": False}
    [entry] = raw_request("127.0.0.1", broker.port, ApiKey.DESCRIBE_CONFIGS, 4, body)["results"][0]["configs"]
    assert (entry["value"], entry["config_source"]) == ("3000", 5)  # DEFAULT_CONFIG


def test_consumers_started_together_are_assigned_once_each(broker):
    topic = f"together-{uuid.uuid4().hex[:8]}"
    create_topic(broker.port, topic, 4)
    group = f"g-{topic}"
    calls = {"c1": [], "c2": []}
    consumers = {}
    for name in ("c1", "c2"):
        consumers[name] = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": name,
                                    "partition.assignment.strategy": "cooperative-sticky",
                                    "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        for name, consumer in consumers.items():
            def on_assign(_consumer, partitions, name=name):
                calls[name].append(len(partitions))  # the library then assigns them
            consumer.subscribe([topic], on_assign=on_assign)
            if name == "c1":  # c1 joins first and waits; c2 comes half a second later
                until = time.monotonic() + 0.5
                while time.monotonic() < until:
                    consumer.poll(0.1)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for consumer in consumers.values():
                consumer.poll(0.2)
            if all(len(c.assignment()) == 2 for c in consumers.values()):
                break
        assert {name: len(c.assignment()) for name, c in consumers.items()} == {"c1": 2, "c2": 2}
        # one generation: each consumer's assign callback ran once, with its two partitions
        assert calls == {"c1": [2], "c2": [2]}
    finally:
        for consumer in consumers.values():
            consumer.close()
