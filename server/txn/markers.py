"""Transaction markers: the coordinator → partition leader path (WriteTxnMarkers).

When a transaction ends, its coordinator has a COMMIT or ABORT marker (a control batch)
written to every partition the transaction touched. In Kafka that is a WriteTxnMarkers
request to each partition's leader. On one broker the coordinator calls `write_marker`
directly — the same function the WriteTxnMarkers handler runs for each marker a request
carries — so there is one path whatever the caller.

In a cluster (`MarkerSender`, Kafka's TransactionMarkerChannelManager) the partitions are
grouped by their leader in the metadata cache: those this broker leads are written here, the
others go as one WriteTxnMarkers v1 per leader, all leaders at once, on connections of their
own (a marker append waits for the ISR, and must not hold up the fetchers' requests). What
comes back decides, per partition, as in Kafka's TransactionMarkerRequestCompletionHandler:
NONE is done; INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED mean a newer
producer or coordinator took over; a partition no longer in the metadata cache was deleted
and is skipped (UNKNOWN_TOPIC_OR_PARTITION); anything else — no leader, a leader that
moved, a broken connection, a timeout — is retried by the coordinator, against the leader
the cache names by then.

Like Kafka's (acks=-1), a marker appended on a replicated partition is answered only once
the partition's high watermark has passed it: the coordinator writes CompleteCommit/Abort
only after every marker is on the ISR, so a leader failing over cannot lose one.

A marker for `__consumer_offsets` also completes the producer's pending transactional
offset commits in the group coordinator: they become visible (COMMIT) or are dropped (ABORT).
"""

from __future__ import annotations

import logging

import trio

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.errors import error_code_for

log = logging.getLogger("trafka.txn")

OFFSETS_TOPIC = "__consumer_offsets"
E = ErrorCode
WRITE_TXN_MARKERS_VERSION = 1
MARKER_REPLICATION_TIMEOUT_S = 15.0  # the leader's wait for its ISR
MARKER_REQUEST_TIMEOUT_S = 30.0  # the coordinator's wait for the leader (request.timeout.ms)

TopicPartition = tuple[str, int]


async def write_marker(broker, topic: str, index: int, producer_id: int, producer_epoch: int, commit: bool,
                       coordinator_epoch: int) -> ErrorCode:
    """Append one marker to one partition this broker leads; the Kafka error code."""
    try:
        partition = broker.partition(topic, index)
        outcome = await partition.write_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch)
    except Exception as exc:  # mapped in one place; the caller decides whether to retry
        code = error_code_for(exc)
        level = logging.INFO if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else logging.WARNING
        log.log(level, "%s marker for producer %d epoch %d on %s-%d: %s (%s)", "COMMIT" if commit else "ABORT",
                producer_id, producer_epoch, topic, index, code.name, exc)
        return code
    if topic == OFFSETS_TOPIC:
        broker.groups.complete_txn(index, producer_id, commit)
    if broker.cluster is not None and partition.followers:
        return await _await_isr(broker, partition, outcome.base_offset + 1, partition.leader_epoch)
    return ErrorCode.NONE


async def _await_isr(broker, partition, required: int, epoch: int) -> ErrorCode:
    """Wait until the high watermark reaches `required` (the ISR has the marker)."""
    deadline = trio.current_time() + MARKER_REPLICATION_TIMEOUT_S
    while True:
        if not partition.is_leader or partition.leader_epoch != epoch:
            return E.NOT_LEADER_OR_FOLLOWER
        if partition.high_watermark >= required:
            return E.NONE
        remaining = deadline - trio.current_time()
        if remaining <= 0 or broker.shutting_down:
            log.info("%s: the ISR %s did not reach the marker at %d within %.0f s", partition.name, partition.isr,
                     required - 1, MARKER_REPLICATION_TIMEOUT_S)
            return E.REQUEST_TIMED_OUT
        await broker.wait_for_data([partition], remaining, purgatory="Produce")


class MarkerSender:
    """Writes one transaction's markers to the leaders of its partitions (see the module
    docstring). One per transaction coordinator; `close()` when it stops."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self._channels = None  # BrokerChannels of our own, made on the first remote marker

    def close(self) -> None:
        if self._channels is not None:
            self._channels.close()
            self._channels = None

    async def write(self, partitions: list[TopicPartition], producer_id: int, producer_epoch: int, commit: bool,
                    coordinator_epoch: int) -> dict[TopicPartition, ErrorCode]:
        """One attempt at every partition's marker; the code of each (see the module docstring
        for which ones the caller retries)."""
        broker = self.broker
        if broker.cluster is None:
            return {tp: await write_marker(broker, tp[0], tp[1], producer_id, producer_epoch, commit,
                                           coordinator_epoch) for tp in partitions}
        cache = broker.cluster.cache
        results: dict[TopicPartition, ErrorCode] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            info = cache.partition(*tp)
            if info is None:
                # Kafka: no leader endpoint at all means the partition was deleted; skip it.
                # An empty cache (nothing heard from the controller yet) means nothing.
                results[tp] = E.UNKNOWN_TOPIC_OR_PARTITION if cache.version > 0 else E.LEADER_NOT_AVAILABLE
            elif info.leader < 0 or not cache.alive(info.leader):
                results[tp] = E.LEADER_NOT_AVAILABLE
            else:
                by_leader.setdefault(info.leader, []).append(tp)
        local = by_leader.pop(broker.node_id, [])

        async def write_local() -> None:
            for tp in local:
                code = await write_marker(broker, tp[0], tp[1], producer_id, producer_epoch, commit, coordinator_epoch)
                # The cache names us, but the partition is not (yet, or any more) led here.
                results[tp] = E.NOT_LEADER_OR_FOLLOWER if code == E.UNKNOWN_TOPIC_OR_PARTITION else code

        async with trio.open_nursery() as nursery:
            if local:
                nursery.start_soon(write_local)
            for leader, tps in by_leader.items():
                nursery.start_soon(self._send, leader, tps, producer_id, producer_epoch, commit, coordinator_epoch,
                                   results)
        return results

    async def _send(self, leader: int, tps: list[TopicPartition], producer_id: int, producer_epoch: int, commit: bool,
                    coordinator_epoch: int, results: dict[TopicPartition, ErrorCode]) -> None:
        from server.cluster.client import BrokerChannels, BrokerClientError
        from server.security.tls import inter_broker_client_options

        cluster = self.broker.cluster
        if self._channels is None:
            self._channels = BrokerChannels(client_id=f"trafka-txn-markers-{self.broker.node_id}",
                                           **inter_broker_client_options(self.broker.config))
        self._channels.update_endpoints({b.broker_id: (b.host, b.port) for b in cluster.cache.brokers.values()})
        topics: dict[str, list[int]] = {}
        for topic, index in tps:
            topics.setdefault(topic, []).append(index)
        body = {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": commit,
                             "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
                             "coordinator_epoch": coordinator_epoch}]}
        try:
            response = await self._channels.request(leader, ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body,
                                                    timeout_s=MARKER_REQUEST_TIMEOUT_S)
        except BrokerClientError as exc:
            log.info("WriteTxnMarkers for producer %d to broker %d (%s): %s; retried", producer_id, leader,
                     ", ".join(f"{t}-{i}" for t, i in tps), exc)
            for tp in tps:
                results[tp] = exc.code
            return
        for tp in tps:
            results[tp] = E.NETWORK_EXCEPTION  # a partition the answer leaves out is retried
        for marker in response["markers"]:
            for topic in marker["topics"]:
                for p in topic["partitions"]:
                    tp = (topic["name"], p["partition_index"])
                    if tp not in results:
                        continue
                    try:
                        code = ErrorCode(p["error_code"])
                    except ValueError:
                        code = E.UNKNOWN_SERVER_ERROR
                    # Kafka retries UNKNOWN_TOPIC_OR_PARTITION from a leader (it may not have
                    # the partition yet); the cache decides on the next round whether it is gone.
                    results[tp] = E.NOT_LEADER_OR_FOLLOWER if code == E.UNKNOWN_TOPIC_OR_PARTITION else code
