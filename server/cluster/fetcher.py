"""Replica fetchers: followers copy their leaders' logs (Kafka's ReplicaFetcherThread;
CLUSTER.md §4.2, §4.4).

One task per leader broker fetches every partition this broker follows there, with Fetch
v12 as a replica (replica_id = this broker): fetch_offset = the local log end offset,
current_leader_epoch (a fetch from a deposed leader's follower is fenced) and
last_fetched_epoch, the epoch of the last local batch. The leader answers either records,
which are appended as they are (offsets and epochs kept, `PartitionLog.append_as_follower`),
or a `diverging_epoch`: the local log has a tail the leader does not, and the follower
truncates to where the two agree (leader-epoch truncation, KIP-101/KIP-279/KIP-320) before
fetching again — no divergent tail survives. The follower's high watermark is the leader's,
capped at its own log end.
"""

from __future__ import annotations

import logging

import trio

from wire.errors import ErrorCode
from wire.records import peek_batch_size
from wire.registry import ApiKey

log = logging.getLogger("trafka.fetcher")
E = ErrorCode
FETCH_VERSION = 12


def whole_batches(records: bytes, start_offset: int) -> bytes:
    """The complete batches of a fetch answer, without those wholly before `start_offset`."""
    if not records:
        return b""
    pos = 0
    begin = None
    end = 0
    mv = memoryview(records)
    while True:
        size = peek_batch_size(mv, pos)
        if size is None or pos + size > len(records):
            break
        base = int.from_bytes(mv[pos:pos + 8], "big", signed=True)
        last_delta = int.from_bytes(mv[pos + 23:pos + 27], "big", signed=True)
        if base + last_delta >= start_offset and begin is None:
            begin = pos
        pos += size
        end = pos
    if begin is None:
        return b""
    return bytes(mv[begin:end])


class ReplicaFetcherManager:
    def __init__(self, node) -> None:
        self.node = node
        self.by_leader: dict[int, set] = {}
        self._tasks: dict[int, trio.CancelScope] = {}
        self._changed = trio.Event()
        self._wake: dict[int, trio.Event] = {}
        cfg = node.config
        self.wait_ms = cfg.get("replica.fetch.wait.max.ms")
        self.max_bytes = cfg.get("replica.fetch.max.bytes")
        self.backoff_s = cfg.get("replica.fetch.backoff.ms") / 1000

    def add(self, partitions: list) -> None:
        for partition in partitions:
            self._discard(partition)
            if partition.leader_id >= 0:
                self.by_leader.setdefault(partition.leader_id, set()).add(partition)
        self._changed.set()

    def remove(self, partitions: list) -> None:
        for partition in partitions:
            self._discard(partition)
        self._changed.set()

    def _discard(self, partition) -> None:
        for leader, parts in list(self.by_leader.items()):
            parts.discard(partition)
            if not parts:
                del self.by_leader[leader]

    def leaders_changed(self) -> None:
        for event in self._wake.values():
            event.set()

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                for leader in list(self._tasks):
                    if leader not in self.by_leader:
                        self._tasks.pop(leader).cancel()
                for leader in self.by_leader:
                    if leader not in self._tasks:
                        scope = trio.CancelScope()
                        self._tasks[leader] = scope
                        nursery.start_soon(self._fetch_loop, leader, scope)
                self._changed = trio.Event()
                await self._changed.wait()

    async def _sleep(self, leader: int, seconds: float) -> None:
        event = self._wake[leader] = trio.Event()
        with trio.move_on_after(seconds):
            await event.wait()

    async def _fetch_loop(self, leader: int, scope: trio.CancelScope) -> None:
        node = self.node
        with scope:
            while self.by_leader.get(leader):
                partitions = [p for p in self.by_leader.get(leader, ()) if p.leader_id == leader]
                if not partitions:
                    await self._sleep(leader, self.backoff_s)
                    continue
                if not node.cache.alive(leader):
                    await self._sleep(leader, self.backoff_s)
                    continue
                body = self._request(partitions)
                try:
                    client = node.channels.client(leader)
                    answer = await client.request(ApiKey.FETCH, FETCH_VERSION, body, self.wait_ms / 1000 + 30)
                except Exception as exc:
                    log.info("fetch from broker %d failed: %r; retrying in %.1fs", leader, exc, self.backoff_s)
                    await self._sleep(leader, self.backoff_s)
                    continue
                if answer.get("error_code", 0) != E.NONE:
                    log.info("fetch from broker %d: %s", leader, ErrorCode(answer["error_code"]).name)
                    await self._sleep(leader, self.backoff_s)
                    continue
                by_name = {(p.topic, p.index): p for p in partitions}
                backoff = False
                for topic in answer["responses"]:
                    for part in topic["partitions"]:
                        partition = by_name.get((topic["topic"], part["partition_index"]))
                        if partition is None or partition.leader_id != leader:
                            continue
                        try:
                            if not await self._process(partition, part):
                                backoff = True
                        except Exception:
                            log.exception("%s: applying the fetch from broker %d failed", partition.name, leader)
                            backoff = True
                if backoff:
                    await self._sleep(leader, self.backoff_s)

    def _request(self, partitions: list) -> dict:
        by_topic: dict[str, list[dict]] = {}
        for p in partitions:
            plog = p.log
            last_epoch = plog.leader_epoch_cache.latest_epoch
            by_topic.setdefault(p.topic, []).append({
                "partition": p.index, "current_leader_epoch": p.leader_epoch, "fetch_offset": plog.log_end_offset,
                "last_fetched_epoch": -1 if last_epoch is None else last_epoch,
                "log_start_offset": plog.log_start_offset, "partition_max_bytes": self.max_bytes})
        return {"cluster_id": None, "replica_id": self.node.node_id, "max_wait_ms": self.wait_ms, "min_bytes": 1,
                "max_bytes": 10 * 1024 * 1024, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                "forgotten_topics_data": [], "rack_id": ""}

    async def _process(self, partition, part: dict) -> bool:
        """Apply one partition's answer; False asks for a back-off."""
        code = part["error_code"]
        if code != E.NONE:
            if code == E.OFFSET_OUT_OF_RANGE:
                log.warning("%s: fetch offset %d out of range at the leader (log start %d)", partition.name,
                            partition.log.log_end_offset, part.get("log_start_offset", -1))
            else:
                log.info("%s: fetch from leader %d: %s", partition.name, partition.leader_id, ErrorCode(code).name)
            return False
        diverging = part.get("diverging_epoch") or {}
        if diverging.get("epoch", -1) >= 0:
            await self._truncate(partition, diverging["epoch"], diverging["end_offset"])
            return True
        records = part.get("records") or b""
        if records:
            data = whole_batches(bytes(records), partition.log.log_end_offset)
            if data:
                await partition.append_as_follower(bytearray(data))
        partition.set_follower_high_watermark(part["high_watermark"])
        leader_start = part.get("log_start_offset", -1)
        plog = partition.log
        if leader_start > plog.log_start_offset and leader_start <= plog.log_end_offset:
            # DeleteRecords or retention at the leader: followers follow (Kafka's
            # maybeIncrementLogStartOffset on the follower).
            await trio.to_thread.run_sync(lambda: plog.delete_records_before(leader_start))
        return True

    async def _truncate(self, partition, leader_epoch: int, leader_end: int) -> None:
        """Truncate to where the local log and the leader's agree (CLUSTER.md §4.4)."""
        plog = partition.log
        leo = plog.log_end_offset
        local_epoch, local_end = plog.leader_epoch_cache.end_offset_for(leader_epoch, leo)
        if local_epoch < 0:
            target = min(leader_end, leo)
        elif local_epoch == leader_epoch:
            target = min(local_end, leader_end, leo)
        else:
            target = min(local_end, leo)
        if target < leo:
            log.info("%s: truncating from %d to %d (leader epoch %d ends at %d)", partition.name, leo, target,
                     leader_epoch, leader_end)
            await partition.truncate_to(target)
        else:
            # The log keeps everything, but an epoch this broker led without writing a batch
            # (its start entered the cache at the log end, KAFKA-7415) is one the leader never
            # had: asked for it again, the leader would answer the same forever. Kafka's
            # UnifiedLog.truncateTo trims the cache at the log end in this case too. In the
            # event loop, not a thread: a LeaderAndIsr making this broker leader (which writes
            # its new epoch at the log end) cannot land in between and lose its entry.
            cache = plog.leader_epoch_cache
            entries = cache.epoch_entries()
            if entries and entries[-1].start_offset >= leo and not partition.is_leader:
                log.info("%s: dropping leader epoch %d, which has no records (leader epoch %d ends at %d)",
                         partition.name, entries[-1].epoch, leader_epoch, leader_end)
                cache.truncate_from_end(leo)
