"""ElectLeaders (43): elect the preferred replica, or for a partition without a live leader
any replica, uncleanly if it must (KIP-460; KIP-183 for v0, which has no election type and
means PREFERRED).

Implements v0-2. The broker's mode answers (server/modes/). In a cluster the controller
elects (server/cluster/elections.py) and the answer comes once this broker's metadata shows
the new leaders or `timeout_ms` passed (REQUEST_TIMED_OUT). As in Kafka's ZooKeeper mode,
clients send it to the controller (Metadata's controller_id); any other broker answers
NOT_CONTROLLER for each partition asked for (for all it knows when `topic_partitions` is
null), with no top-level error: that is what Kafka's KafkaApis.handleElectLeaders does, its
controller answering through the callback per partition. A null `topic_partitions` means
every partition, and then the partitions that needed no election are left out of the answer.

On a single broker every replica is the preferred one and leads: each existing partition
is ELECTION_NOT_NEEDED, others UNKNOWN_TOPIC_OR_PARTITION with a one-node Kafka 4.x's
message ("No such topic as T" / "No such partition as T-P", ReplicationControlManager), which
kafka-leader-election prints; answered as Kafka 4's KRaft controller does (entry by entry;
every topic, without results, for a null `topic_partitions`; REQUEST_TIMED_OUT for
timeout_ms <= 0). Without ALTER on the cluster: CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.modes import election_answer
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.ELECT_LEADERS
MAY_BLOCK = True

log = logging.getLogger("trafka.admin")
E = ErrorCode


async def handle(ctx: RequestContext, request: dict) -> dict:
    asked = request.get("topic_partitions")
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        # Kafka: every partition asked for carries the error too (v0 has no top-level code).
        denied = (E.CLUSTER_AUTHORIZATION_FAILED, None)
        return election_answer({(t["topic"], p): denied for t in asked or [] for p in t["partitions"]},
                               E.CLUSTER_AUTHORIZATION_FAILED)
    tps = None if asked is None else [(t["topic"], p) for t in asked for p in t["partitions"]]
    election_type = request.get("election_type", 0) if ctx.api_version >= 1 else 0
    if election_type not in (0, 1):
        log.info("ElectLeaders from %s: election type %d is not PREFERRED (0) or UNCLEAN (1)", ctx.client_id,
                 election_type)
        # Kafka: INVALID_REQUEST at the top and for every partition asked for.
        invalid = (E.INVALID_REQUEST, f"Unknown election type {election_type}")
        return election_answer({tp: invalid for tp in tps or []}, E.INVALID_REQUEST)
    return await ctx.broker.mode.elect_leaders(asked, election_type, request.get("timeout_ms", 60000), ctx.client_id)
