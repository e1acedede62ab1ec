"""ShareAcknowledge (79): settle records a share consumer acquired (KIP-932).

Implements v1 (Kafka 4.1) and v0 (Kafka 3.9's early access; the same fields). Each AcknowledgementBatch gives one acknowledge type for all its
offsets or one per offset: 0 GAP (no record there), 1 ACCEPT, 2 RELEASE (deliver again),
3 REJECT (never deliver). Acknowledgements travel in a share session: epoch 0 cannot carry
them (INVALID_SHARE_SESSION_EPOCH), -1 applies them and closes the session (releasing what
the member still holds), other epochs must be the session's next (SHARE_SESSION_NOT_FOUND /
INVALID_SHARE_SESSION_EPOCH at the top level). A partition whose records this member does
not hold acquired answers INVALID_RECORD_STATE, and none of its batches is applied. Every
accepted acknowledgement is in `__share_group_state` before the answer goes out. In a
cluster the partition's leader answers (NOT_LEADER_OR_FOLLOWER elsewhere, with KIP-951's
hints) and writes through the share coordinator (WriteShareGroupState).
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.modes import FETCH_HINT_CODES
from server.context import RequestContext
from server.errors import InvalidRequest, InvalidShareSessionEpoch, KafkaError
from server.groups.share import FINAL_EPOCH, INITIAL_EPOCH
from server.security.acls import AclOperation, ResourceType

API_KEY = ApiKey.SHARE_ACKNOWLEDGE
MAY_BLOCK = False

log = logging.getLogger("trafka.share")
NO_LEADER = {"leader_id": -1, "leader_epoch": -1}


def _error(code: ErrorCode, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "responses": [],
            "node_endpoints": []}


async def handle(ctx: RequestContext, request: dict) -> dict:
    share = ctx.broker.share
    group_id = request.get("group_id")
    member_id = request.get("member_id")
    epoch = request["share_session_epoch"]
    if group_id and not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    try:
        if not group_id or not member_id:
            raise InvalidRequest("ShareAcknowledge needs a group id and a member id")
        if epoch == INITIAL_EPOCH:
            raise InvalidShareSessionEpoch("acknowledgements cannot open a share session (epoch 0)")
        share.sessions.advance(group_id, member_id, epoch)
    except KafkaError as exc:
        log.info("ShareAcknowledge %s/%s@%d from %s: %s (%s)", group_id, member_id, epoch, ctx.client_id,
                 exc.code.name, exc)
        return _error(exc.code, str(exc))
    results = await share.acknowledge_topics(group_id, member_id, request["topics"])
    if epoch == FINAL_EPOCH:
        share.close_session(group_id, member_id)
    responses = []
    for topic in request["topics"]:
        partitions = []
        for part in topic["partitions"]:
            code, message = results.get((topic["topic_id"], part["partition_index"]), (ErrorCode.NONE, None))
            partitions.append({"partition_index": part["partition_index"], "error_code": code,
                               "error_message": message, "current_leader": NO_LEADER})
        responses.append({"topic_id": topic["topic_id"], "partitions": partitions})
    # KIP-951's hints for a partition led elsewhere
    endpoints = ctx.broker.mode.leader_hints(responses, "partitions", FETCH_HINT_CODES,
                                             lambda t: share.topic_name(t["topic_id"]))
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "responses": responses,
            "node_endpoints": endpoints}
