"""aiokafka adapter: each verb is one `asyncio.run`; group members run their own loop thread.

aiokafka speaks only non-flexible protocol versions (docs/design/clients.md#aiokafka), so it
exercises the
old request layouts a broker must still serve. Its admin client returns raw responses:
error codes are checked here.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Iterable

import aiokafka.errors as aerr
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.protocol.metadata import MetadataRequest
from aiokafka.structs import OffsetAndMetadata

from compat_tests.clients.base import (
    FETCH_WAIT_MS, HEARTBEAT_MS, LARGE_LIMIT, SESSION_TIMEOUT_MS, TXN_BLOCK_MS, Client,
    ClientError, ClusterMetadata, Delivery, GroupInfo, GroupMember, GroupMemberInfo, Message,
    ThreadedGroupMember, OffsetOutOfRange, Record, TopicMetadata, TxnProducer,
    decode_consumer_assignment, normalize_state, retry_coordinator)

TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
TIMEOUT_S = 20.0


def _client_error(exc: Exception) -> ClientError:
    code = getattr(exc, "errno", None)
    if isinstance(exc, aerr.ProducerFenced):
        # aiokafka raises its own ProducerFenced (no errno) where the broker answered
        # INVALID_PRODUCER_EPOCH, the fencing error of the v0 requests it sends.
        code = 47
    return ClientError(f"{type(exc).__name__}: {exc}", code)


def _check(code: int, what: str, message: str | None = None) -> None:
    if code:
        raise ClientError(f"{what}: error {code} {message or ''}".strip(), code)


def _record(r) -> Record:
    return Record(r.topic, r.partition, r.offset, r.key, r.value, tuple(r.headers or ()),
                  r.timestamp, TIMESTAMP_TYPES.get(r.timestamp_type, str(r.timestamp_type)))


def _run(coro):
    async def bounded():
        return await asyncio.wait_for(coro, TIMEOUT_S * 3)
    try:
        return asyncio.run(bounded())
    except aerr.KafkaError as exc:
        raise _client_error(exc) from exc


class AiokafkaClient(Client):
    name = "aiokafka"

    def _common(self) -> dict:
        return {"bootstrap_servers": self.bootstrap, "client_id": "compat-aiokafka",
                "request_timeout_ms": int(TIMEOUT_S * 1000)}

    def _consumer(self, group=None, reset="earliest", fetch_wait_ms=FETCH_WAIT_MS,
                  isolation_level="read_uncommitted"):
        return AIOKafkaConsumer(
            **self._common(), group_id=group, enable_auto_commit=False,
            isolation_level=isolation_level,
            auto_offset_reset=reset, fetch_max_wait_ms=fetch_wait_ms,
            session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_MS,
            max_partition_fetch_bytes=LARGE_LIMIT, fetch_max_bytes=LARGE_LIMIT * 2,
            check_crcs=True)

    async def _with_admin(self, fn):
        admin = AIOKafkaAdminClient(**self._common())
        await admin.start()
        try:
            return await fn(admin)
        finally:
            await admin.close()

    # -- cluster
    def metadata(self, topics=None, allow_auto_create=False) -> ClusterMetadata:
        async def go(admin):
            # describe_topics always allows auto-creation; the library's own request class
            # takes the flag, so send that when creation is not wanted.
            request = MetadataRequest(topics, allow_auto_topic_creation=allow_auto_create)
            return (await admin._send_request(request)).to_object()

        obj = _run(self._with_admin(go))
        brokers = {b["node_id"]: (b["host"], b["port"]) for b in obj["brokers"]}
        return ClusterMetadata(brokers, {
            t["topic"]: TopicMetadata(t["error_code"], {
                p["partition"]: p["leader"] for p in t["partitions"]})
            for t in obj["topics"]})

    # -- admin
    def create_topic(self, name, partitions=1, configs=None) -> None:
        response = _run(self._with_admin(lambda a: a.create_topics(
            [NewTopic(name, partitions, 1, topic_configs=dict(configs or {}))])))
        for topic, code, *rest in response.topic_errors:
            _check(code, f"create_topics {topic}", rest[0] if rest else None)

    def delete_topic(self, name) -> None:
        response = _run(self._with_admin(lambda a: a.delete_topics([name])))
        for topic, code, *_ in response.topic_error_codes:
            _check(code, f"delete_topics {topic}")

    def create_partitions(self, name, total) -> None:
        response = _run(self._with_admin(
            lambda a: a.create_partitions({name: NewPartitions(total)})))
        for topic, code, message in response.topic_errors:
            _check(code, f"create_partitions {topic}", message)

    def describe_configs(self, name) -> dict[str, str | None]:
        responses = _run(self._with_admin(lambda a: a.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name)])))
        out = {}
        for response in responses:
            for resource in response.to_object()["resources"]:
                _check(resource["error_code"], "describe_configs", resource["error_message"])
                for entry in resource["config_entries"]:
                    out[entry["config_names"]] = entry["config_value"]
        return out

    def alter_configs(self, name, configs) -> None:
        responses = _run(self._with_admin(lambda a: a.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name, configs=dict(configs))])))
        for response in responses:
            for resource in response.to_object()["resources"]:
                _check(resource["error_code"], "alter_configs", resource["error_message"])

    # -- data
    def produce(self, topic, messages: Iterable[Message], acks="all", compression="none",
                idempotent=None) -> list[Delivery]:
        acks_cfg = "all" if acks in ("all", -1) else int(acks)
        messages = list(messages)

        async def go():
            producer = AIOKafkaProducer(
                **self._common(), acks=acks_cfg,
                compression_type=None if compression == "none" else compression,
                enable_idempotence=bool(idempotent), max_request_size=LARGE_LIMIT, linger_ms=5)
            await producer.start()
            try:
                futures = [await producer.send(topic, value=m.value, key=m.key,
                                               partition=m.partition, timestamp_ms=m.timestamp,
                                               headers=list(m.headers) or None)
                           for m in messages]
                results = await asyncio.gather(*futures)
            finally:
                await producer.stop()
            # acks=0: aiokafka resolves each send with None instead of metadata
            return [Delivery(m.partition, None) if md is None else
                    Delivery(md.partition, md.offset if md.offset is not None and md.offset >= 0
                             else None) for m, md in zip(messages, results)]

        return _run(go())

    def consume(self, topic, n, *, group=None, start=None, auto_offset_reset="earliest",
                timeout=15.0, fetch_wait_ms=FETCH_WAIT_MS, commit=True,
                isolation_level="read_uncommitted") -> list[Record]:
        async def go():
            consumer = self._consumer(group, auto_offset_reset, fetch_wait_ms, isolation_level)
            await consumer.start()
            out: list[Record] = []
            try:
                if group is not None:
                    consumer.subscribe([topic])
                else:
                    if start is not None:
                        wanted = sorted(start)
                    else:
                        # consumer.topics() does not refresh the cache partitions_for_topic
                        # reads, so ask the client for metadata the way topics() does.
                        cluster = await consumer._client.fetch_all_metadata()
                        wanted = sorted(cluster.partitions_for_topic(topic) or ())
                    consumer.assign([TopicPartition(topic, p) for p in wanted])
                    for p, offset in (start or {}).items():
                        consumer.seek(TopicPartition(topic, p), offset)
                loop = asyncio.get_running_loop()
                deadline = loop.time() + timeout
                while len(out) < n and loop.time() < deadline:
                    batch = await consumer.getmany(timeout_ms=200, max_records=n - len(out))
                    for records in batch.values():
                        out.extend(_record(r) for r in records)
                if group is not None and commit and out:
                    await consumer.commit()
                return out
            except (aerr.OffsetOutOfRangeError, aerr.NoOffsetForPartitionError) as exc:
                raise OffsetOutOfRange(f"{type(exc).__name__}: {exc}") from exc
            finally:
                await consumer.stop()

        return _run(go())

    def commit(self, group, topic, offsets) -> None:
        async def go():
            consumer = self._consumer(group)
            await consumer.start()
            try:
                tps = [TopicPartition(topic, p) for p in offsets]
                consumer.assign(tps)
                await consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "")
                                       for p, o in offsets.items()})
            finally:
                await consumer.stop()

        _run(go())

    def committed(self, group, topic, partitions) -> dict[int, int | None]:
        offsets = retry_coordinator(lambda: _run(self._with_admin(lambda a: a.list_consumer_group_offsets(
            group, partitions=[TopicPartition(topic, p) for p in partitions]))))
        out = {}
        for p in partitions:
            om = offsets.get(TopicPartition(topic, p))
            out[p] = om.offset if om is not None and om.offset >= 0 else None
        return out

    def list_offsets(self, topic, partition, spec, isolation_level="read_uncommitted"
                     ) -> int | None:
        # The consumer's isolation level decides: read_committed end_offsets is the LSO.
        async def go():
            consumer = self._consumer(isolation_level=isolation_level)
            await consumer.start()
            tp = TopicPartition(topic, partition)
            try:
                if spec == "earliest":
                    return (await consumer.beginning_offsets([tp]))[tp]
                if spec == "latest":
                    return (await consumer.end_offsets([tp]))[tp]
                found = (await consumer.offsets_for_times({tp: int(spec)}))[tp]
                return found.offset if found is not None else None
            finally:
                await consumer.stop()

        return _run(go())

    def transactional_producer(self, transactional_id, *, transaction_timeout_ms=None
                               ) -> TxnProducer:
        return _TxnProducer(self, transactional_id, transaction_timeout_ms)

    # -- groups
    def group_member(self, topics, group) -> GroupMember:
        return _Member(self, topics, group)

    def list_groups(self) -> list[str]:
        return [g[0] for g in _run(self._with_admin(lambda a: a.list_consumer_groups()))]

    def describe_group(self, group) -> GroupInfo:
        responses = _run(self._with_admin(lambda a: a.describe_consumer_groups([group])))
        for response in responses:
            for g in response.to_object()["groups"]:
                if g["group"] != group:
                    continue
                _check(g["error_code"], f"describe_groups {group}")
                members = [GroupMemberInfo(m["member_id"], m["client_id"],
                                           decode_consumer_assignment(m["member_assignment"]))
                           for m in g["members"]]
                return GroupInfo(group, normalize_state(g["state"]), g["protocol_type"], members)
        raise ClientError(f"describe_groups: {group} missing from the response")

    def delete_group(self, group) -> None:
        raise self._unsupported("deleting groups (AIOKafkaAdminClient has no delete_groups)")


class _Member(ThreadedGroupMember):
    """A consumer on its own event loop in its own thread, polling until `leave()`."""

    def __init__(self, client: AiokafkaClient, topics: list[str], group: str) -> None:
        super().__init__("aio-member")
        self._client = client
        self._topics = topics
        self._group = group
        self._start()

    def _run(self) -> None:
        asyncio.run(self._consume())

    async def _consume(self) -> None:
        consumer = self._client._consumer(self._group)
        await consumer.start()
        try:
            consumer.subscribe(self._topics)
            while not self._stop.is_set():
                try:
                    batch = await consumer.getmany(timeout_ms=100)
                except aerr.KafkaError as exc:
                    self._error = repr(exc)
                    await asyncio.sleep(0.1)
                    continue
                with self._lock:
                    for records in batch.values():
                        self._records.extend(_record(r) for r in records)
                    self._assignment = frozenset(
                        (tp.topic, tp.partition) for tp in consumer.assignment())
        finally:
            await consumer.stop()


class _TxnProducer(TxnProducer):
    """AIOKafkaProducer(transactional_id=...) on an event loop of its own thread, so its
    sender keeps running between verbs the way it does in an application; start() is
    aiokafka's initTransactions. send_offsets_to_transaction takes the bare group id."""

    def __init__(self, client: AiokafkaClient, transactional_id: str,
                 transaction_timeout_ms: int | None) -> None:
        self.transactional_id = transactional_id
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="aio-txn-producer")
        self._thread.start()
        extra = {}
        if transaction_timeout_ms is not None:
            extra["transaction_timeout_ms"] = transaction_timeout_ms

        async def make():
            return AIOKafkaProducer(**client._common(), transactional_id=transactional_id,
                                    linger_ms=5, **extra)

        self._producer = self._call(make())
        try:
            self._call(self._producer.start())
        except ClientError:
            self.close()
            raise

    def _call(self, coro):
        future = asyncio.run_coroutine_threadsafe(
            asyncio.wait_for(coro, TXN_BLOCK_MS / 1000), self._loop)
        try:
            return future.result()
        except aerr.KafkaError as exc:
            raise _client_error(exc) from exc
        except AssertionError as exc:
            # aiokafka checks transaction-state transitions with assert (e.g. commit without
            # begin): the library's own refusal, nothing reached the broker.
            raise ClientError(f"aiokafka refused: {exc}") from exc
        except asyncio.TimeoutError as exc:
            raise ClientError(f"aiokafka: no answer within {TXN_BLOCK_MS} ms") from exc

    def begin(self) -> None:
        self._call(self._producer.begin_transaction())

    def produce(self, topic, messages) -> list[Delivery]:
        messages = list(messages)

        async def go():
            futures = [await self._producer.send(topic, value=m.value, key=m.key,
                                                 partition=m.partition, timestamp_ms=m.timestamp,
                                                 headers=list(m.headers) or None)
                       for m in messages]
            return await asyncio.gather(*futures)

        return [Delivery(md.partition, md.offset) for md in self._call(go())]

    def send_offsets(self, group, offsets) -> None:
        self._call(self._producer.send_offsets_to_transaction(
            {TopicPartition(t, p): o for (t, p), o in offsets.items()}, group))

    def commit(self) -> None:
        self._call(self._producer.commit_transaction())

    def abort(self) -> None:
        self._call(self._producer.abort_transaction())

    def close(self) -> None:
        producer = getattr(self, "_producer", None)
        if producer is not None:
            future = asyncio.run_coroutine_threadsafe(
                asyncio.wait_for(producer.stop(), 5), self._loop)
            try:
                future.result(10)
            except Exception:  # noqa: BLE001 - a fenced or orphaned producer may not stop cleanly
                pass
            self._producer = None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
