"""kafka-python (pure Python) adapter: KafkaProducer, KafkaConsumer, KafkaAdminClient."""

from __future__ import annotations

import base64
import re
import time
import uuid
from typing import Iterable

import kafka.errors as kerr
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, NewPartitions, NewTopic, OffsetSpec
from kafka.protocol.consumer.offsets import IsolationLevel
from kafka.structs import OffsetAndMetadata

from compat_tests.clients.base import (
    FETCH_WAIT_MS, HEARTBEAT_MS, LARGE_LIMIT, SESSION_TIMEOUT_MS, TXN_BLOCK_MS, Client, ClientError,
    ClusterMetadata, Delivery, GroupInfo, GroupMember, GroupMemberInfo, Message, ThreadedGroupMember,
    NotSupportedByClient, TxnProducer, OffsetOutOfRange, Record, TopicDescription, TopicMetadata,
    decode_consumer_assignment, kafka_uuid, normalize_state, retry_coordinator)

TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def _client_error(exc: Exception) -> ClientError:
    return ClientError(f"{type(exc).__name__}: {exc}", getattr(exc, "errno", None))


def _record(r) -> Record:
    return Record(r.topic, r.partition, r.offset, r.key, r.value,
                  tuple((k, v) for k, v in (r.headers or ())), r.timestamp,
                  TIMESTAMP_TYPES.get(r.timestamp_type, str(r.timestamp_type)))


class KafkaPythonClient(Client):
    name = "kafka-python"

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        self._admin: KafkaAdminClient | None = None

    def _common(self) -> dict:
        return {"bootstrap_servers": self.bootstrap, "client_id": "compat-kafka-python",
                "request_timeout_ms": 15000}

    @property
    def admin(self) -> KafkaAdminClient:
        if self._admin is None:
            self._admin = KafkaAdminClient(**self._common())
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def _consumer(self, group: str | None = None, reset: str = "earliest",
                  fetch_wait_ms: int = FETCH_WAIT_MS, **extra) -> KafkaConsumer:
        return KafkaConsumer(
            **self._common(), group_id=group, enable_auto_commit=False,
            auto_offset_reset=reset, fetch_max_wait_ms=fetch_wait_ms,
            session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_MS,
            max_partition_fetch_bytes=LARGE_LIMIT, fetch_max_bytes=LARGE_LIMIT * 2,
            receive_message_max_bytes=LARGE_LIMIT * 4, check_crcs=True, **extra)

    # -- cluster
    def metadata(self, topics=None, allow_auto_create=False) -> ClusterMetadata:
        try:
            if allow_auto_create and topics:
                producer = KafkaProducer(**self._common(), max_block_ms=10000,
                                         allow_auto_create_topics=True)
                try:
                    for topic in topics:
                        try:
                            producer.partitions_for(topic)
                        except kerr.KafkaTimeoutError:
                            pass  # reported below as the topic's error
                finally:
                    producer.close()
            cluster = self.admin.describe_cluster()
            described = self.admin.describe_topics(topics)
        except kerr.KafkaError as exc:
            raise _client_error(exc) from exc
        brokers = {b["broker_id"]: (b["host"], b["port"]) for b in cluster["brokers"]}
        return ClusterMetadata(brokers, {
            t["name"]: TopicMetadata(t["error_code"], {
                p["partition_index"]: p["leader_id"] for p in t["partitions"]})
            for t in described})

    # -- admin
    def create_topic(self, name, partitions=1, configs=None) -> None:
        try:
            self.admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
        except kerr.KafkaError as exc:
            raise _client_error(exc) from exc

    def delete_topic(self, name) -> None:
        try:
            self.admin.delete_topics([name])
        except kerr.KafkaError as exc:
            raise _client_error(exc) from exc

    def create_partitions(self, name, total) -> None:
        try:
            self.admin.create_partitions({name: NewPartitions(total)})
        except kerr.KafkaError as exc:
            raise _client_error(exc) from exc

    def describe_configs(self, name) -> dict[str, str | None]:
        try:
            result = self.admin.describe_configs([ConfigResource("TOPIC", name)],
                                                 config_filter="all")
        except kerr.KafkaError as exc:
            raise _client_error(exc) from exc
        return {k: v["value"] for k, v in result["topic"][name].items()}

    def alter_configs(self, name, configs) -> None:
        try:
            self.admin.alter_configs([ConfigResource("TOPIC", name, configs=dict(configs))],
                                     raise_on_unknown=False)
        except kerr.KafkaError as exc:
            raise _client_error(exc) from exc

    def describe_topic(self, name) -> TopicDescription:
        return self._describe(name)

    def describe_topic_by_id(self, topic_id) -> TopicDescription:
        padded = topic_id + "=" * (-len(topic_id) % 4)
        return self._describe(uuid.UUID(bytes=base64.urlsafe_b64decode(padded)))

    def _describe(self, topic: str | uuid.UUID) -> TopicDescription:
        """Metadata for one topic, named by name or by uuid.UUID (Metadata v12+, KIP-516)."""
        try:
            (t,) = self.admin.describe_topics([topic])
        except kerr.KafkaError as exc:
            raise _client_error(exc) from exc
        if t["error_code"]:
            raise ClientError(f"describe_topics: error {t['error_code']} for {topic}", t["error_code"])
        topic_id = t["topic_id"]  # to_dict() gives the UUID's text form
        raw = topic_id.bytes if isinstance(topic_id, uuid.UUID) else uuid.UUID(str(topic_id)).bytes
        return TopicDescription(t["name"], kafka_uuid(raw),
                                {p["partition_index"]: p["leader_id"] for p in t["partitions"]})

    # -- data
    def produce(self, topic, messages: Iterable[Message], acks="all", compression="none",
                idempotent=None) -> list[Delivery]:
        acks_cfg = "all" if acks in ("all", -1) else int(acks)
        if idempotent is None:
            idempotent = acks_cfg == "all"  # kafka-python's default, where allowed
        messages = list(messages)
        if any(v is None for m in messages for _k, v in m.headers):
            raise NotSupportedByClient("kafka-python cannot send a header with a null value")
        producer = KafkaProducer(
            **self._common(), acks=acks_cfg,
            compression_type=None if compression == "none" else compression,
            enable_idempotence=idempotent, max_request_size=LARGE_LIMIT, linger_ms=5,
            max_block_ms=15000)
        try:
            futures = [producer.send(topic, value=m.value, key=m.key,
                                     headers=list(m.headers) or None,
                                     partition=m.partition, timestamp_ms=m.timestamp)
                       for m in messages]
            producer.flush(timeout=30)
            out = []
            for f in futures:
                md = f.get(timeout=30)
                out.append(Delivery(md.partition, md.offset if md.offset >= 0 else None))
            return out
        except kerr.KafkaError as exc:
            raise _client_error(exc) from exc
        finally:
            producer.close(timeout=10)

    def consume(self, topic, n, *, group=None, start=None, auto_offset_reset="earliest",
                timeout=15.0, fetch_wait_ms=FETCH_WAIT_MS, commit=True,
                isolation_level="read_uncommitted") -> list[Record]:
        consumer = self._consumer(group, auto_offset_reset, fetch_wait_ms,
                                  isolation_level=isolation_level)
        out: list[Record] = []
        try:
            if group is not None:
                consumer.subscribe([topic])
            else:
                deadline = time.monotonic() + timeout
                parts = None
                while not parts and time.monotonic() < deadline:
                    try:
                        parts = consumer.partitions_for_topic(topic)
                    except kerr.KafkaError as exc:
                        # kafka-python refreshes metadata from one broker it picks, a stopped
                        # one included, and raises instead of trying another; an application
                        # retries a retriable error, and so does this adapter.
                        if not exc.retriable or time.monotonic() >= deadline:
                            raise
                    if not parts:
                        time.sleep(0.1)
                wanted = sorted(start) if start is not None else sorted(parts or ())
                consumer.assign([TopicPartition(topic, p) for p in wanted])
                for p, offset in (start or {}).items():
                    consumer.seek(TopicPartition(topic, p), offset)
            deadline = time.monotonic() + timeout
            while len(out) < n and time.monotonic() < deadline:
                # In a group, not 200 ms: kafka-python 3.0 can lose a SyncGroup answer that
                # arrives after poll() gave up waiting mid-rebalance, and the member then
                # never assigns nor heartbeats until it is expired (seen on Kafka and Trafka
                # alike under load; test_groups_extended's worker polls 2 s for the same
                # reason). poll() still returns as soon as records arrive.
                wait_ms = 200 if group is None else max(200, min(2000, int((deadline - time.monotonic()) * 1000)))
                batch = consumer.poll(timeout_ms=wait_ms, max_records=n - len(out))
                for records in batch.values():
                    out.extend(_record(r) for r in records)
            if group is not None and commit and out:
                consumer.commit()
            return out
        except (kerr.OffsetOutOfRangeError, kerr.NoOffsetForPartitionError) as exc:
            raise OffsetOutOfRange(f"{type(exc).__name__}: {exc}") from exc
        except kerr.KafkaError as exc:
            raise _client_error(exc) from exc
        finally:
            consumer.close(autocommit=False)

    def commit(self, group, topic, offsets) -> None:
        consumer = self._consumer(group)
        try:
            consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                             for p, o in offsets.items()})
        except kerr.KafkaError as exc:
            raise _client_error(exc) from exc
        finally:
            consumer.close(autocommit=False)

    def committed(self, group, topic, partitions) -> dict[int, int | None]:
        def fetch():
            try:
                return self.admin.list_group_offsets(
                    {group: [TopicPartition(topic, p) for p in partitions]})
            except kerr.KafkaError as exc:
                raise _client_error(exc) from exc
        result = retry_coordinator(fetch)
        offsets = result.get(group, {})
        out = {}
        for p in partitions:
            om = offsets.get(TopicPartition(topic, p))
            out[p] = om.offset if om is not None and om.offset >= 0 else None
        return out

    def list_offsets(self, topic, partition, spec, isolation_level="read_uncommitted"
                     ) -> int | None:
        wire = {"earliest": OffsetSpec.EARLIEST, "latest": OffsetSpec.LATEST}.get(spec, spec)
        tp = TopicPartition(topic, partition)
        level = (IsolationLevel.READ_COMMITTED if isolation_level == "read_committed"
                 else IsolationLevel.READ_UNCOMMITTED)
        try:
            result = self.admin.list_partition_offsets({tp: wire}, isolation_level=level)
        except kerr.KafkaError as exc:
            raise _client_error(exc) from exc
        offset = result[tp].offset
        return offset if offset is not None and offset >= 0 else None

    def transactional_producer(self, transactional_id, *, transaction_timeout_ms=None
                               ) -> TxnProducer:
        return _TxnProducer(self, transactional_id, transaction_timeout_ms)

    # -- groups
    def group_member(self, topics, group) -> GroupMember:
        return _Member(self._consumer(group), topics)

    def list_groups(self) -> list[str]:
        try:
            return [g["group_id"] for g in self.admin.list_groups()]
        except kerr.KafkaError as exc:
            raise _client_error(exc) from exc

    def describe_group(self, group) -> GroupInfo:
        try:
            described = self.admin.describe_groups([group])
        except kerr.KafkaError as exc:
            raise _client_error(exc) from exc
        g = described[group] if isinstance(described, dict) else described[0]
        members = []
        for m in g.get("members", []):
            assignment = m.get("member_assignment")
            if isinstance(assignment, (bytes, bytearray)):
                parts = decode_consumer_assignment(bytes(assignment))
            elif assignment:
                parts = frozenset((t["topic"] if isinstance(t, dict) else t[0], p)
                                  for t in assignment.get("assigned_partitions", [])
                                  for p in (t["partitions"] if isinstance(t, dict) else t[1]))
            else:
                parts = frozenset()
            members.append(GroupMemberInfo(m["member_id"], m["client_id"], parts))
        return GroupInfo(g["group_id"], normalize_state(g["group_state"]),
                         g.get("protocol_type", ""), members)

    def delete_group(self, group) -> None:
        try:
            results = self.admin.delete_groups([group])
        except kerr.KafkaError as exc:
            raise _client_error(exc) from exc
        # {group: "OK" | name of the error class}
        outcome = results.get(group, "missing from the response")
        if outcome != "OK":
            error_class = getattr(kerr, str(outcome), None)
            raise ClientError(f"delete_groups: {outcome}", getattr(error_class, "errno", None))


class _Member(ThreadedGroupMember):
    """One KafkaConsumer polled by its own thread."""

    def __init__(self, consumer: KafkaConsumer, topics: list[str]) -> None:
        super().__init__("kp-member")
        self._consumer = consumer
        self._topics = topics
        self._start()

    def _run(self) -> None:
        try:
            self._consumer.subscribe(self._topics)
            while not self._stop.is_set():
                try:
                    # Not shorter: kafka-python 3.0 can drop a SyncGroup answer that
                    # arrives after a short poll gave up mid-rebalance (dpkp/kafka-python#2617).
                    batch = self._consumer.poll(timeout_ms=1000)
                except kerr.KafkaError as exc:
                    self._error = repr(exc)
                    time.sleep(0.1)
                    continue
                with self._lock:
                    for records in batch.values():
                        self._records.extend(_record(r) for r in records)
                    self._assignment = frozenset(
                        (tp.topic, tp.partition) for tp in self._consumer.assignment())
        finally:
            self._consumer.close(autocommit=False)


class _TxnProducer(TxnProducer):
    """KafkaProducer(transactional_id=...): init_transactions() on creation, then the
    transaction verbs; send_offsets passes the bare group id (kafka-python takes a str where
    Java wants ConsumerGroupMetadata)."""

    def __init__(self, client: KafkaPythonClient, transactional_id: str,
                 transaction_timeout_ms: int | None) -> None:
        self.transactional_id = transactional_id
        config = {**client._common(), "transactional_id": transactional_id,
                  "max_block_ms": TXN_BLOCK_MS, "linger_ms": 5}
        if transaction_timeout_ms is not None:
            config["transaction_timeout_ms"] = transaction_timeout_ms
        try:
            self._producer = KafkaProducer(**config)
        except kerr.KafkaError as exc:
            raise _client_error(exc) from exc
        try:
            self._producer.init_transactions()
        except kerr.KafkaError as exc:
            error = self._error(exc)
            self.close()
            raise error from exc

    def _do(self, fn, *args):
        try:
            return fn(*args)
        except kerr.KafkaError as exc:
            raise self._error(exc) from exc

    def _error(self, exc: Exception) -> ClientError:
        """The broker's error behind a transactional failure. In an error state kafka-python
        raises a plain KafkaError("... in error state: <last error>"); the transaction
        manager keeps the broker's error it came from."""
        code = getattr(exc, "errno", None)
        if code is None:
            manager = getattr(self._producer, "_transaction_manager", None)
            code = getattr(getattr(manager, "last_error", None), "errno", None)
        if code is None:  # "Unexpected error in InitProducerIdResponse: [Error 35] ..."
            found = re.search(r"\[Error (-?\d+)\]", str(exc))
            code = int(found.group(1)) if found else None
        return ClientError(f"{type(exc).__name__}: {exc}", code)

    def begin(self) -> None:
        self._do(self._producer.begin_transaction)

    def produce(self, topic, messages) -> list[Delivery]:
        def go():
            futures = [self._producer.send(topic, value=m.value, key=m.key,
                                           headers=list(m.headers) or None,
                                           partition=m.partition, timestamp_ms=m.timestamp)
                       for m in messages]
            self._producer.flush(timeout=TXN_BLOCK_MS / 1000)
            out = []
            for f in futures:
                md = f.get(timeout=TXN_BLOCK_MS / 1000)
                out.append(Delivery(md.partition, md.offset if md.offset >= 0 else None))
            return out
        return self._do(go)

    def send_offsets(self, group, offsets) -> None:
        self._do(self._producer.send_offsets_to_transaction,
                 {TopicPartition(t, p): OffsetAndMetadata(o, "", -1)
                  for (t, p), o in offsets.items()}, group)

    def commit(self) -> None:
        self._do(self._producer.commit_transaction)

    def abort(self) -> None:
        self._do(self._producer.abort_transaction)

    def close(self) -> None:
        try:
            self._producer.close(timeout=5)
        except Exception:  # noqa: BLE001 - a fenced or orphaned producer may not close cleanly
            pass

