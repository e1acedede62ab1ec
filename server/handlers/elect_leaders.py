"""ElectLeaders (43): elect the preferred replica, or for a partition without a live leader
any replica, uncleanly if it must (KIP-460; KIP-183 for v0, which has no election type and
means PREFERRED).

Implements v0-2. In a cluster the controller elects (server/cluster/elections.py) and the
answer comes once this broker's metadata shows the new leaders or `timeout_ms` passed
(REQUEST_TIMED_OUT). As in Kafka's ZooKeeper mode, clients send it to the controller
(Metadata's controller_id); any other broker answers NOT_CONTROLLER for each partition
asked for (for all it knows when `topic_partitions` is null), with no top-level error:
that is what Kafka's KafkaApis.handleElectLeaders does, its controller answering through
the callback per partition. A null `topic_partitions` means every partition, and then the
partitions that needed no election are left out of the answer.

On a single broker every replica is the preferred one and leads: each existing partition
is ELECTION_NOT_NEEDED, others UNKNOWN_TOPIC_OR_PARTITION with a one-node Kafka 4.x's
message ("No such topic as T" / "No such partition as T-P", ReplicationControlManager), which
kafka-leader-election prints; answered as Kafka 4's KRaft controller does (`_single_broker`:
entry by entry; every topic, without results, for a null `topic_partitions`;
REQUEST_TIMED_OUT for timeout_ms <= 0). Without ALTER on the cluster:
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.ELECT_LEADERS
MAY_BLOCK = True

log = logging.getLogger("trafka.admin")
E = ErrorCode
_NOT_NEEDED = "Leader election not needed for topic partition."


async def handle(ctx: RequestContext, request: dict) -> dict:
    asked = request.get("topic_partitions")
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        # Kafka: every partition asked for carries the error too (v0 has no top-level code).
        denied = (E.CLUSTER_AUTHORIZATION_FAILED, None)
        return _answer({(t["topic"], p): denied for t in asked or [] for p in t["partitions"]},
                       E.CLUSTER_AUTHORIZATION_FAILED)
    tps = None if asked is None else [(t["topic"], p) for t in asked for p in t["partitions"]]
    election_type = request.get("election_type", 0) if ctx.api_version >= 1 else 0
    if election_type not in (0, 1):
        log.info("ElectLeaders from %s: election type %d is not PREFERRED (0) or UNCLEAN (1)", ctx.client_id,
                 election_type)
        # Kafka: INVALID_REQUEST at the top and for every partition asked for.
        invalid = (E.INVALID_REQUEST, f"Unknown election type {election_type}")
        return _answer({tp: invalid for tp in tps or []}, E.INVALID_REQUEST)
    node = ctx.broker.cluster
    if node is None:
        return _single_broker(ctx, asked, request.get("timeout_ms", 60000))
    if not node.controller.active:
        if tps is None:
            tps = [(t, p) for t, parts in node.cache.topics.items() for p in parts]
        log.info("ElectLeaders from %s on broker %d, which is not the controller: NOT_CONTROLLER", ctx.client_id,
                 ctx.broker.node_id)
        results = {tp: (E.NOT_CONTROLLER, None) for tp in tps}
    else:
        results = await node.controller.elections.elect_leaders(tps, election_type, request["timeout_ms"] / 1000)
    if asked is None:
        results = {tp: r for tp, r in results.items() if r[0] != E.ELECTION_NOT_NEEDED}
    return _answer(results, E.NONE)


def _single_broker(ctx: RequestContext, asked: list[dict] | None, timeout_ms: int) -> dict:
    """As Kafka 4's KRaft controller answers: the topics as asked, entry by entry (a
    partition named twice is answered twice); for every partition (null), every topic, its
    partitions all needing no election left out; no time left (timeout_ms <= 0):
    REQUEST_TIMED_OUT for the request and each partition."""
    topics = ctx.broker.topics
    if asked is None:
        return {"throttle_time_ms": 0, "error_code": E.NONE,
                "replica_election_results": [{"topic": name, "partition_result": []} for name in topics]}
    if timeout_ms <= 0:
        return {"throttle_time_ms": 0, "error_code": E.REQUEST_TIMED_OUT, "replica_election_results": [
            {"topic": t["topic"], "partition_result": [
                {"partition_id": p, "error_code": E.REQUEST_TIMED_OUT, "error_message": None} for p in t["partitions"]]}
            for t in asked]}
    results = []
    for entry in asked:
        meta = topics.get(entry["topic"])
        partitions = []
        for index in entry["partitions"]:
            if meta is None:
                code, message = E.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {entry['topic']}"
            elif not 0 <= index < meta.partitions:
                code, message = E.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {entry['topic']}-{index}"
            else:
                code, message = E.ELECTION_NOT_NEEDED, _NOT_NEEDED
            partitions.append({"partition_id": index, "error_code": code, "error_message": message})
        results.append({"topic": entry["topic"], "partition_result": partitions})
    return {"throttle_time_ms": 0, "error_code": E.NONE, "replica_election_results": results}


def _answer(results: dict, error_code: ErrorCode) -> dict:
    by_topic: dict[str, list[dict]] = {}
    for (topic, index), (code, message) in results.items():
        by_topic.setdefault(topic, []).append({"partition_id": index, "error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "error_code": error_code,
            "replica_election_results": [{"topic": t, "partition_result": ps} for t, ps in by_topic.items()]}
