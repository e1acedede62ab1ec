"""ISR changes, sent by partition leaders to the controller (AlterPartition, KIP-497).

Why through the controller: in Kafka's ZooKeeper mode since 2.7 only the controller writes
a partition's state znode, so a leader never races it. A leader proposes a new ISR
(`Partition.propose_isr`, at most one change in flight per partition); this manager batches
what is queued into one AlterPartition request to the controller the metadata cache names,
one request at a time, and applies the answers
(docs/design/replication.md#isr-changes-through-the-controller): success sets the ISR and
partition epoch; INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED revert to the committed ISR;
fencing errors leave the change pending until the next LeaderAndIsr; anything else (and a
lost answer) is sent again. An answer for a partition whose state changed meanwhile is
ignored (KAFKA-12686).
"""

from __future__ import annotations

import logging

import trio

from wire.errors import ErrorCode
from wire.registry import ApiKey

log = logging.getLogger("trafka.isr")
E = ErrorCode
ALTER_PARTITION_VERSION = 1
_RETRY_S = 0.2
_STAY_PENDING = {E.FENCED_LEADER_EPOCH, E.INVALID_UPDATE_VERSION, E.UNKNOWN_TOPIC_OR_PARTITION, E.UNKNOWN_TOPIC_ID,
                 E.INVALID_REQUEST}
_REVERT = {E.INELIGIBLE_REPLICA, E.OPERATION_NOT_ATTEMPTED}


class AlterPartitionManager:
    def __init__(self, node) -> None:
        self.node = node
        self.queued: dict[tuple[str, int], tuple[object, list[int], int, int]] = {}
        self._wake = trio.Event()

    def submit(self, partition, new_isr: list[int]) -> None:
        """Called by `Partition.propose_isr` (synchronous: just queued)."""
        self.queued[(partition.topic, partition.index)] = (partition, list(new_isr), partition.leader_epoch,
                                                           partition.partition_epoch)
        self._wake.set()

    async def run(self) -> None:
        while True:
            if not self.queued:
                self._wake = trio.Event()
                await self._wake.wait()
            batch, self.queued = self.queued, {}
            retry = await self._send(batch)
            for key, item in retry.items():
                self.queued.setdefault(key, item)
            if retry:
                await trio.sleep(_RETRY_S)

    async def _send(self, batch: dict) -> dict:
        node = self.node
        controller = node.cache.controller_id
        if controller < 0:
            return batch
        by_topic: dict[str, list[dict]] = {}
        for (topic, index), (_p, isr, leader_epoch, partition_epoch) in batch.items():
            by_topic.setdefault(topic, []).append({"partition_index": index, "leader_epoch": leader_epoch,
                                                   "new_isr": isr, "leader_recovery_state": 0,
                                                   "partition_epoch": partition_epoch})
        body = {"broker_id": node.node_id, "broker_epoch": node.broker_epoch,
                "topics": [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]}
        try:
            answer = await node.channels.client(controller).request(ApiKey.ALTER_PARTITION, ALTER_PARTITION_VERSION,
                                                                    body, 30.0)
        except Exception as exc:
            log.info("AlterPartition to controller %d failed: %r; retrying", controller, exc)
            return batch
        if answer["error_code"] != E.NONE:
            log.info("AlterPartition to controller %d: %s; retrying", controller, ErrorCode(answer["error_code"]).name)
            return batch
        retry = {}
        for t in answer["topics"]:
            for p in t["partitions"]:
                key = (t["topic_name"], p["partition_index"])
                item = batch.get(key)
                if item is None:
                    continue
                partition, isr, leader_epoch, partition_epoch = item
                if partition.leader_epoch != leader_epoch or partition.partition_epoch != partition_epoch \
                        or not partition.is_leader:
                    continue  # state changed meanwhile (KAFKA-12686)
                code = ErrorCode(p["error_code"])
                if code == E.NONE:
                    partition.isr_changed(p["isr"], p["partition_epoch"])
                    log.info("%s: ISR now %s (partition epoch %d)", partition.name, p["isr"], p["partition_epoch"])
                elif code in _REVERT:
                    partition.pending_isr = None
                    log.info("%s: ISR change to %s refused (%s)", partition.name, isr, code.name)
                elif code in _STAY_PENDING:
                    log.info("%s: ISR change to %s: %s; waiting for the controller", partition.name, isr, code.name)
                else:
                    retry[key] = item
        return retry
