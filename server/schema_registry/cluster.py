"""The registry in a ZooKeeper-mode cluster: every broker answers reads, writes go through
the leader of `_schemas`.

How (the simpler correct choice): `_schemas` is an ordinary replicated topic (one
partition, replication factor offsets.topic.replication.factor, compacted), created by the first
registry that finds it missing. Each broker with a replica tails its local copy up to the
high watermark — committed records only, so nothing it applied can be truncated away —
and applies them to its `Store`. A write arriving at a broker that does not lead
`_schemas` is forwarded over HTTP to the leader's registry (each broker publishes its
registry URL in ZooKeeper at `/trafka/schema_registry/<id>`), which appends through the
broker's append path (acks=all through CoordinatorLog) and answers with the offset after
its write (`X-Trafka-Schemas-Offset`); the forwarding broker waits until its own tail
passed it before answering, so a client reads its write back from either broker. A broker
without a replica forwards reads too. The leader writes only once it has applied its
whole log, so ids and versions continue from everything committed before.
"""

from __future__ import annotations

import logging

import httpx
import trio

from server.cluster.zk import ZooKeeperError
from server.errors import KafkaError
from server.schema_registry import errors, records
from server.schema_registry.registry import TOPIC, SchemaRegistry

log = logging.getLogger("trafka.schema_registry")

ZNODE_ROOT = "/trafka/schema_registry"
OFFSET_HEADER = "x-trafka-schemas-offset"
FORWARDED_HEADER = "x-trafka-forwarded"
CATCH_UP_TIMEOUT_S = 10.0


class ClusterLink:
    def __init__(self, registry: SchemaRegistry, url: str) -> None:
        self.registry = registry
        self.broker = registry.broker
        self.url = url
        self.next_offset = 0  # the next `_schemas` offset to apply
        self._applied = trio.Event()  # set (and replaced) whenever next_offset moves
        self.http = httpx.AsyncClient(timeout=30)

    # ---- where things are ------------------------------------------------------------
    def local(self):
        return self.broker.partitions.get((TOPIC, 0))

    def leader_id(self) -> int | None:
        info = self.broker.cluster.cache.partition(TOPIC, 0)
        return None if info is None or info.leader < 0 else info.leader

    def is_leader(self) -> bool:
        local = self.local()
        return local is not None and local.leader_id == self.broker.node_id

    async def leader_url(self) -> str:
        leader = self.leader_id()
        if leader is None:
            raise errors.RegistryError(500, 50003, f"{TOPIC} has no leader at the moment")
        found = await self.broker.cluster.zk.get(f"{ZNODE_ROOT}/{leader}")
        if found is None:
            raise errors.RegistryError(500, 50003, f"broker {leader} (leader of {TOPIC}) serves no schema registry")
        return found[0].decode()

    # ---- background ----------------------------------------------------------------
    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await self._publish()
        await self._ensure_topic()
        while True:
            try:
                await self._tail_once()
            except Exception:  # keep tailing; the next round retries
                log.exception("schema registry: tailing %s failed", TOPIC)
                await trio.sleep(1)

    async def _publish(self) -> None:
        path = f"{ZNODE_ROOT}/{self.broker.node_id}"
        zk = self.broker.cluster.zk
        while True:
            try:
                if await zk.exists(path):
                    await zk.set(path, self.url.encode(), -1)
                else:
                    await zk.create(path, self.url.encode(), make_parents=True)
                return
            except (KafkaError, ZooKeeperError) as exc:  # ZooKeeper away for a moment: never the broker's end
                log.warning("schema registry: publishing %s at %s: %s (retrying)", self.url, path, exc)
                await trio.sleep(1)

    async def _ensure_topic(self) -> None:
        cluster = self.broker.cluster
        # Kafka's rule for internal topics, with the setting of __consumer_offsets: created
        # smaller, `_schemas` would stay under-replicated for good.
        rf = self.broker.config.get("offsets.topic.replication.factor")
        warned = False
        while cluster.cache.partition(TOPIC, 0) is None:
            try:
                live = len(cluster.cache.brokers)
                if live >= rf and not await cluster.zk.exists(f"/brokers/topics/{TOPIC}"):
                    await cluster.admin.create_topic(TOPIC, cluster.admin.plan(1, rf), {"cleanup.policy": "compact"}, 0)
                    log.info("schema registry: created %s with replication factor %d", TOPIC, rf)
                elif live < rf and not warned:
                    warned = True
                    log.warning("schema registry: not creating %s yet: %d live brokers do not meet "
                                "offsets.topic.replication.factor=%d", TOPIC, live, rf)
            except (KafkaError, ZooKeeperError) as exc:
                # Another broker's registry created it a moment before (TOPIC_ALREADY_EXISTS),
                # or ZooKeeper is away for a moment: the next round sees the topic or retries.
                log.info("schema registry: creating %s: %s (retrying)", TOPIC, exc)
            await trio.sleep(0.5)

    async def _tail_once(self) -> None:
        """Apply the local replica's committed records past `next_offset`, then wait for more."""
        if self.broker.shutting_down:
            await trio.sleep_forever()  # nothing more will come; wait for the cancellation
        partition = self.local()
        if partition is None:
            await trio.sleep(0.5)
            return
        high_watermark = partition.high_watermark
        if self.next_offset < high_watermark:
            plog = partition.log
            start = max(self.next_offset, plog.log_start_offset)
            for header, data in plog.iter_batches(start):
                if header.base_offset >= high_watermark:
                    break
                # A long `_schemas` (a broker catching up at start) must not hold the event
                # loop: the Kafka requests and the ZooKeeper session go on meanwhile.
                await trio.sleep(0)
                if not header.is_control:
                    from wire.records import iter_records

                    for record in iter_records(data):
                        if start <= record.offset < high_watermark:
                            try:
                                self.registry.store.apply(*records.decode(record.key, record.value))
                            except (ValueError, KeyError, TypeError) as exc:
                                log.warning("%s offset %d: skipping record: %s", TOPIC, record.offset, exc)
            self.next_offset = high_watermark
            self._applied.set()
            self._applied = trio.Event()
        await self.broker.wait_for_data([partition], 1.0, purgatory=None)

    async def wait_applied(self, offset: int, timeout_s: float = CATCH_UP_TIMEOUT_S) -> None:
        """Until this broker's store has every record before `offset` (50002 on timeout)."""
        with trio.move_on_after(timeout_s):
            while self.next_offset < offset:
                if self.local() is None:
                    return  # no replica here: reads are forwarded anyway
                await self._applied.wait()
            return
        raise errors.RegistryError(500, 50002, f"timed out waiting for {TOPIC} to reach offset {offset}")

    async def wait_caught_up(self) -> None:
        """The leader, before a write: its whole log applied (ids continue after them)."""
        partition = self.local()
        if partition is None:
            raise errors.RegistryError(500, 50003, f"no replica of {TOPIC} here")
        with trio.move_on_after(CATCH_UP_TIMEOUT_S):
            while self.next_offset < partition.log_end_offset:
                await self._applied.wait()
            return
        raise errors.RegistryError(500, 50002, f"{TOPIC} not caught up (at {self.next_offset}, log end "
                                               f"{partition.log_end_offset})")

    # ---- forwarding ----------------------------------------------------------------
    def must_forward(self, method: str, path: str) -> bool:
        """Writes (registering, deletes, config and mode changes) go to the leader; reads
        too when this broker has no replica to read."""
        write = method in ("PUT", "DELETE") or (method == "POST" and path.startswith("/subjects/")
                                                and path.endswith("/versions"))
        return not self.is_leader() if write else self.local() is None

    async def forward(self, method: str, path_qs: str, body: bytes, content_type: str | None,
                      forwarded: bool) -> tuple[int, bytes, dict[str, str]]:
        """Send the request to the leader's registry; its status, body and headers."""
        if forwarded:
            raise errors.RegistryError(500, 50003, "a forwarded request reached a broker that does not lead "
                                                   f"{TOPIC} (leadership moved); retry")
        url = await self.leader_url()
        headers = {FORWARDED_HEADER: str(self.broker.node_id)}
        if content_type:
            headers["content-type"] = content_type
        try:
            answer = await self.http.request(method, url + path_qs, content=body, headers=headers)
        except httpx.HTTPError as exc:
            log.warning("schema registry: forwarding %s %s to %s failed: %s", method, path_qs, url, exc)
            raise errors.RegistryError(500, 50003, f"Error while forwarding the request to the leader: {exc}") \
                from None
        offset = answer.headers.get(OFFSET_HEADER)
        if offset is not None and answer.status_code < 300:
            await self.wait_applied(int(offset))
        return answer.status_code, answer.content, {k: v for k, v in answer.headers.items()
                                                    if k in ("content-type", OFFSET_HEADER)}
