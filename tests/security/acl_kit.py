"""What the ACL tests share: one produce / one consume through librdkafka, answering the
Kafka error code a refused client reports (None when it got through)."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce_error(broker, topic: str, config: dict | None = None) -> int | None:
    """Produce one message; the delivery error code (None when delivered). `config`: more
    client settings (a SASL login)."""
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 5000, "retries": 0,
                         **(config or {})})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(10)
    assert errors, "no delivery report"
    return errors[0].code() if errors[0] is not None else None


def consume_error(broker, topic: str, group: str | None = None, assign: bool = False,
                  config: dict | None = None) -> int | None:
    """Subscribe (or with `assign`, read partition 0 without a group): the first error
    code the consumer reports, or None once a message arrived."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group or unique("g"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **(config or {})})
    try:
        if assign:
            consumer.assign([TopicPartition(topic, 0, 0)])
        else:
            consumer.subscribe([topic])
        for _ in range(20):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                return msg.error().code()
            return None
        raise AssertionError("neither a message nor an error within 10 s")
    finally:
        consumer.close()
