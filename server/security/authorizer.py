"""The authorizer: Kafka's AclAuthorizer (and StandardAuthorizer) rules over a set of ACLs.

On when `authorizer.class.name` names one of Kafka's authorizer classes; None otherwise,
and every handler's check is then a single `is None` test (RequestContext.authorize).
Rules, as Kafka applies them:
- a principal in `super.users` ("User:a;User:b") may do anything;
- the ACLs that apply to a resource are its LITERAL ones, the LITERAL "*" ones of its type,
  and the PREFIXED ones whose name begins it;
- with none of those, `allow.everyone.if.no.acl.found` decides (false by default);
- a DENY that matches the principal (or "User:*"), the host (or "*") and the operation
  (or ALL) wins over any ALLOW;
- otherwise an ALLOW must match; READ, WRITE, DELETE and ALTER imply DESCRIBE and
  ALTER_CONFIGS implies DESCRIBE_CONFIGS.
Answers are cached per (principal, host, operation, resource) until the ACLs change, so the
hot path (every Produce and Fetch) is a dict lookup. Decisions are logged on the
"trafka.authorizer" logger as Kafka's kafka.authorizer.logger does: allowed at debug,
denied at info.

Single-node brokers keep the ACLs in `<data dir>/__security/acls.json` (written atomically);
in a cluster they live in ZooKeeper (server/cluster/acls.py) and `path` is None.
"""

from __future__ import annotations

import json
import logging
import pathlib
from typing import Iterable

from storage.files import atomic_write

from server.security.acls import (IMPLIED_BY, RESOURCE_NAMES, WILDCARD, WILDCARD_PRINCIPAL, AclBinding,
                                  AclFilter, AclOperation, AclPermissionType, PatternType, ResourceType)

log = logging.getLogger("trafka.authorizer")


_CACHE_LIMIT = 100_000
_DENY = AclPermissionType.DENY
_ALLOW = AclPermissionType.ALLOW


def parse_super_users(text: str) -> frozenset[str]:
    """`super.users`: principals separated by ';' (Kafka's format), blanks ignored."""
    return frozenset(p.strip() for p in text.split(";") if p.strip())


class Authorizer:
    def __init__(self, *, super_users: Iterable[str] = (), allow_everyone_if_no_acl: bool = False,
                 path: pathlib.Path | None = None) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl = allow_everyone_if_no_acl
        self.path = path
        self._acls: set[AclBinding] = set()
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[ResourceType, list[AclBinding]] = {}
        self._cache: dict[tuple, bool] = {}

    @classmethod
    def from_config(cls, config, data_dir: pathlib.Path) -> "Authorizer | None":
        """None when `authorizer.class.name` is empty (no authorization, Kafka's default)."""
        name = config.get("authorizer.class.name")  # validated: one of Kafka's classes
        if not name:
            return None
        return cls(super_users=parse_super_users(config.raw("super.users")),
                   allow_everyone_if_no_acl=config.get("allow.everyone.if.no.acl.found"),
                   path=None if config.clustered else pathlib.Path(data_dir) / "__security" / "acls.json")

    # ---- state ---------------------------------------------------------------------
    def load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        data = json.loads(self.path.read_text())
        self._replace({AclBinding.from_json(item) for item in data.get("acls", [])})
        log.info("loaded %d ACLs from %s", len(self._acls), self.path)

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = {"version": 1, "acls": [a.to_json() for a in sorted(self._acls, key=_sort_key)]}
        atomic_write(self.path, json.dumps(body, indent=1).encode())

    def _replace(self, acls: set[AclBinding]) -> None:
        self._acls = acls
        literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        prefixed: dict[ResourceType, list[AclBinding]] = {}
        for acl in acls:
            if acl.pattern_type == PatternType.PREFIXED:
                prefixed.setdefault(acl.resource_type, []).append(acl)
            else:
                literal.setdefault((acl.resource_type, acl.name), []).append(acl)
        self._literal, self._prefixed = literal, prefixed
        self._cache = {}

    def replace(self, acls: set[AclBinding]) -> None:
        """Take a whole new ACL set (a cluster's, read from ZooKeeper); not saved to a file."""
        self._replace(set(acls))

    def acl_set(self) -> set[AclBinding]:
        return set(self._acls)

    def acls(self) -> list[AclBinding]:
        return sorted(self._acls, key=_sort_key)

    def add(self, bindings: list[AclBinding]) -> None:
        """Add (already validated) ACLs; adding one that exists is not an error (Kafka)."""
        self._replace(self._acls | set(bindings))
        self._save()

    def remove(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """Remove what each filter matches; per filter, the ACLs it removed."""
        removed = [[a for a in self.acls() if f.matches(a)] for f in filters]
        gone = {a for group in removed for a in group}
        if gone:
            self._replace(self._acls - gone)
            self._save()
        return removed

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        return [a for a in self.acls() if acl_filter.matches(a)]

    # ---- decisions -----------------------------------------------------------------
    def matching(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """The ACLs that apply to one resource: literal, wildcard and prefixes of it."""
        found = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            found += self._literal.get((resource_type, WILDCARD), ())
        for acl in self._prefixed.get(resource_type, ()):
            if name.startswith(acl.name):
                found.append(acl)
        return found

    def authorize(self, principal: str, host: str, op: AclOperation, resource_type: ResourceType, name: str,
                  *, api: str = "", log_denied: bool = True) -> bool:
        key = (principal, host, op, resource_type, name)
        allowed = self._cache.get(key)
        if allowed is None:
            allowed, reason = self._decide(principal, host, op, resource_type, name)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = allowed
            if allowed:
                log.debug("Principal = %s is Allowed operation = %s from host = %s on resource = %s:LITERAL:%s"
                          " for request = %s based on %s", principal, op.name, host,
                          RESOURCE_NAMES.get(resource_type, resource_type), name, api, reason)
        if not allowed and log_denied:
            log.info("Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s"
                     " for request = %s", principal, op.name, host, RESOURCE_NAMES.get(resource_type, resource_type),
                     name, api)
        return allowed

    def _decide(self, principal: str, host: str, op: AclOperation, resource_type: ResourceType,
                name: str) -> tuple[bool, str]:
        if principal in self.super_users:
            return True, "super user"
        acls = self.matching(resource_type, name)
        if not acls:
            return self.allow_everyone_if_no_acl, "no ACLs found (allow.everyone.if.no.acl.found)"
        for acl in acls:
            if acl.permission == _DENY and _applies(acl, principal, host) \
                    and (acl.operation == op or acl.operation == AclOperation.ALL):
                return False, f"DENY rule {acl.describe()}"
        granting = IMPLIED_BY.get(op) or (op, AclOperation.ALL)
        for acl in acls:
            if acl.permission == _ALLOW and acl.operation in granting and _applies(acl, principal, host):
                return True, f"ALLOW rule {acl.describe()}"
        return False, "no matching ALLOW rule"

    def authorize_any(self, principal: str, host: str, op: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: may the principal do `op` on at least one
        resource of this type? (InitProducerId without a transactional id: WRITE on any topic.)"""
        if self.authorize(principal, host, op, resource_type, "hardcode", log_denied=False):
            return True
        granting = IMPLIED_BY.get(op) or (op, AclOperation.ALL)
        denied_all = any(a.permission == _DENY and a.name == WILDCARD and a.pattern_type == PatternType.LITERAL
                         and a.resource_type == resource_type and _applies(a, principal, host)
                         and a.operation in (op, AclOperation.ALL) for a in self._acls)
        if denied_all:
            return False
        denied = {(a.pattern_type, a.name) for a in self._acls
                  if a.permission == _DENY and a.resource_type == resource_type and _applies(a, principal, host)
                  and a.operation in (op, AclOperation.ALL)}
        return any(a.permission == _ALLOW and a.resource_type == resource_type and a.operation in granting
                   and _applies(a, principal, host) and (a.pattern_type, a.name) not in denied for a in self._acls)

    def operations(self, principal: str, host: str, resource_type: ResourceType, name: str,
                   candidates: Iterable[AclOperation]) -> int:
        """KIP-430: the bit set of `candidates` the principal may do on the resource."""
        bits = 0
        for op in candidates:
            if self.authorize(principal, host, op, resource_type, name, log_denied=False):
                bits |= 1 << op
        return bits


def _applies(acl: AclBinding, principal: str, host: str) -> bool:
    return (acl.principal == principal or acl.principal == WILDCARD_PRINCIPAL) \
        and (acl.host == host or acl.host == WILDCARD)


def _sort_key(acl: AclBinding) -> tuple:
    return (acl.resource_type, acl.pattern_type, acl.name, acl.principal, acl.host, acl.operation, acl.permission)
