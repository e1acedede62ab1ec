"""KIP-430 authorized operations: the bit sets Metadata, DescribeCluster and DescribeGroups
report when a client asks for them.

Why a module of its own: three handlers answer with these sets and handlers never import
each other. With no authorizer every operation a resource type has is allowed; the
security issue replaces these constants with the authorizer's answer per principal.
Bits are Kafka's AclOperation codes.
"""

from __future__ import annotations

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = (
    3, 4, 5, 6, 7, 8, 9, 10, 11, 12)

TOPIC_OPERATIONS = sum(1 << op for op in (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
                                          ALTER_CONFIGS))
CLUSTER_OPERATIONS = sum(1 << op for op in (WRITE, CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
                                            ALTER_CONFIGS, IDEMPOTENT_WRITE))
GROUP_OPERATIONS = sum(1 << op for op in (READ, DELETE, DESCRIBE))
# The field's value when the client did not ask (Integer.MIN_VALUE).
NOT_REQUESTED = -(1 << 31)
