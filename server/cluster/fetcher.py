"""Replica fetchers: followers copy their leaders' logs (Kafka's ReplicaFetcherThread;
docs/design/replication.md#follower-fetching).

One task per leader broker fetches every partition this broker follows there, with Fetch
v12 as a replica (replica_id = this broker): fetch_offset = the local log end offset,
current_leader_epoch (a fetch from a deposed leader's follower is fenced) and
last_fetched_epoch, the epoch of the last local batch. The leader answers either records,
which are appended as they are (offsets and epochs kept, `PartitionLog.append_as_follower`),
or a `diverging_epoch`: the local log has a tail the leader does not, and the follower
truncates to where the two agree (leader-epoch truncation, KIP-101/KIP-279/KIP-320) before
fetching again — no divergent tail survives. The follower's high watermark is the leader's,
capped at its own log end.

This loop is half of every acks=all round trip (leader append -> this fetch's answer ->
append here -> the next fetch, which confirms the new log end offset to the leader), so it
does no more than it must: the request and the response go through the fetcher's own
Fetch v12 codec (wire/fetch_codec.py), the records are copied once (out of the
response frame into the appended buffer), and the next fetch is sent as soon as the answer
is applied.
"""

from __future__ import annotations

import logging
import struct

import trio

from wire.errors import ErrorCode
from wire.records import peek_batch_size
from wire.registry import ApiKey

from wire.fetch_codec import VERSION as FETCH_VERSION
from wire.fetch_codec import FetchedPartition, ReplicaFetchRequest, decode_fetch_response

log = logging.getLogger("trafka.fetcher")
E = ErrorCode
_BASE = struct.Struct(">q")
_LAST_DELTA = struct.Struct(">i")
LONG_MAX = (1 << 63) - 1
_THROTTLED_PAUSE_S = 0.1


def whole_batches(records, start_offset: int) -> bytearray:
    """The complete batches of a fetch answer, without those wholly before `start_offset`,
    as one bytearray: the one copy the follower makes (out of the response frame, into
    what it appends). `records` is any buffer (the answer's view of the frame)."""
    if not records:
        return bytearray()
    mv = memoryview(records)
    total = len(mv)
    pos = 0
    begin = None
    end = 0
    while True:
        size = peek_batch_size(mv, pos)
        if size is None or pos + size > total:
            break
        if begin is None:
            base, last_delta = _BASE.unpack_from(mv, pos)[0], _LAST_DELTA.unpack_from(mv, pos + 23)[0]
            if base + last_delta >= start_offset:
                begin = pos
        pos += size
        end = pos
    if begin is None:
        return bytearray()
    return bytearray(mv[begin:end])


def fetcher_id(topic: str, partition: int, fetchers: int) -> int:
    """Kafka's AbstractFetcherManager.getFetcherId: which of a source broker's
    `num.replica.fetchers` fetchers copies this partition."""
    from server.coordinator_log import java_string_hash

    h = (31 * java_string_hash(topic) + partition) & 0xFFFFFFFF
    if h & 0x80000000:
        h -= 1 << 32
    return (h & 0x7FFFFFFF) % fetchers


class ReplicaFetcherManager:
    """The followers' fetchers: `num.replica.fetchers` per source broker, each a task with a
    connection of its own (Kafka's fetcher threads), each copying the partitions hashed to
    it. Keys are (leader, fetcher id)."""

    def __init__(self, node) -> None:
        self.node = node
        self.by_leader: dict[tuple[int, int], set] = {}
        self._tasks: dict[tuple[int, int], trio.CancelScope] = {}
        self._changed = trio.Event()
        self._wake: dict[tuple[int, int], trio.Event] = {}
        self._encoders: dict[str, ReplicaFetchRequest] = {}  # by client id
        cfg = node.config
        self.wait_ms = cfg.get("replica.fetch.wait.max.ms")
        self.max_bytes = cfg.get("replica.fetch.max.bytes")
        self.backoff_s = cfg.get("replica.fetch.backoff.ms") / 1000
        self.fetchers = max(1, cfg.get("num.replica.fetchers"))
        self.quota = node.follower_quota
        self.in_sync: dict[tuple[str, int], bool] = {}  # caught up to the leader's HW at the last fetch

    def add(self, partitions: list) -> None:
        for partition in partitions:
            self._discard(partition)
            if partition.leader_id >= 0:
                fid = fetcher_id(partition.topic, partition.index, self.fetchers) if self.fetchers > 1 else 0
                self.by_leader.setdefault((partition.leader_id, fid), set()).add(partition)
        self._changed.set()

    def resize(self, fetchers: int) -> None:
        """`num.replica.fetchers` changed (a dynamic broker config): spread the partitions
        over the new number of fetchers per source broker (Kafka's resizeThreadPool)."""
        fetchers = max(1, fetchers)
        if fetchers == self.fetchers:
            return
        self.fetchers = fetchers
        self.add([p for parts in list(self.by_leader.values()) for p in parts])
        log.info("replica fetchers per source broker now %d", fetchers)

    def remove(self, partitions: list) -> None:
        for partition in partitions:
            self._discard(partition)
        self._changed.set()

    def _discard(self, partition) -> None:
        for key, parts in list(self.by_leader.items()):
            parts.discard(partition)
            if not parts:
                del self.by_leader[key]

    def leaders_changed(self) -> None:
        for event in self._wake.values():
            event.set()

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                for key in list(self._tasks):
                    if key not in self.by_leader:
                        self._tasks.pop(key).cancel()
                for key in self.by_leader:
                    if key not in self._tasks:
                        scope = trio.CancelScope()
                        self._tasks[key] = scope
                        nursery.start_soon(self._fetch_loop, key, scope)
                self._changed = trio.Event()
                await self._changed.wait()

    async def _sleep(self, key: tuple[int, int], seconds: float) -> None:
        event = self._wake[key] = trio.Event()
        with trio.move_on_after(seconds):
            await event.wait()

    async def _fetch_loop(self, key: tuple[int, int], scope: trio.CancelScope) -> None:
        node = self.node
        leader, fid = key
        timeout_s = self.wait_ms / 1000 + 30
        with scope:
            while self.by_leader.get(key):
                partitions = [p for p in self.by_leader.get(key, ()) if p.leader_id == leader]
                if not partitions:
                    await self._sleep(key, self.backoff_s)
                    continue
                if self.quota.limit < LONG_MAX:
                    partitions = [p for p in partitions if not self._throttle(p)]
                    if not partitions:
                        await self._sleep(key, _THROTTLED_PAUSE_S)
                        continue
                if not node.cache.alive(leader):
                    await self._sleep(key, self.backoff_s)
                    continue
                try:
                    client = node.channels.client(leader, fid)
                    encoder = self._encoder(client.client_id)
                    topics = self._topics(partitions)
                    error_code, answer = await client.request(
                        ApiKey.FETCH, FETCH_VERSION, None, timeout_s,
                        encode=lambda correlation_id: encoder.encode(correlation_id, topics),
                        decode=decode_fetch_response)
                except Exception as exc:
                    log.info("fetch from broker %d failed: %r; retrying in %.1fs", leader, exc, self.backoff_s)
                    await self._sleep(key, self.backoff_s)
                    continue
                if error_code != E.NONE:
                    log.info("fetch from broker %d: %s", leader, ErrorCode(error_code).name)
                    await self._sleep(key, self.backoff_s)
                    continue
                backoff = False
                if len(partitions) == 1:
                    by_name = None
                    only = partitions[0]
                else:
                    by_name = {(p.topic, p.index): p for p in partitions}
                for part in answer:
                    if by_name is None:
                        partition = only if part.topic == only.topic and part.partition_index == only.index else None
                    else:
                        partition = by_name.get((part.topic, part.partition_index))
                    if partition is None or partition.leader_id != leader:
                        continue
                    if self.quota.is_throttled(partition):
                        self.quota.record(len(part.records) if part.records else 0)
                    try:
                        if not await self._process(partition, part):
                            backoff = True
                    except Exception:
                        log.exception("%s: applying the fetch from broker %d failed", partition.name, leader)
                        backoff = True
                # The next fetch goes out at once: it is what tells the leader this
                # follower has what it just appended (and completes acks=all produces).
                if backoff:
                    await self._sleep(key, self.backoff_s)

    def _throttle(self, partition) -> bool:
        """Leave this partition out of the fetch (KIP-73, Kafka's shouldFollowerThrottle): it
        is throttled here, not in sync, and the follower rate is over its limit."""
        return (not self.in_sync.get((partition.topic, partition.index), False)
                and self.quota.is_throttled(partition) and self.quota.exceeded())

    def _encoder(self, client_id: str) -> ReplicaFetchRequest:
        encoder = self._encoders.get(client_id)
        if encoder is None:
            encoder = self._encoders[client_id] = ReplicaFetchRequest(
                client_id, self.node.node_id, self.wait_ms, 1, 10 * 1024 * 1024)
        return encoder

    def _topics(self, partitions: list) -> list[tuple[str, list[tuple]]]:
        """What the Fetch asks, per topic: (partition, current_leader_epoch, fetch_offset =
        the local log end offset, last_fetched_epoch, log_start_offset, partition_max_bytes)."""
        by_topic: dict[str, list[tuple]] = {}
        max_bytes = self.max_bytes
        for p in partitions:
            plog = p.log
            last_epoch = plog.leader_epoch_cache.latest_epoch
            entry = (p.index, p.leader_epoch, plog.log_end_offset, -1 if last_epoch is None else last_epoch,
                     plog.log_start_offset, max_bytes)
            parts = by_topic.get(p.topic)
            if parts is None:
                by_topic[p.topic] = [entry]
            else:
                parts.append(entry)
        return list(by_topic.items())

    async def _process(self, partition, part: FetchedPartition) -> bool:
        """Apply one partition's answer; False asks for a back-off."""
        code = part.error_code
        if code != E.NONE:
            if code == E.OFFSET_OUT_OF_RANGE:
                leo = partition.log.log_end_offset
                if part.log_start_offset > leo:
                    # Retention or DeleteRecords at the leader passed our log end while we
                    # were away: nothing we lack is still there; start over at the leader's
                    # log start (Kafka's truncateFullyAndStartAt).
                    log.warning("%s: log end %d is below the leader's log start %d: starting over there",
                                partition.name, leo, part.log_start_offset)
                    await partition.truncate_fully_and_start_at(part.log_start_offset)
                    return True
                log.warning("%s: fetch offset %d out of range at the leader (log start %d)", partition.name,
                            leo, part.log_start_offset)
            else:
                log.info("%s: fetch from leader %d: %s", partition.name, partition.leader_id, ErrorCode(code).name)
            return False
        if part.diverging_epoch >= 0:
            await self._truncate(partition, part.diverging_epoch, part.diverging_end_offset)
            return True
        plog = partition.log
        records = part.records
        if records:
            data = whole_batches(records, plog.log_end_offset)
            if data:
                base = _BASE.unpack_from(data, 0)[0]
                if base < plog.log_end_offset == plog.log_start_offset:
                    # An empty log starting inside the leader's first batch (its log start
                    # is mid-batch after DeleteRecords): start at the batch's base offset
                    # and move the log start up again below (Kafka's Partition does this on
                    # UnexpectedAppendOffsetException).
                    await partition.truncate_fully_and_start_at(base)
                await partition.append_as_follower(data)
        partition.set_follower_high_watermark(part.high_watermark)
        self.in_sync[(partition.topic, partition.index)] = plog.log_end_offset >= part.high_watermark
        leader_start = part.log_start_offset
        if leader_start > plog.log_start_offset and leader_start <= plog.log_end_offset:
            # DeleteRecords or retention at the leader: followers follow (Kafka's
            # maybeIncrementLogStartOffset on the follower).
            await trio.to_thread.run_sync(lambda: plog.delete_records_before(leader_start))
        return True

    async def _truncate(self, partition, leader_epoch: int, leader_end: int) -> None:
        """Truncate to where the local log and the leader's agree
        (docs/design/replication.md#leader-epochs-and-truncation)."""
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
