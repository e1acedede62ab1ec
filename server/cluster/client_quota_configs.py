"""Client quotas in a cluster: Kafka's ZooKeeper layout, so every broker enforces the same table.

Kafka's ZK mode keeps a quota entity's keys in its config znode (AdminZkClient.changeConfigs):
`/config/users/<user>`, `/config/clients/<client-id>`, `/config/users/<user>/clients/<client-id>`,
`/config/ips/<ip>`, each name `<default>` for the default entity and otherwise sanitized
(URL-encoded, Kafka's Sanitizer), holding {"version":1,"config":{"producer_byte_rate":"1024"}}.
An alteration writes the entity's whole config, then a change notice
`{"version":2,"entity_path":"users/alice/clients/app"}` under `/config/changes`; every broker
follows those notices (server/cluster/config_manager.py) and re-reads the whole table —
a handful of znodes — so a missed or repeated notice cannot leave it stale. At start a
broker reads the table before it serves.
"""

from __future__ import annotations

import logging
from urllib.parse import quote, unquote

from server.zookeeper import znodes as zn
from server.security.client_quotas import CLIENT_ID, IP, IP_KEYS, USER, USER_CLIENT_KEYS, Entity

log = logging.getLogger("trafka.cluster.quotas")

QUOTA_ENTITY_TYPES = ("users", "clients", "ips")


def _name(name: str | None) -> str:
    return zn.DEFAULT_ENTITY if name is None else quote(name, safe="")


def _unname(text: str) -> str | None:
    return None if text == zn.DEFAULT_ENTITY else unquote(text)


def entity_path(entity: Entity) -> str:
    """`users/alice/clients/<default>` for ((client-id, None), (user, alice))."""
    names = dict(entity)
    if IP in names:
        return f"ips/{_name(names[IP])}"
    if USER in names and CLIENT_ID in names:
        return f"users/{_name(names[USER])}/clients/{_name(names[CLIENT_ID])}"
    if USER in names:
        return f"users/{_name(names[USER])}"
    return f"clients/{_name(names[CLIENT_ID])}"


def _encode(config: dict[str, float]) -> dict[str, str]:
    """Kafka's strings: whole numbers for LONG/INT keys ("1024"), doubles as written ("12.5")."""
    whole = {**USER_CLIENT_KEYS, **IP_KEYS}
    return {k: str(int(v)) if whole.get(k) else repr(v) for k, v in config.items()}


def _decode(config: dict[str, str], where: str) -> dict[str, float]:
    out = {}
    for key, value in config.items():
        try:
            out[key] = float(value)
        except ValueError:
            log.error("%s: quota %s=%r is not a number; ignored", where, key, value)
    return out


class ClusterClientQuotas:
    def __init__(self, node) -> None:
        self.node = node

    @property
    def zk(self):
        return self.node.zk

    async def _children(self, path: str) -> list[str]:
        from server.zookeeper.client import NoNode

        try:
            return await self.zk.children(path)
        except NoNode:
            return []

    async def _config(self, path: str) -> dict[str, float]:
        found = await self.zk.get(path)
        return _decode(zn.decode_entity_config(found[0] if found else None), path)

    async def read(self) -> dict[Entity, dict[str, float]]:
        """The whole quota table as ZooKeeper holds it."""
        entries: dict[Entity, dict[str, float]] = {}

        async def add(entity: Entity, path: str) -> None:
            config = await self._config(path)
            if config:
                entries[tuple(sorted(entity))] = config

        for user in await self._children(f"{zn.CONFIG_PATH}/users"):
            await add(((USER, _unname(user)),), f"{zn.CONFIG_PATH}/users/{user}")
            for client in await self._children(f"{zn.CONFIG_PATH}/users/{user}/clients"):
                await add(((USER, _unname(user)), (CLIENT_ID, _unname(client))),
                          f"{zn.CONFIG_PATH}/users/{user}/clients/{client}")
        for client in await self._children(f"{zn.CONFIG_PATH}/clients"):
            await add(((CLIENT_ID, _unname(client)),), f"{zn.CONFIG_PATH}/clients/{client}")
        for ip in await self._children(f"{zn.CONFIG_PATH}/ips"):
            await add(((IP, _unname(ip)),), f"{zn.CONFIG_PATH}/ips/{ip}")
        return entries

    async def load(self) -> None:
        """Re-read the table and enforce it here (at start, and on every quota notice)."""
        entries = await self.read()
        self.node.broker.quotas.replace_all(entries)
        log.info("client quotas from ZooKeeper: %d entities", len(entries))

    async def on_notice(self, entity_path_: str) -> None:
        await self.load()

    async def alter(self, accepted: list[tuple[Entity, dict[str, float | None]]]) -> None:
        """Write each entity's new config and its change notice, then apply the table here."""
        for entity, changes in accepted:
            relative = entity_path(entity)
            path = f"{zn.CONFIG_PATH}/{relative}"
            config = await self._config(path)
            for key, value in changes.items():
                if value is None:
                    config.pop(key, None)
                else:
                    config[key] = value
            data = zn.encode_entity_config(_encode(config))
            if await self.zk.exists(path):
                await self.zk.set(path, data, -1)
            else:
                await self.zk.create(path, data, make_parents=True)
            await self.zk.create(zn.CONFIG_CHANGES_PATH + "/" + zn.CONFIG_CHANGE_PREFIX,
                                 zn.encode_config_change_notification(relative), sequential=True, make_parents=True)
        await self.load()
