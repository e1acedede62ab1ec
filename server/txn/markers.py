"""Transaction markers: the coordinator → partition leader path (WriteTxnMarkers).

When a transaction ends, its coordinator has a COMMIT or ABORT marker (a control batch)
written to every partition the transaction touched. In Kafka that is a WriteTxnMarkers
request to each partition's leader. On one broker the coordinator calls `write_marker`
directly — the same function the WriteTxnMarkers handler runs for each marker a request
carries — so there is one path whatever the caller. In a cluster the coordinator sends the
request over the wire to the leader, whose handler lands here.

A marker for `__consumer_offsets` also completes the producer's pending transactional
offset commits in the group coordinator: they become visible (COMMIT) or are dropped (ABORT).
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode

from server.errors import error_code_for

log = logging.getLogger("trafka.txn")

OFFSETS_TOPIC = "__consumer_offsets"


async def write_marker(broker, topic: str, index: int, producer_id: int, producer_epoch: int, commit: bool,
                       coordinator_epoch: int) -> ErrorCode:
    """Append one marker to one partition this broker leads; the Kafka error code."""
    try:
        partition = broker.partition(topic, index)
        await partition.write_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch)
    except Exception as exc:  # mapped in one place; the caller decides whether to retry
        code = error_code_for(exc)
        level = logging.INFO if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else logging.WARNING
        log.log(level, "%s marker for producer %d epoch %d on %s-%d: %s (%s)", "COMMIT" if commit else "ABORT",
                producer_id, producer_epoch, topic, index, code.name, exc)
        return code
    if topic == OFFSETS_TOPIC:
        broker.groups.complete_txn(index, producer_id, commit)
    return ErrorCode.NONE
