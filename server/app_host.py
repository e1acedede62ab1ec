"""The broker as an application running inside its process sees it: the one module of the
broker that such an application imports.

Why a narrow interface: the Schema Registry runs in the broker's process and keeps its
state in a broker-internal topic (`_schemas`), written through the broker's own append path
(CoordinatorLog, as the group and transaction coordinators write theirs) rather than
through a Kafka client. It may not import the broker's internals (an import contract in
pyproject.toml), so everything it uses of the broker is here, named for what it is: the
broker's identity and settings, its internal topic, and — in a ZooKeeper-mode cluster —
where that topic's leader is and a znode to publish its own address under. A change inside
the broker that keeps this surface never breaks the application.

- `AppHost`: one broker, as its applications see it.
- `InternalTopic`: one internal compacted topic of the broker: created, replayed and
  appended to on a single broker; in a cluster, its leader, the local replica's committed
  records, and waiting for more.
- `KafkaError`, `ZooKeeperError`, `BadRecord`: the errors these raise or take.

The REST Proxy needs none of this: it is a Kafka client of its broker (confluent-kafka).
"""

from __future__ import annotations

from typing import Any, Callable

import trio

from wire.records import iter_records

from server.coordinator_log import BadRecord, CoordinatorLog, ReplayCounts
from server.errors import KafkaError
from server.zookeeper.client import ZooKeeperError

__all__ = ["AppHost", "BadRecord", "InternalTopic", "KafkaError", "ZooKeeperError"]


class AppHost:
    """One broker (server.broker.Broker), as an application in its process uses it."""

    def __init__(self, broker) -> None:
        self._broker = broker

    # ---- who and how -----------------------------------------------------------------
    @property
    def node_id(self) -> int:
        return self._broker.node_id

    @property
    def clustered(self) -> bool:
        """A member of a ZooKeeper-mode cluster (else a single broker)."""
        return self._broker.cluster is not None

    @property
    def advertised_host(self) -> str:
        """The host clients are told to connect to (for an application's own URL)."""
        return self._broker.config.advertised[0]

    @property
    def shutting_down(self) -> bool:
        return self._broker.shutting_down

    def setting(self, name: str) -> Any:
        """A broker setting's value (server/config.py's table)."""
        return self._broker.config.get(name)

    def serve_schema_ids(self, registry) -> None:
        """Produce requests check schema ids against `registry` from now on
        (server/schema_validation.py calls its `schema_ids(subject)`), as does the web
        console's record browser."""
        self._broker.schema_registry = registry

    def internal_topic(self, name: str, partitions: int, configs: dict[str, str]) -> InternalTopic:
        return InternalTopic(self._broker, name, partitions, configs)

    # ---- the cluster (ZooKeeper mode only) -------------------------------------------
    def live_brokers(self) -> int:
        return len(self._broker.cluster.cache.brokers)

    async def znode_get(self, path: str) -> bytes | None:
        """The data of the znode at `path`, None when there is none."""
        found = await self._broker.cluster.zk.get(path)
        return None if found is None else found[0]

    async def znode_put(self, path: str, data: bytes) -> None:
        """Create the znode at `path` (and its parents) or overwrite its data."""
        zk = self._broker.cluster.zk
        if await zk.exists(path):
            await zk.set(path, data, -1)
        else:
            await zk.create(path, data, make_parents=True)


class InternalTopic:
    """One internal compacted topic of the broker, written through its append path."""

    def __init__(self, broker, name: str, partitions: int, configs: dict[str, str]) -> None:
        self._broker = broker
        self.name = name
        self._configs = configs
        self._log = CoordinatorLog(broker, name, partitions, configs)

    # ---- a single broker -------------------------------------------------------------
    def ensure(self) -> None:
        """Blocking, at start-up: create the topic when it is missing."""
        self._log.ensure_topic()

    def replay(self, partition: int, on_record: Callable[[int, Any, Any], None]) -> ReplayCounts:
        """Blocking, at start-up: every record of `partition` to `on_record(partition,
        batch header, record)`; a record it refuses with BadRecord is skipped and counted."""
        return self._log.replay_partition(partition, on_record)

    async def append(self, partition: int, entries: list[tuple[bytes, bytes | None]]) -> int:
        """Append (key, value) records, acks=all; the offset of the first (KafkaError)."""
        return await self._log.append(partition, entries)

    # ---- a cluster ---------------------------------------------------------------------
    def leader_id(self, partition: int) -> int | None:
        """The broker leading `partition` as the cluster's metadata says, None without one
        (or while the topic is unknown)."""
        info = self._broker.cluster.cache.partition(self.name, partition)
        return None if info is None or info.leader < 0 else info.leader

    def known(self, partition: int) -> bool:
        """The cluster's metadata has `partition` (the topic exists)."""
        return self._broker.cluster.cache.partition(self.name, partition) is not None

    async def create(self, partitions: int, replication_factor: int) -> bool:
        """Create the topic in the cluster unless ZooKeeper already has it; True when this
        call created it (KafkaError, ZooKeeperError: the next attempt may succeed)."""
        cluster = self._broker.cluster
        if await cluster.zk.exists(f"/brokers/topics/{self.name}"):
            return False
        await cluster.admin.create_topic(self.name, cluster.admin.plan(partitions, replication_factor),
                                         dict(self._configs), 0)
        return True

    def has_replica(self, partition: int) -> bool:
        return (self.name, partition) in self._broker.partitions

    def is_leader(self, partition: int) -> bool:
        """This broker leads its replica of `partition`."""
        local = self._broker.partitions.get((self.name, partition))
        return local is not None and local.leader_id == self._broker.node_id

    def log_end_offset(self, partition: int) -> int | None:
        """The local replica's log end offset, None without a replica here."""
        local = self._broker.partitions.get((self.name, partition))
        return None if local is None else local.log_end_offset

    async def read_committed(self, partition: int, start: int,
                             on_record: Callable[[int, bytes | None, bytes | None], None]) -> int:
        """The local replica's committed records from `start` (those below the high
        watermark, which no truncation can take away) to `on_record(offset, key, value)`;
        returns the high watermark they were read to. Yields to the event loop between
        batches, so a long topic never holds the broker's requests up."""
        local = self._broker.partitions[(self.name, partition)]
        high_watermark = local.high_watermark
        if start < high_watermark:
            log = local.log
            first = max(start, log.log_start_offset)
            for header, data in log.iter_batches(first):
                if header.base_offset >= high_watermark:
                    break
                await trio.sleep(0)
                if not header.is_control:
                    for record in iter_records(data):
                        if first <= record.offset < high_watermark:
                            on_record(record.offset, record.key, record.value)
        return high_watermark

    async def wait_for_data(self, partition: int, timeout_s: float) -> None:
        """Until the local replica's high watermark moves, the timeout passes or the broker
        shuts down (the timeout alone when the replica has just left this broker)."""
        local = self._broker.partitions.get((self.name, partition))
        if local is None:
            await trio.sleep(timeout_s)
            return
        await self._broker.wait_for_data([local], timeout_s, purgatory=None)
