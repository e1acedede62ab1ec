"""The ACL model: Kafka's resource types, pattern types, operations and permissions (their
wire codes), an ACL binding, and the filters DescribeAcls and DeleteAcls match with.

Why its own module: the authorizer, the three ACL handlers and the KIP-430 operation sets
all speak these codes, and the ACL handlers validate input with the same rules the
authorizer relies on (an ACL that could never match is refused at creation, as Kafka does).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD = "*"  # the wildcard resource name and host (ResourcePattern.WILDCARD_RESOURCE)
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the only name the CLUSTER resource has

_Op = AclOperation
# Kafka's AclEntry.supportedOperations: what each resource type can be granted (ALL always).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE, _Op.ALTER,
                                   _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_Op.READ, _Op.DESCRIBE, _Op.DELETE}),
    ResourceType.CLUSTER: frozenset({_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS,
                                     _Op.IDEMPOTENT_WRITE, _Op.ALTER, _Op.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_Op.DESCRIBE, _Op.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_Op.DESCRIBE}),
    ResourceType.USER: frozenset({_Op.CREATE_TOKENS, _Op.DESCRIBE_TOKENS}),
}

# What an ALLOW of an operation also grants (Kafka's AclAuthorizer): asking for the key is
# allowed by an ALLOW of any of the values (and of ALL).
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    _Op.DESCRIBE: frozenset({_Op.DESCRIBE, _Op.READ, _Op.WRITE, _Op.DELETE, _Op.ALTER, _Op.ALL}),
    _Op.DESCRIBE_CONFIGS: frozenset({_Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS, _Op.ALL}),
}

# Kafka's display names (the JSON of the ZooKeeper ACL znodes and the authorizer log).
RESOURCE_NAMES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
                  ResourceType.TRANSACTIONAL_ID: "TransactionalId", ResourceType.DELEGATION_TOKEN: "DelegationToken",
                  ResourceType.USER: "User"}


class InvalidAcl(ValueError):
    """An ACL or filter Kafka refuses (INVALID_REQUEST); the message says why."""


def valid_principal(principal: str) -> bool:
    """Kafka's KafkaPrincipal format, "<type>:<name>" with a non-empty type."""
    kind, sep, _ = principal.partition(":")
    return bool(sep and kind)


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def validate(self) -> None:
        """Raise InvalidAcl for what Kafka refuses to create."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise InvalidAcl(f"invalid resource type {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"invalid pattern type {self.pattern_type.name} (LITERAL or PREFIXED)")
        if self.operation in (_Op.ANY, _Op.UNKNOWN):
            raise InvalidAcl(f"invalid operation {self.operation.name}")
        if self.permission in (AclPermissionType.ANY, AclPermissionType.UNKNOWN):
            raise InvalidAcl(f"invalid permission type {self.permission.name}")
        if not self.name:
            raise InvalidAcl("invalid empty resource name")
        if self.resource_type == ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            raise InvalidAcl(f"the only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        if not valid_principal(self.principal):
            raise InvalidAcl(f"invalid principal {self.principal!r} (expected <type>:<name>)")
        if not self.host:
            raise InvalidAcl("invalid empty host")
        if self.operation != _Op.ALL and self.operation not in SUPPORTED_OPERATIONS[self.resource_type]:
            allowed = ", ".join(sorted(o.name for o in SUPPORTED_OPERATIONS[self.resource_type]))
            raise InvalidAcl(f"ResourceType {self.resource_type.name} only supports operations {allowed}, ALL")

    def to_json(self) -> dict:
        return {"resourceType": self.resource_type.name, "name": self.name, "patternType": self.pattern_type.name,
                "principal": self.principal, "host": self.host, "operation": self.operation.name,
                "permissionType": self.permission.name}

    @classmethod
    def from_json(cls, data: dict) -> "AclBinding":
        return cls(ResourceType[data["resourceType"]], data["name"], PatternType[data["patternType"]],
                   data["principal"], data["host"], AclOperation[data["operation"]],
                   AclPermissionType[data["permissionType"]])

    def describe(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission.name}) on {RESOURCE_NAMES.get(self.resource_type, '?')}:"
                f"{self.pattern_type.name}:{self.name}")


def _enum(kind, code: int):
    try:
        return kind(code)
    except ValueError:
        return kind.UNKNOWN


def binding_from_wire(item: dict) -> AclBinding:
    """A CreateAcls creation (v0 has no pattern type: LITERAL)."""
    return AclBinding(_enum(ResourceType, item["resource_type"]), item["resource_name"],
                      _enum(PatternType, item.get("resource_pattern_type", PatternType.LITERAL)),
                      item["principal"], item["host"], _enum(AclOperation, item["operation"]),
                      _enum(AclPermissionType, item["permission_type"]))


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's AclBindingFilter: None (or ANY) matches anything; MATCH matches the
    patterns that would apply to the named resource (literal, wildcard, prefixes)."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def from_wire(cls, item: dict) -> "AclFilter":
        return cls(_enum(ResourceType, item["resource_type_filter"]), item.get("resource_name_filter"),
                   _enum(PatternType, item.get("pattern_type_filter", PatternType.LITERAL)),
                   item.get("principal_filter"), item.get("host_filter"), _enum(AclOperation, item["operation"]),
                   _enum(AclPermissionType, item["permission_type"]))

    def validate(self) -> None:
        if ResourceType.UNKNOWN == self.resource_type or self.pattern_type == PatternType.UNKNOWN \
                or self.operation == _Op.UNKNOWN or self.permission == AclPermissionType.UNKNOWN:
            raise InvalidAcl("the filter must not contain UNKNOWN elements")

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if not self._pattern_matches(acl):
            return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != _Op.ANY and self.operation != acl.operation:
            return False
        return self.permission == AclPermissionType.ANY or self.permission == acl.permission

    def _pattern_matches(self, acl: AclBinding) -> bool:
        if self.pattern_type == PatternType.MATCH:
            if self.name is None:
                return True
            if acl.pattern_type == PatternType.LITERAL:
                return acl.name == self.name or acl.name == WILDCARD
            return self.name.startswith(acl.name)
        if self.pattern_type != PatternType.ANY and self.pattern_type != acl.pattern_type:
            return False
        return self.name is None or self.name == acl.name
