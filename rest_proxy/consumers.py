"""Consumer instances (v2): a confluent-kafka Consumer per `POST /consumers/{group}`.

How this works: an instance is named by (group, name); its consumer is only ever called
through the instance's own one-thread limiter, so calls to one instance run in order (as
librdkafka wants) and a long `GET .../records` poll holds no other instance nor the
producer pool. Records fetched beyond a request's `max_bytes`, and those from a record its
format cannot read on, wait in the instance for the next request (librdkafka's fetch
position already moved past them). So what a commit (or auto commit) takes is not
librdkafka's position: the consumer runs with enable.auto.offset.store=false and the
offset after each record actually answered is stored (`settle`); a commit never passes a
record the client has not seen. Each use stamps `last_used`; `expire` closes instances idle
longer than consumer.instance.timeout.ms (the consumer leaves its group) and `close_all`
closes the rest at shutdown.
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any

import trio
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from rest_proxy import errors
from rest_proxy.formats import AVRO, BINARY, JSON, JSONSCHEMA, PROTOBUF
from rest_proxy.kafka import Credentials, KafkaClients, kafka_error

log = logging.getLogger("trafka.rest_proxy")

OFFSET_RESET = {"earliest": "earliest", "smallest": "earliest", "latest": "latest", "largest": "latest",
                "none": "error"}


class ConsumerInstance:
    def __init__(self, group: str, name: str, fmt: str, consumer: Consumer, owner: Credentials | None) -> None:
        self.group = group
        self.name = name
        self.format = fmt
        self.consumer = consumer
        self.owner = owner
        self.limiter = trio.CapacityLimiter(1)
        # held by a records request from its poll until its answer is settled, and by what
        # drops pending records (seek, unsubscribe), so records given back stay in order
        self.reading = trio.Lock()
        self.pending: collections.deque = collections.deque()
        self.subscribed: list[str] = []
        self.pattern: str | None = None
        self.last_used = time.monotonic()
        self.closed = False
        self.request_timeout_ms = 1000

    async def call(self, fn, *args):
        """`fn(consumer, *args)` in this instance's own worker thread; Kafka errors as
        Confluent's answers."""
        self.last_used = time.monotonic()
        try:
            return await trio.to_thread.run_sync(self._guarded, fn, args, limiter=self.limiter)
        finally:
            self.last_used = time.monotonic()

    def _guarded(self, fn, args):
        if self.closed:
            raise errors.consumer_instance_not_found()
        try:
            return fn(self.consumer, *args)
        except KafkaException as exc:
            raise kafka_error(exc) from None

    def poll(self, timeout: float, max_bytes: int) -> list:
        """Blocking (in the instance's thread): records until `timeout` or `max_bytes`; the
        first records end the wait, what is ready then comes along."""
        out: list = []
        size = 0
        deadline = time.monotonic() + timeout
        while True:
            while self.pending and (not out or size + _size(self.pending[0]) <= max_bytes):
                msg = self.pending.popleft()
                out.append(msg)
                size += _size(msg)
            if self.pending or (out and size >= max_bytes):
                return out
            left = deadline - time.monotonic()
            if out:
                left = 0
            elif left <= 0:
                return out
            if self.closed:  # being deleted or expired: give the thread to close()
                return out
            # in slices, so a DELETE or expiry during a long poll closes the consumer soon
            for msg in self.consumer.consume(num_messages=500, timeout=min(max(left, 0), POLL_SLICE_S)):
                err = msg.error()
                if err is None:
                    self.pending.append(msg)
                elif err.code() != KafkaError._PARTITION_EOF:
                    log.info("rest proxy: consumer %s/%s: %s", self.group, self.name, err)
                    if err.fatal() or err.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                     KafkaError.GROUP_AUTHORIZATION_FAILED):
                        raise kafka_error(err)
            if not self.pending and left <= 0:
                return out


    def settle(self, consumer: Consumer, answered: list, unread: list) -> None:
        """After a records request: the records it could not answer go back to the head of
        `pending` (in order: read first next time), and the offset after the last answered
        record of each partition is stored for the next commit."""
        self.pending.extendleft(reversed(unread))
        after: dict[tuple[str, int], int] = {}
        for msg in answered:
            after[(msg.topic(), msg.partition())] = msg.offset() + 1
        for (topic, partition), offset in after.items():
            try:
                consumer.store_offsets(offsets=[TopicPartition(topic, partition, offset)])
            except KafkaException as exc:  # revoked meanwhile: its new owner reads from the commit
                log.info("rest proxy: consumer %s/%s: offset %d of %s-%d not stored: %s", self.group, self.name,
                         offset, topic, partition, exc.args[0])


POLL_SLICE_S = 0.5  # longest single consume() of a records poll


def _size(msg) -> int:
    return len(msg.key() or b"") + len(msg.value() or b"")


class ConsumerInstances:
    """Every consumer instance of the proxy, by (group, name)."""

    def __init__(self, clients: KafkaClients, timeout_ms: int, limit: int) -> None:
        self.clients = clients
        self.timeout = timeout_ms / 1000
        self.limit = limit
        self._creating = 0  # creations under way: they count against the limit already
        self.closing = False
        self.instances: dict[tuple[str, str], ConsumerInstance] = {}
        self._names = 0

    async def create(self, group: str, body: Any, owner: Credentials | None) -> ConsumerInstance:
        """POST /consumers/{group}: 409 40902 for a taken name, 422 42204 for bad settings."""
        if not isinstance(body, dict):
            raise errors.unprocessable("the request body must be a JSON object")
        name = body.get("name")
        if name is None:
            self._names += 1
            name = f"rest-consumer-{self._names}-{int(time.time() * 1000)}"
        if not isinstance(name, str) or not name:
            raise errors.invalid_consumer_config("name must be a non-empty string")
        fmt = str(body.get("format") or BINARY).lower()
        if fmt not in (BINARY, JSON, AVRO, JSONSCHEMA, PROTOBUF):
            raise errors.invalid_consumer_config(f"format {fmt!r} is not one of binary, json, avro, jsonschema, "
                                                 "protobuf")
        if self.closing:
            raise errors.RestError(503, 50003, "The broker is shutting down: no new consumer instances")
        if (group, name) in self.instances:
            raise errors.consumer_already_exists()
        if len(self.instances) + self._creating >= self.limit:
            raise errors.too_many_consumer_instances(self.limit)
        conf = self.clients.base_conf(owner) | {"group.id": group, "client.id": name,
                                                 "enable.partition.eof": False,
                                                 "enable.auto.offset.store": False}  # ConsumerInstance.settle
        reset = body.get("auto.offset.reset")
        if reset is not None:
            if str(reset).lower() not in OFFSET_RESET:
                raise errors.invalid_consumer_config(f"auto.offset.reset {reset!r} is not earliest, latest or none")
            conf["auto.offset.reset"] = OFFSET_RESET[str(reset).lower()]
        auto_commit = body.get("auto.commit.enable")
        if auto_commit is not None:
            if str(auto_commit).lower() not in ("true", "false"):
                raise errors.invalid_consumer_config(f"auto.commit.enable {auto_commit!r} is not true or false")
            conf["enable.auto.commit"] = str(auto_commit).lower() == "true"
        numbers = {}
        for key in ("fetch.min.bytes", "consumer.request.timeout.ms"):
            value = body.get(key)
            if value is not None:
                try:
                    numbers[key] = int(value)
                except (TypeError, ValueError, OverflowError):  # OverflowError: JSON's Infinity
                    raise errors.invalid_consumer_config(f"{key} must be an integer") from None
                if numbers[key] < 0:
                    raise errors.invalid_consumer_config(f"{key} must not be negative")
        if "fetch.min.bytes" in numbers:
            conf["fetch.min.bytes"] = max(1, numbers["fetch.min.bytes"])
        self._creating += 1
        try:
            consumer = await self.clients.run(Consumer, conf)
        except KafkaException as exc:
            raise errors.invalid_consumer_config(str(exc.args[0])) from None
        finally:
            self._creating -= 1
        if (group, name) in self.instances or self.closing:  # created meanwhile, or shutdown began
            await self.clients.run(consumer.close)
            if self.closing:
                raise errors.RestError(503, 50003, "The broker is shutting down: no new consumer instances")
            raise errors.consumer_already_exists()
        instance = self.instances[(group, name)] = ConsumerInstance(group, name, fmt, consumer, owner)
        # Confluent's: how long GET .../records waits when it names no timeout
        instance.request_timeout_ms = numbers.get("consumer.request.timeout.ms", 1000)
        log.info("rest proxy: consumer instance %s/%s created (format %s)", group, name, fmt)
        return instance

    def get(self, group: str, name: str, owner: Credentials | None) -> ConsumerInstance:
        """The instance (40403 when unknown, or owned by another user)."""
        instance = self.instances.get((group, name))
        if instance is None or instance.closed or (self.clients.secured and instance.owner != owner):
            raise errors.consumer_instance_not_found()
        instance.last_used = time.monotonic()
        return instance

    async def delete(self, instance: ConsumerInstance) -> None:
        self.instances.pop((instance.group, instance.name), None)
        await self._close(instance)
        log.info("rest proxy: consumer instance %s/%s deleted", instance.group, instance.name)

    async def _close(self, instance: ConsumerInstance) -> None:
        instance.closed = True  # a poll under way ends at its next slice and frees the thread

        def close(consumer) -> None:
            consumer.close()

        try:
            with trio.move_on_after(30):
                await trio.to_thread.run_sync(close, instance.consumer, limiter=instance.limiter)
        except (KafkaException, RuntimeError) as exc:
            log.info("rest proxy: closing consumer %s/%s: %s", instance.group, instance.name, exc)

    async def expire(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Close instances idle longer than consumer.instance.timeout.ms, until cancelled."""
        task_status.started()
        while True:
            await trio.sleep(max(0.05, min(self.timeout / 4, 5.0)))
            now = time.monotonic()
            for key, instance in list(self.instances.items()):
                if now - instance.last_used > self.timeout and instance.limiter.borrowed_tokens == 0:
                    self.instances.pop(key, None)
                    log.info("rest proxy: consumer instance %s/%s expired (idle %.0f ms > "
                             "consumer.instance.timeout.ms)", instance.group, instance.name,
                             (now - instance.last_used) * 1000)
                    await self._close(instance)

    async def close_all(self) -> None:
        self.closing = True
        instances, self.instances = list(self.instances.values()), {}
        if instances:
            log.info("rest proxy: closing %d consumer instances", len(instances))
        async with trio.open_nursery() as nursery:
            for instance in instances:
                nursery.start_soon(self._close, instance)


def topic_partitions(body: Any, key: str = "partitions", *, offsets: bool = False) -> list[TopicPartition]:
    """`{"partitions": [{"topic", "partition"}]}` (or "offsets" with "offset") as
    TopicPartitions; 422 for anything else."""
    if not isinstance(body, dict) or not isinstance(body.get(key), list):
        raise errors.unprocessable(f"the request body must be an object with a {key!r} list")
    out = []
    for item in body[key]:
        # ranges too: librdkafka's TopicPartition takes an int32 partition and an int64 offset
        # (OverflowError beyond), and a negative partition is one of its markers, not a partition
        if not isinstance(item, dict) or not isinstance(item.get("topic"), str) \
                or not _in_range(item.get("partition"), INT32_MAX):
            raise errors.unprocessable(f"each of {key!r} must have a topic (string) and a partition "
                                       f"(integer, 0 to {INT32_MAX})")
        if offsets:
            offset = item.get("offset")
            if not _in_range(offset, INT64_MAX):
                raise errors.unprocessable(f"each offset must be an integer from 0 to {INT64_MAX}")
            out.append(TopicPartition(item["topic"], item["partition"], offset))
        else:
            out.append(TopicPartition(item["topic"], item["partition"]))
    return out


INT32_MAX = 2 ** 31 - 1
INT64_MAX = 2 ** 63 - 1


def _in_range(value: Any, maximum: int) -> bool:
    """A JSON integer (not a bool) from 0 to `maximum`."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= maximum
