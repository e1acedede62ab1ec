"""DescribeProducers (61): the producers a partition keeps state for (KIP-664).

Implements v0. For each partition asked for: every producer id with state in the partition
(its epoch, last sequence and timestamp, the coordinator epoch of its last transaction
marker, and the offset where its open transaction began, -1 for none), as Kafka's
ReplicaManager.activeProducerState answers. This is what `kafka-transactions
describe-producers`, `find-hanging` and `abort` read (the last to find the producer id and
epoch of a transaction it then aborts with WriteTxnMarkers).

Kafka's checks in its order (KafkaApis.handleDescribeProducersRequest): READ on the topic
(TOPIC_AUTHORIZATION_FAILED for each of its partitions), a topic the cluster does not know
(UNKNOWN_TOPIC_OR_PARTITION), then per partition UNKNOWN_TOPIC_OR_PARTITION or, on a broker
with no replica of it, NOT_LEADER_OR_FOLLOWER. Any replica answers, a follower too: its log
keeps the same producer state. Error messages are null, as Kafka's are.
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.errors import error_code_for
from server.security.acls import AclOperation, ResourceType

API_KEY = ApiKey.DESCRIBE_PRODUCERS
MAY_BLOCK = False


def _partition(index: int, code: ErrorCode, producers: list[dict] | None = None) -> dict:
    return {"partition_index": index, "error_code": code, "error_message": None,
            "active_producers": producers or []}


async def handle(ctx: RequestContext, request: dict) -> dict:
    topics = []
    for topic in request["topics"]:
        name = topic["name"]
        indexes = topic["partition_indexes"]
        if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif not ctx.broker.mode.topic_exists(name):
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            error = None
        partitions = []
        for index in indexes:
            if error is not None:
                partitions.append(_partition(index, error))
                continue
            try:
                partition = ctx.broker.partition(name, index, leader_only=False)
            except Exception as exc:
                partitions.append(_partition(index, error_code_for(exc)))
                continue
            partitions.append(_partition(index, ErrorCode.NONE, partition.producers.active_producers()))
        topics.append({"name": name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
