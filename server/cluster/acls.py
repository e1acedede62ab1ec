"""ACLs in a cluster: Kafka's ZooKeeper-mode ACL storage (AclAuthorizer with ZkAclStore).

Why ZooKeeper: CreateAcls may reach any broker, and every broker must enforce the same ACLs.
Layout, as Kafka writes it:
- LITERAL ACLs of a resource: `/kafka-acl/<Type>/<name>`, PREFIXED ones:
  `/kafka-acl-extended/prefixed/<Type>/<name>`, each
  `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}`
  (a resource whose last ACL goes is deleted);
- after a change, a sequential notice: `/kafka-acl-changes/acl_changes_<seq>` holding
  `Topic:name` (literal), or `/kafka-acl-extended-changes/acl_changes_<seq>` holding
  `{"version":1,"resourceType":"Topic","name":"orders-","patternType":"PREFIXED"}`.
Every broker watches both change paths and re-reads all ACLs when a notice appears (and at
start), then hands them to its authorizer, whose decision cache is dropped. Re-reading
everything keeps processing idempotent; notices older than 15 minutes are purged.
"""

from __future__ import annotations

import json
import logging
import time

from server.security.acls import (RESOURCE_NAMES, AclBinding, AclFilter, AclOperation, AclPermissionType,
                                  PatternType, ResourceType)

log = logging.getLogger("trafka.cluster.acls")

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
CHANGE_EXPIRATION_MS = 15 * 60 * 1000

_TYPES = {name: rtype for rtype, name in RESOURCE_NAMES.items()}


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


_OPS = {_camel(op.name): op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)}
_PERMISSIONS = {"Allow": AclPermissionType.ALLOW, "Deny": AclPermissionType.DENY}


def resource_path(rtype: ResourceType, pattern: PatternType, name: str) -> str:
    root = PREFIXED_ROOT if pattern == PatternType.PREFIXED else LITERAL_ROOT
    return f"{root}/{RESOURCE_NAMES[rtype]}/{name}"


def encode_acls(acls: list[AclBinding]) -> bytes:
    return json.dumps({"version": 1, "acls": [
        {"principal": a.principal, "permissionType": _camel(a.permission.name), "operation": _camel(a.operation.name),
         "host": a.host} for a in acls]}).encode()


def decode_acls(data: bytes, rtype: ResourceType, pattern: PatternType, name: str) -> list[AclBinding]:
    body = json.loads(data.decode() or "{}")
    return [AclBinding(rtype, name, pattern, e["principal"], e["host"], _OPS[e["operation"]],
                       _PERMISSIONS[e["permissionType"]]) for e in body.get("acls", [])]


class ZkAcls:
    def __init__(self, node) -> None:
        self.node = node
        self.last_seen: dict[str, int] = {}

    @property
    def zk(self):
        return self.node.zk

    @property
    def authorizer(self):
        return self.node.broker.authorizer

    # ------------------------------------------------------------------ reading
    async def _read_all(self) -> set[AclBinding]:
        from server.zookeeper.client import NoNode

        found: set[AclBinding] = set()
        for root, pattern in ((LITERAL_ROOT, PatternType.LITERAL), (PREFIXED_ROOT, PatternType.PREFIXED)):
            try:
                type_names = await self.zk.children(root)
            except NoNode:
                continue
            for type_name in type_names:
                rtype = _TYPES.get(type_name)
                if rtype is None:
                    continue
                try:
                    names = await self.zk.children(f"{root}/{type_name}")
                except NoNode:
                    continue
                for name in names:
                    got = await self.zk.get(f"{root}/{type_name}/{name}")
                    if got is None:
                        continue
                    try:
                        found.update(decode_acls(got[0], rtype, pattern, name))
                    except (ValueError, KeyError) as exc:
                        log.warning("ACLs of %s/%s/%s are not readable: %s", root, type_name, name, exc)
        return found

    async def reload(self) -> None:
        acls = await self._read_all()
        self.authorizer.replace(acls)
        log.info("loaded %d ACLs from ZooKeeper", len(acls))

    async def run(self) -> None:
        """Load the ACLs, then follow both change paths (returns once the watches are armed)."""
        for path in (LITERAL_CHANGES, EXTENDED_CHANGES):
            if await self.zk.exists(path) is None:
                try:
                    await self.zk.create(path, b"", make_parents=True)
                except Exception:  # another broker made it meanwhile
                    pass
        await self.reload()
        for path in (LITERAL_CHANGES, EXTENDED_CHANGES):
            await self.zk.watch_children(path, lambda children, path=path: self._on_changes(path, children))

    async def _on_changes(self, path: str, children: list[str]) -> None:
        from server.zookeeper.client import ZooKeeperError

        seqs = sorted(_sequence(c) for c in children if _sequence(c) >= 0)
        if seqs and seqs[-1] > self.last_seen.get(path, -1):
            self.last_seen[path] = seqs[-1]
            try:
                await self.reload()
                await self._purge(path, children)
            except ZooKeeperError as exc:  # the watch fires again once reconnected
                log.warning("reloading ACLs after a change notice: %s", exc)

    async def _purge(self, path: str, children: list[str]) -> None:
        now = time.time() * 1000
        for child in children[:-1]:  # keep the newest: it is what the others compare against
            found = await self.zk.get(f"{path}/{child}")
            if found is not None and now - found[1].ctime > CHANGE_EXPIRATION_MS:
                try:
                    await self.zk.delete(f"{path}/{child}")
                except Exception:
                    pass

    # ------------------------------------------------------------------ writing
    async def add(self, bindings: list[AclBinding]) -> None:
        groups: dict[tuple, list[AclBinding]] = {}
        for b in bindings:
            groups.setdefault((b.resource_type, b.pattern_type, b.name), []).append(b)
        for (rtype, pattern, name), new in groups.items():
            await self._update(rtype, pattern, name, lambda old, new=new: old | set(new))
        self.authorizer.replace(self.authorizer.acl_set() | set(bindings))

    async def remove(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        await self.reload()  # filters match what the cluster has, not a stale copy
        current = self.authorizer.acls()
        removed = [[a for a in current if f.matches(a)] for f in filters]
        gone = {a for group in removed for a in group}
        by_resource: dict[tuple, set[AclBinding]] = {}
        for a in gone:
            by_resource.setdefault((a.resource_type, a.pattern_type, a.name), set()).add(a)
        for (rtype, pattern, name), drop in by_resource.items():
            await self._update(rtype, pattern, name, lambda old, drop=drop: old - drop)
        if gone:
            self.authorizer.replace(self.authorizer.acl_set() - gone)
        return removed

    async def _update(self, rtype: ResourceType, pattern: PatternType, name: str, change) -> None:
        """Compare-and-set the resource's znode (Kafka's updateResourceAcls), then notify."""
        from server.zookeeper.client import BadVersion, NodeExists, NoNode

        path = resource_path(rtype, pattern, name)
        for _ in range(20):
            got = await self.zk.get(path)
            old = set(decode_acls(got[0], rtype, pattern, name)) if got else set()
            new = change(old)
            if new == old:
                return
            ordered = sorted(new, key=lambda a: (a.principal, a.host, a.operation, a.permission))
            try:
                if got is None:
                    await self.zk.create(path, encode_acls(ordered), make_parents=True)
                elif not new:
                    await self.zk.delete(path, expected_version=got[1].version)
                else:
                    await self.zk.set(path, encode_acls(ordered), expected_version=got[1].version)
            except (BadVersion, NodeExists, NoNode):
                continue  # another broker changed it: read again
            await self._notify(rtype, pattern, name)
            return
        raise RuntimeError(f"could not update {path}: it kept changing")

    async def _notify(self, rtype: ResourceType, pattern: PatternType, name: str) -> None:
        if pattern == PatternType.LITERAL:
            path, data = LITERAL_CHANGES, f"{RESOURCE_NAMES[rtype]}:{name}".encode()
        else:
            path = EXTENDED_CHANGES
            data = json.dumps({"version": 1, "resourceType": RESOURCE_NAMES[rtype], "name": name,
                               "patternType": pattern.name}).encode()
        await self.zk.create(f"{path}/{CHANGE_PREFIX}", data, sequential=True, make_parents=True)


def _sequence(child: str) -> int:
    if not child.startswith(CHANGE_PREFIX):
        return -1
    try:
        return int(child[len(CHANGE_PREFIX):])
    except ValueError:
        return -1
