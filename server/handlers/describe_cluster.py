"""DescribeCluster (60): cluster id, controller, and the brokers (this one).

Implements v0-1. This broker is the whole cluster and answers as its controller too.
endpoint_type (v1, KIP-919): 1 (brokers) is answered; 2 (controllers) →
MISMATCHED_ENDPOINT_TYPE, as a Kafka broker endpoint does; anything else →
UNSUPPORTED_ENDPOINT_TYPE; both with an empty cluster id, as Kafka answers them. Authorized operations (KIP-430): the authorizer's answer for the principal, when asked.
Not implemented: v2 include_fenced_brokers (no fenced brokers exist to include).
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.authorized_operations import NOT_REQUESTED, cluster_operations

API_KEY = ApiKey.DESCRIBE_CLUSTER
MAY_BLOCK = False

ENDPOINT_BROKERS = 1
ENDPOINT_CONTROLLERS = 2


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    endpoint = request.get("endpoint_type", ENDPOINT_BROKERS)
    answer = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
              "endpoint_type": ENDPOINT_BROKERS, "cluster_id": broker.cluster_id, "controller_id": -1,
              "brokers": [], "cluster_authorized_operations": NOT_REQUESTED}
    if endpoint != ENDPOINT_BROKERS:
        answer["cluster_id"] = ""  # Kafka's error answers carry no cluster id
    if endpoint == ENDPOINT_CONTROLLERS:
        answer.update(error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE,
                      error_message="the request was sent to a broker endpoint, but asked for controllers")
        return answer
    if endpoint != ENDPOINT_BROKERS:
        answer.update(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                      error_message=f"unsupported endpoint type {endpoint}")
        return answer
    # the client's own listener's addresses; brokers without it left out
    answer.update(controller_id=broker.mode.controller_id(),
                  brokers=[{"broker_id": broker_id, "host": host, "port": port, "rack": rack}
                           for broker_id, host, port, rack in broker.mode.brokers(ctx.session.listener)])
    if request.get("include_cluster_authorized_operations"):
        answer["cluster_authorized_operations"] = cluster_operations(ctx)
    return answer
