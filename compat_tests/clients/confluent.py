"""confluent-kafka adapter (librdkafka bundled in the wheel): Producer, Consumer, AdminClient."""

from __future__ import annotations

import time
import uuid
from typing import Iterable

import confluent_kafka as ck
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic,
    OffsetSpec, ResourceType)

from compat_tests.clients.base import (
    FETCH_WAIT_MS, HEARTBEAT_MS, LARGE_LIMIT, SESSION_TIMEOUT_MS, TXN_BLOCK_MS, Client,
    ClientError, ClusterMetadata, Delivery, GroupInfo, GroupMember, GroupMemberInfo, Message,
    ThreadedGroupMember, NotSupportedByClient, OffsetOutOfRange, Record, TopicDescription,
    TopicMetadata, TxnProducer, normalize_state, retry_coordinator)

TIMESTAMP_TYPES = {ck.TIMESTAMP_CREATE_TIME: "CreateTime",
                   ck.TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}
ADMIN_TIMEOUT_S = 15.0


def _error(exc: BaseException) -> ClientError:
    err = exc.args[0] if exc.args and isinstance(exc.args[0], ck.KafkaError) else None
    if err is None:
        return ClientError(f"{type(exc).__name__}: {exc}")
    return _from_kafka_error(err)


# librdkafka turns the broker's PRODUCER_FENCED / INVALID_PRODUCER_EPOCH on a transactional
# producer into its local fatal error _FENCED ("Producer fenced by newer instance").
_LOCAL_TO_KAFKA = {ck.KafkaError._FENCED: 90}


def _from_kafka_error(err: ck.KafkaError) -> ClientError:
    code = err.code()
    flags = "".join(f" ({flag})" for flag, on in (("fatal", err.fatal()),
                                                   ("abortable", err.txn_requires_abort()))
                    if on)
    code = _LOCAL_TO_KAFKA.get(code, code)
    return ClientError(f"{err.name()}: {err.str()}{flags}", code if code >= 0 else None)


def _record(msg) -> Record:
    ts_type, ts = msg.timestamp()
    return Record(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                  tuple(msg.headers() or ()), ts, TIMESTAMP_TYPES.get(ts_type, str(ts_type)))


def _result(future):
    try:
        return future.result(timeout=ADMIN_TIMEOUT_S)
    except ck.KafkaException as exc:
        raise _error(exc) from exc


class ConfluentClient(Client):
    name = "confluent-kafka"

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        self._admin: AdminClient | None = None

    def _common(self) -> dict:
        return {"bootstrap.servers": self.bootstrap, "client.id": "compat-confluent",
                "socket.timeout.ms": 15000}

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self._common())
        return self._admin

    def close(self) -> None:
        self._admin = None  # AdminClient has no close(); dropping it destroys the handle

    def _consumer(self, group: str | None, reset: str = "earliest",
                  fetch_wait_ms: int = FETCH_WAIT_MS,
                  isolation_level: str | None = None) -> ck.Consumer:
        # isolation_level None keeps librdkafka's default (read_committed, unlike Kafka's).
        level = {} if isolation_level is None else {"isolation.level": isolation_level}
        return ck.Consumer({
            **level,
            **self._common(),
            # librdkafka insists on a group.id even for assign(); a unique one never joins.
            "group.id": group or f"compat-assign-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "error" if reset == "none" else reset,
            "fetch.wait.max.ms": fetch_wait_ms,
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "max.partition.fetch.bytes": LARGE_LIMIT,
            "fetch.max.bytes": LARGE_LIMIT * 2,
            "receive.message.max.bytes": LARGE_LIMIT * 4,
            "check.crcs": True,
            "enable.partition.eof": False,
        })

    # -- cluster
    def metadata(self, topics=None, allow_auto_create=False) -> ClusterMetadata:
        # The handle type decides auto-creation in librdkafka: a consumer handle with
        # allow.auto.create.topics=false never asks for it, a producer handle does.
        if allow_auto_create:
            handle = ck.Producer(self._common())
        else:
            handle = ck.Consumer({**self._common(), "group.id": "compat-metadata",
                                  "allow.auto.create.topics": False})
        try:
            if topics:
                results = [handle.list_topics(topic=t, timeout=ADMIN_TIMEOUT_S) for t in topics]
            else:
                results = [handle.list_topics(timeout=ADMIN_TIMEOUT_S)]
        except ck.KafkaException as exc:
            raise _error(exc) from exc
        finally:
            if isinstance(handle, ck.Consumer):
                handle.close()
        brokers = {b.id: (b.host, b.port) for b in results[0].brokers.values()}
        out: dict[str, TopicMetadata] = {}
        for md in results:
            for name, t in md.topics.items():
                out[name] = TopicMetadata(t.error.code() if t.error else 0,
                                          {p.id: p.leader for p in t.partitions.values()})
        return ClusterMetadata(brokers, out)

    # -- admin
    def create_topic(self, name, partitions=1, configs=None) -> None:
        futures = self.admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1,
                      config=dict(configs or {}))], request_timeout=ADMIN_TIMEOUT_S)
        _result(futures[name])

    def delete_topic(self, name) -> None:
        _result(self.admin.delete_topics([name], request_timeout=ADMIN_TIMEOUT_S)[name])

    def create_partitions(self, name, total) -> None:
        _result(self.admin.create_partitions([NewPartitions(name, total)],
                                             request_timeout=ADMIN_TIMEOUT_S)[name])

    def describe_configs(self, name) -> dict[str, str | None]:
        resource = ConfigResource(ResourceType.TOPIC, name)
        entries = _result(self.admin.describe_configs([resource])[resource])
        return {k: e.value for k, e in entries.items()}

    def alter_configs(self, name, configs) -> None:
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()])
        futures = self.admin.incremental_alter_configs([resource])
        for f in futures.values():
            _result(f)

    def describe_topic(self, name) -> TopicDescription:
        d = _result(self.admin.describe_topics(ck.TopicCollection([name]),
                                               request_timeout=ADMIN_TIMEOUT_S)[name])
        return TopicDescription(d.name, str(d.topic_id),
                                {p.id: p.leader.id if p.leader else -1 for p in d.partitions})

    def describe_topic_by_id(self, topic_id) -> TopicDescription:
        raise NotSupportedByClient("confluent-kafka's describe_topics takes topic names only "
                                   "(TopicCollection has no ids)")

    # -- data
    def produce(self, topic, messages: Iterable[Message], acks="all", compression="none",
                idempotent=None) -> list[Delivery]:
        acks_cfg = "all" if acks in ("all", -1) else str(int(acks))
        conf = {**self._common(), "acks": acks_cfg, "compression.type": compression,
                "linger.ms": 5, "message.max.bytes": LARGE_LIMIT}
        if idempotent is not None:
            conf["enable.idempotence"] = idempotent
        producer = ck.Producer(conf)
        messages = list(messages)
        reports: list = [None] * len(messages)

        def on_delivery(index):
            def cb(err, msg):
                reports[index] = (err, msg)
            return cb

        for i, m in enumerate(messages):
            kwargs = {"value": m.value, "key": m.key, "on_delivery": on_delivery(i)}
            if m.partition is not None:
                kwargs["partition"] = m.partition
            if m.timestamp is not None:
                kwargs["timestamp"] = m.timestamp
            if m.headers:
                kwargs["headers"] = list(m.headers)
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
        remaining = producer.flush(30)
        if remaining:
            raise ClientError(f"{remaining} messages not delivered within 30 s")
        out = []
        for report in reports:
            if report is None:
                raise ClientError("no delivery report")
            err, msg = report
            if err is not None:
                raise ClientError(f"delivery failed: {err.name()}: {err.str()}",
                                  err.code() if err.code() >= 0 else None)
            offset = msg.offset()  # None or negative when the broker did not say (acks=0)
            out.append(Delivery(msg.partition(), offset if offset is not None and offset >= 0
                                else None))
        return out

    def consume(self, topic, n, *, group=None, start=None, auto_offset_reset="earliest",
                timeout=15.0, fetch_wait_ms=FETCH_WAIT_MS, commit=True,
                isolation_level="read_uncommitted") -> list[Record]:
        consumer = self._consumer(group, auto_offset_reset, fetch_wait_ms, isolation_level)
        out: list[Record] = []
        try:
            if group is not None:
                consumer.subscribe([topic])
            elif start is not None:
                consumer.assign([ck.TopicPartition(topic, p, o) for p, o in sorted(start.items())])
            else:
                md = consumer.list_topics(topic=topic, timeout=ADMIN_TIMEOUT_S)
                offset = ck.OFFSET_END if auto_offset_reset == "latest" else ck.OFFSET_BEGINNING
                consumer.assign([ck.TopicPartition(topic, p, offset)
                                 for p in sorted(md.topics[topic].partitions)])
            deadline = time.monotonic() + timeout
            while len(out) < n and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=n - len(out), timeout=0.2):
                    err = msg.error()
                    if err is None:
                        out.append(_record(msg))
                    elif err.code() == ck.KafkaError._AUTO_OFFSET_RESET:
                        raise OffsetOutOfRange(f"{err.name()}: {err.str()}")
                    elif err.fatal() or not err.retriable() and err.code() not in (
                            ck.KafkaError._TRANSPORT, ck.KafkaError._ALL_BROKERS_DOWN,
                            ck.KafkaError._PARTITION_EOF):
                        raise ClientError(f"{err.name()}: {err.str()}",
                                          err.code() if err.code() >= 0 else None)
            if group is not None and commit and out:
                consumer.commit(asynchronous=False)
            return out
        except ck.KafkaException as exc:
            raise _error(exc) from exc
        finally:
            consumer.close()

    def commit(self, group, topic, offsets) -> None:
        consumer = self._consumer(group)
        try:
            consumer.commit(offsets=[ck.TopicPartition(topic, p, o) for p, o in offsets.items()],
                            asynchronous=False)
        except ck.KafkaException as exc:
            raise _error(exc) from exc
        finally:
            consumer.close()

    def committed(self, group, topic, partitions) -> dict[int, int | None]:
        def fetch():
            consumer = self._consumer(group)
            try:
                return consumer.committed([ck.TopicPartition(topic, p) for p in partitions],
                                          timeout=ADMIN_TIMEOUT_S)
            except ck.KafkaException as exc:
                raise _error(exc) from exc
            finally:
                consumer.close()
        tps = retry_coordinator(fetch)
        return {tp.partition: tp.offset if tp.offset >= 0 else None for tp in tps}

    def list_offsets(self, topic, partition, spec, isolation_level="read_uncommitted"
                     ) -> int | None:
        if spec == "earliest":
            offset_spec = OffsetSpec.earliest()
        elif spec == "latest":
            offset_spec = OffsetSpec.latest()
        else:
            offset_spec = OffsetSpec.for_timestamp(int(spec))
        tp = ck.TopicPartition(topic, partition)
        level = (ck.IsolationLevel.READ_COMMITTED if isolation_level == "read_committed"
                 else ck.IsolationLevel.READ_UNCOMMITTED)
        info = _result(self.admin.list_offsets({tp: offset_spec}, isolation_level=level,
                                               request_timeout=ADMIN_TIMEOUT_S)[tp])
        return info.offset if info.offset >= 0 else None

    def transactional_producer(self, transactional_id, *, transaction_timeout_ms=None
                               ) -> TxnProducer:
        return _TxnProducer(self, transactional_id, transaction_timeout_ms)

    # -- groups
    def group_member(self, topics, group) -> GroupMember:
        return _Member(self._consumer(group), topics)

    def list_groups(self) -> list[str]:
        result = _result(self.admin.list_consumer_groups(request_timeout=ADMIN_TIMEOUT_S))
        if result.errors:
            raise ClientError(f"list_consumer_groups: {result.errors}")
        return [g.group_id for g in result.valid]

    def describe_group(self, group) -> GroupInfo:
        g = _result(self.admin.describe_consumer_groups(
            [group], request_timeout=ADMIN_TIMEOUT_S)[group])
        members = [GroupMemberInfo(
            m.member_id, m.client_id,
            frozenset((tp.topic, tp.partition)
                      for tp in (m.assignment.topic_partitions if m.assignment else [])))
            for m in g.members]
        protocol_type = "" if g.is_simple_consumer_group else "consumer"
        return GroupInfo(g.group_id, normalize_state(g.state.name), protocol_type, members)

    def delete_group(self, group) -> None:
        _result(self.admin.delete_consumer_groups([group], request_timeout=ADMIN_TIMEOUT_S)[group])


class _Member(ThreadedGroupMember):
    def __init__(self, consumer: ck.Consumer, topics: list[str]) -> None:
        super().__init__("ck-member")
        self._consumer = consumer
        self._topics = topics
        self._start()

    def _run(self) -> None:
        try:
            self._consumer.subscribe(self._topics)
            while not self._stop.is_set():
                msgs = self._consumer.consume(num_messages=100, timeout=0.1)
                with self._lock:
                    for msg in msgs:
                        if msg.error() is None:
                            self._records.append(_record(msg))
                        else:
                            self._error = f"{msg.error().name()}: {msg.error().str()}"
                    self._assignment = frozenset(
                        (tp.topic, tp.partition) for tp in self._consumer.assignment())
        finally:
            self._consumer.close()


class _TxnProducer(TxnProducer):
    """Producer({"transactional.id": ...}) with init_transactions() on creation.

    send_offsets_to_transaction wants the consumer's group metadata: a consumer of the group
    that never subscribes gives the metadata of a group id alone (generation -1, no member),
    what Kafka accepts from an application that assigns its partitions itself."""

    def __init__(self, client: ConfluentClient, transactional_id: str,
                 transaction_timeout_ms: int | None) -> None:
        self.transactional_id = transactional_id
        self._client = client
        conf = {**client._common(), "transactional.id": transactional_id, "linger.ms": 5}
        if transaction_timeout_ms is not None:
            conf["transaction.timeout.ms"] = transaction_timeout_ms
            # librdkafka refuses socket.timeout.ms > transaction.timeout.ms + 100
            conf["socket.timeout.ms"] = min(conf["socket.timeout.ms"],
                                            transaction_timeout_ms + 100)
        self._producer = self._do(ck.Producer, conf)
        self._reports: list = []
        self._do(self._producer.init_transactions, TXN_BLOCK_MS / 1000)

    def _do(self, fn, *args):
        try:
            return fn(*args)
        except ck.KafkaException as exc:
            raise _error(exc) from exc

    def begin(self) -> None:
        self._do(self._producer.begin_transaction)

    def produce(self, topic, messages) -> list[Delivery]:
        messages = list(messages)
        reports: list = [None] * len(messages)

        def on_delivery(index):
            def cb(err, msg):
                reports[index] = (err, msg)
            return cb

        for i, m in enumerate(messages):
            kwargs = {"value": m.value, "key": m.key, "on_delivery": on_delivery(i)}
            if m.partition is not None:
                kwargs["partition"] = m.partition
            if m.timestamp is not None:
                kwargs["timestamp"] = m.timestamp
            if m.headers:
                kwargs["headers"] = list(m.headers)
            self._do(lambda: self._producer.produce(topic, **kwargs))
            self._do(self._producer.poll, 0)
        # A fenced producer learns it here: librdkafka raises its fatal error from poll/flush.
        self._do(self._producer.flush, TXN_BLOCK_MS / 1000)
        out = []
        for report in reports:
            if report is None:
                raise ClientError(f"no delivery report within {TXN_BLOCK_MS} ms")
            err, msg = report
            if err is not None:
                raise _from_kafka_error(err)
            out.append(Delivery(msg.partition(), msg.offset()))
        return out

    def send_offsets(self, group, offsets) -> None:
        consumer = self._client._consumer(group)
        try:
            metadata = consumer.consumer_group_metadata()
            self._do(self._producer.send_offsets_to_transaction,
                     [ck.TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                     metadata, TXN_BLOCK_MS / 1000)
        finally:
            consumer.close()

    def commit(self) -> None:
        self._do(self._producer.commit_transaction, TXN_BLOCK_MS / 1000)

    def abort(self) -> None:
        self._do(self._producer.abort_transaction, TXN_BLOCK_MS / 1000)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(2)
            self._producer = None  # dropping the handle destroys it
