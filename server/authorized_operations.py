"""KIP-430 authorized operations: the bit sets Metadata, DescribeCluster and DescribeGroups
report when a client asks for them.

Why a module of its own: three handlers answer with these sets and handlers never import
each other. With no authorizer every operation a resource type has is allowed; the
security issue replaces these constants with the authorizer's answer per principal.
Bits are Kafka's AclOperation codes. With an authorizer (authorizer.class.name) the sets
are the authorizer's answer for the asking connection's principal and host: `topic_operations`,
`cluster_operations`, `group_operations`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from server.context import RequestContext

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = (
    3, 4, 5, 6, 7, 8, 9, 10, 11, 12)

TOPIC_OPERATIONS = sum(1 << op for op in (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
                                          ALTER_CONFIGS))
# Kafka's AclEntry.supportedOperations(CLUSTER): no READ, WRITE or DELETE on the cluster
# (Kafka reports 8096).
CLUSTER_OPERATIONS = sum(1 << op for op in (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
                                            ALTER_CONFIGS, IDEMPOTENT_WRITE))
# Kafka's AclEntry.supportedOperations(GROUP): groups have configs since KIP-848 (Kafka
# reports 3400).
GROUP_OPERATIONS = sum(1 << op for op in (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS))
# The field's value when the client did not ask (Integer.MIN_VALUE).
NOT_REQUESTED = -(1 << 31)


def _ops(bits: int):
    from server.security.acls import AclOperation

    return [AclOperation(op) for op in range(3, 13) if bits & (1 << op)]


def _answer(ctx: "RequestContext", bits: int, resource_type: int, name: str) -> int:
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return bits
    from server.security.acls import ResourceType

    return authorizer.operations(ctx.session.principal, ctx.session.host, ResourceType(resource_type), name,
                                 _ops(bits))


def topic_operations(ctx: "RequestContext", name: str) -> int:
    return _answer(ctx, TOPIC_OPERATIONS, 2, name)


def cluster_operations(ctx: "RequestContext") -> int:
    """Kafka (AuthHelper.computeDescribeClusterResponse, Metadata v8-10): no operation at all
    (0) unless the principal may DESCRIBE the cluster."""
    from server.security.acls import AclOperation, ResourceType

    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster", log_denied=False):
        return 0
    return _answer(ctx, CLUSTER_OPERATIONS, 4, "kafka-cluster")


def group_operations(ctx: "RequestContext", group: str) -> int:
    return _answer(ctx, GROUP_OPERATIONS, 3, group)
