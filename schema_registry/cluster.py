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

from server.app_host import KafkaError, ZooKeeperError
from schema_registry import errors, records
from schema_registry.registry import TOPIC, SchemaRegistry

log = logging.getLogger("trafka.schema_registry")

ZNODE_ROOT = "/trafka/schema_registry"
OFFSET_HEADER = "x-trafka-schemas-offset"
FORWARDED_HEADER = "x-trafka-forwarded"
CATCH_UP_TIMEOUT_S = 10.0


class ClusterLink:
    def __init__(self, registry: SchemaRegistry, url: str) -> None:
        self.registry = registry
        self.host = registry.host
        self.topic = registry.topic
        self.url = url
        self.next_offset = 0  # the next `_schemas` offset to apply
        self._applied = trio.Event()  # set (and replaced) whenever next_offset moves
        self.http = httpx.AsyncClient(timeout=30)

    # ---- where things are ------------------------------------------------------------
    def has_replica(self) -> bool:
        return self.topic.has_replica(0)

    def leader_id(self) -> int | None:
        return self.topic.leader_id(0)

    def is_leader(self) -> bool:
        return self.topic.is_leader(0)

    async def leader_url(self) -> str:
        leader = self.leader_id()
        if leader is None:
            raise errors.RegistryError(500, 50003, f"{TOPIC} has no leader at the moment")
        found = await self.host.znode_get(f"{ZNODE_ROOT}/{leader}")
        if found is None:
            raise errors.RegistryError(500, 50003, f"broker {leader} (leader of {TOPIC}) serves no schema registry")
        return found.decode()

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
        path = f"{ZNODE_ROOT}/{self.host.node_id}"
        while True:
            try:
                await self.host.znode_put(path, self.url.encode())
                return
            except (KafkaError, ZooKeeperError) as exc:  # ZooKeeper away for a moment: never the broker's end
                log.warning("schema registry: publishing %s at %s: %s (retrying)", self.url, path, exc)
                await trio.sleep(1)

    async def _ensure_topic(self) -> None:
        # Kafka's rule for internal topics, with the setting of __consumer_offsets: created
        # smaller, `_schemas` would stay under-replicated for good.
        rf = self.host.setting("offsets.topic.replication.factor")
        warned = False
        while not self.topic.known(0):
            try:
                live = self.host.live_brokers()
                if live >= rf and await self.topic.create(1, rf):
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
        if self.host.shutting_down:
            await trio.sleep_forever()  # nothing more will come; wait for the cancellation
        if not self.has_replica():
            await trio.sleep(0.5)
            return

        def apply(offset: int, key: bytes | None, value: bytes | None) -> None:
            try:
                self.registry.store.apply(*records.decode(key, value))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("%s offset %d: skipping record: %s", TOPIC, offset, exc)

        # A long `_schemas` (a broker catching up at start) must not hold the event loop:
        # read_committed yields between batches, so Kafka requests and the ZooKeeper
        # session go on meanwhile.
        high_watermark = await self.topic.read_committed(0, self.next_offset, apply)
        if self.next_offset < high_watermark:
            self.next_offset = high_watermark
            self._applied.set()
            self._applied = trio.Event()
        await self.topic.wait_for_data(0, 1.0)

    async def wait_applied(self, offset: int, timeout_s: float = CATCH_UP_TIMEOUT_S) -> None:
        """Until this broker's store has every record before `offset` (50002 on timeout)."""
        with trio.move_on_after(timeout_s):
            while self.next_offset < offset:
                if not self.has_replica():
                    return  # no replica here: reads are forwarded anyway
                await self._applied.wait()
            return
        raise errors.RegistryError(500, 50002, f"timed out waiting for {TOPIC} to reach offset {offset}")

    async def wait_caught_up(self) -> None:
        """The leader, before a write: its whole log applied (ids continue after them)."""
        end = self.topic.log_end_offset(0)
        with trio.move_on_after(CATCH_UP_TIMEOUT_S):
            while end is not None and self.next_offset < end:
                await self._applied.wait()
                end = self.topic.log_end_offset(0)
            if end is None:
                raise errors.RegistryError(500, 50003, f"no replica of {TOPIC} here")
            return
        raise errors.RegistryError(500, 50002, f"{TOPIC} not caught up (at {self.next_offset}, log end {end})")

    # ---- forwarding ----------------------------------------------------------------
    def must_forward(self, method: str, path: str) -> bool:
        """Writes (registering, deletes, config and mode changes) go to the leader; reads
        too when this broker has no replica to read."""
        write = method in ("PUT", "DELETE") or (method == "POST" and path.startswith("/subjects/")
                                                and path.endswith("/versions"))
        return not self.is_leader() if write else not self.has_replica()

    async def forward(self, method: str, path_qs: str, body: bytes, content_type: str | None,
                      forwarded: bool) -> tuple[int, bytes, dict[str, str]]:
        """Send the request to the leader's registry; its status, body and headers."""
        if forwarded:
            raise errors.RegistryError(500, 50003, "a forwarded request reached a broker that does not lead "
                                                   f"{TOPIC} (leadership moved); retry")
        url = await self.leader_url()
        headers = {FORWARDED_HEADER: str(self.host.node_id)}
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
