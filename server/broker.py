"""The broker's state: topics and logs, producers, groups, and the data-arrived signal.

How this works: one `Broker` per process, shared by every connection task. Handlers read
and change state through it. Storage calls are blocking; the ones that can block for long
(fsync under `trafka.fsync.policy=always`, retention, compaction, opening logs) run in a
worker thread, the rest (page-cache appends and reads) run inline because a thread hop
costs more than they do. Appends to one partition are serialized by a per-partition lock,
so a thread append and an inline one never interleave.

Fetch long-polls wait on `wait_for_data`: a produce to a partition wakes every fetch that
waits on it, so a consumer sees a message as soon as it is written (Tansu's poll loop,
PERF.md, is what this avoids).
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from dataclasses import dataclass

import trio

from storage import LogConfig, LogManager, TopicMeta
from storage import errors as storage_errors
from wire.errors import ErrorCode

from server.config import BrokerConfig
from server.errors import InvalidTopic, KafkaError
from server.groups import GroupCoordinator
from server.producers import ProducerStateManager

log = logging.getLogger("trafka.broker")

TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def validate_topic_name(name: str | None) -> None:
    """Kafka's rules (Topic.validate): 1-249 chars of [a-zA-Z0-9._-], not '.' or '..'."""
    if not name:
        raise InvalidTopic("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopic(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopic(f"topic name is {len(name)} characters, the limit is {MAX_TOPIC_NAME}")
    if not TOPIC_NAME.match(name):
        raise InvalidTopic(f"topic name {name!r} has characters outside [a-zA-Z0-9._-]")


@dataclass
class AppendOutcome:
    base_offset: int
    log_append_time: int
    log_start_offset: int


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.data_dir = config.data_dir
        self.cluster_id = config.raw("cluster.id")
        self.logs = LogManager(self.data_dir, self.topic_defaults())
        self.producers = ProducerStateManager(self.data_dir)
        self.started_ms = now_ms()
        self.shutting_down = False
        self._waiters: dict[tuple[str, int], set[trio.Event]] = {}
        self._locks: dict[tuple[str, int], trio.Lock] = {}
        self.groups = GroupCoordinator(self)
        self._topic_ids: dict[uuid.UUID, str] = {}

    # ---- lifecycle ----------------------------------------------------------------
    def topic_defaults(self) -> LogConfig:
        """The broker-level topic defaults (log.* settings) as a storage LogConfig."""
        cfg = self.config
        configs = {
            "retention.ms": cfg.raw("log.retention.ms"),
            "retention.bytes": cfg.raw("log.retention.bytes"),
            "segment.bytes": cfg.raw("log.segment.bytes"),
            "segment.ms": cfg.raw("log.roll.ms"),
            "cleanup.policy": cfg.raw("log.cleanup.policy"),
            "max.message.bytes": cfg.raw("message.max.bytes"),
            "message.timestamp.type": cfg.raw("log.message.timestamp.type"),
            "trafka.fsync.policy": cfg.raw("trafka.fsync.policy"),
            "trafka.preallocate.bytes": cfg.raw("trafka.preallocate.bytes"),
        }
        if cfg.raw("trafka.fsync.policy") == "interval":
            # Only then do the flush settings mean anything; otherwise topics show Kafka's
            # defaults (Long.MAX_VALUE) in DescribeConfigs.
            configs["flush.ms"] = cfg.raw("log.flush.interval.ms")
            configs["flush.messages"] = cfg.raw("log.flush.interval.messages")
        return LogConfig.from_kafka(configs)

    def _load_cluster_id(self) -> None:
        path = self.data_dir / "meta.properties"
        stored = {}
        if path.exists():
            for line in path.read_text().splitlines():
                if "=" in line and not line.startswith("#"):
                    key, value = line.split("=", 1)
                    stored[key.strip()] = value.strip()
        if not self.cluster_id:
            self.cluster_id = stored.get("cluster.id") or uuid.uuid4().hex[:22]
        if stored.get("cluster.id") != self.cluster_id or stored.get("node.id") != str(self.node_id):
            self.data_dir.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(f"version=1\ncluster.id={self.cluster_id}\nnode.id={self.node_id}\n")
            tmp.replace(path)

    def open(self) -> None:
        """Blocking start-up: open and recover logs, rebuild producer state."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._load_cluster_id()
        self.logs.open()
        for name, meta in self.logs.topics.items():
            self._topic_ids[meta.topic_id] = name
            for partition in range(meta.partitions):
                self._rebuild_producers((name, partition))
        self.producers.load()
        self.groups.load()

    def _rebuild_producers(self, tp: tuple[str, int]) -> None:
        plog = self.logs.log(*tp)
        for header, _data in plog.iter_batches(plog.log_start_offset):
            if header.producer_id >= 0:
                self.producers.record(tp, header, header.base_offset)

    def close(self) -> None:
        self.groups.close()
        self.logs.close()

    async def run_background(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Periodic storage duties, in worker threads so the event loop never waits on disk:
        the timer half of the interval fsync policy (twice a second), closing deleted
        segment files (every second, so freed space comes back promptly), and retention
        plus compaction every log.retention.check.interval.ms."""
        task_status.started()
        retention_every = max(self.config.get("log.retention.check.interval.ms"), 100) / 1000
        tick = 0.5
        next_retention = trio.current_time() + retention_every
        next_sweep = trio.current_time() + 1.0
        while True:
            await trio.sleep(tick)
            try:
                # Any topic may choose the interval policy, so every log gets the chance.
                await trio.to_thread.run_sync(self.logs.run_flush, now_ms())
                if trio.current_time() >= next_sweep:
                    next_sweep = trio.current_time() + 1.0
                    await trio.to_thread.run_sync(self.logs.sweep)
                if trio.current_time() >= next_retention:
                    next_retention = trio.current_time() + retention_every
                    await trio.to_thread.run_sync(self.logs.run_retention, now_ms())
                    await trio.to_thread.run_sync(self.logs.run_compaction, now_ms())
            except Exception:  # keep serving; the next round retries
                log.exception("background storage duty failed")

    # ---- topics -------------------------------------------------------------------
    @property
    def topics(self) -> dict[str, TopicMeta]:
        return self.logs.topics

    def topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        return self._topic_ids.get(topic_id)

    def total_partitions(self) -> int:
        return sum(meta.partitions for meta in self.logs.topics.values())

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> TopicMeta:
        validate_topic_name(name)
        if partitions <= 0:
            raise KafkaError(f"partitions must be positive, got {partitions}", ErrorCode.INVALID_PARTITIONS)
        limit = self.config.get("trafka.max.partitions")
        if self.total_partitions() + partitions > limit:
            raise KafkaError(
                f"creating {partitions} partitions would exceed trafka.max.partitions={limit}",
                ErrorCode.POLICY_VIOLATION,
            )
        meta = self.logs.create_topic(name, partitions, configs or {})
        self._topic_ids[meta.topic_id] = name
        log.info("created topic %s with %d partitions %s", name, partitions, configs or "")
        return meta

    def maybe_auto_create(self, name: str) -> TopicMeta | None:
        """Create an unknown topic if the broker allows it (Metadata/Produce)."""
        if not self.config.get("auto.create.topics.enable"):
            return None
        try:
            return self.create_topic(name, self.config.get("num.partitions"))
        except storage_errors.TopicExists:
            return self.logs.topics.get(name)

    def delete_topic(self, name: str) -> None:
        meta = self.logs.topics.get(name)
        if meta is None:
            raise storage_errors.UnknownTopicOrPartition(name)
        for partition in range(meta.partitions):
            self.producers.forget_partition((name, partition))
            self._wake((name, partition))
        self.logs.delete_topic(name)
        self._topic_ids.pop(meta.topic_id, None)
        log.info("deleted topic %s", name)

    # ---- data path ----------------------------------------------------------------
    def _lock(self, tp: tuple[str, int]) -> trio.Lock:
        lock = self._locks.get(tp)
        if lock is None:
            lock = self._locks[tp] = trio.Lock()
        return lock

    async def append(self, tp: tuple[str, int], batch: bytearray, record_count: int) -> AppendOutcome:
        """Write validated batches to a partition; fsync first when the policy says so."""
        plog = self.logs.log(*tp)
        lock = self._lock(tp)
        if plog.config.flush_policy != "always" and not lock.locked():
            # An inline append has no await, so nothing can interleave with it: taking the
            # lock would only cost two scheduler passes (measured: p99 halved at 1 000
            # partitions without it).
            result = plog.append(batch, record_count)
        else:
            async with lock:
                if plog.config.flush_policy == "always":
                    result = await trio.to_thread.run_sync(plog.append, batch, record_count)
                else:
                    result = plog.append(batch, record_count)
        self._wake(tp)
        base_offset, _last_offset, log_append_time_ms, log_start_offset = result
        return AppendOutcome(base_offset, log_append_time_ms, log_start_offset)

    def _wake(self, tp: tuple[str, int]) -> None:
        waiters = self._waiters.pop(tp, None)
        if waiters:
            for event in waiters:
                event.set()

    def wake_all(self) -> None:
        for tp in list(self._waiters):
            self._wake(tp)

    async def wait_for_data(self, tps: list[tuple[str, int]], timeout_s: float) -> None:
        """Sleep until one of `tps` gets new data, the timeout passes, or shutdown begins."""
        if timeout_s <= 0 or self.shutting_down:
            return
        event = trio.Event()
        for tp in tps:
            self._waiters.setdefault(tp, set()).add(event)
        try:
            with trio.move_on_after(timeout_s):
                await event.wait()
        finally:
            for tp in tps:
                waiters = self._waiters.get(tp)
                if waiters is not None:
                    waiters.discard(event)
                    if not waiters:
                        del self._waiters[tp]
