"""`GroupConfigs` (`broker.group_configs`): every group's own configs, kept and looked up.

What a group config is and how it is checked is server/groups/group_config.py; this is
where they live and who hears of a change:

- a single broker keeps them in `__share_group_state` (the share coordinator's log, one
  record per group under a key of Trafka's own, server/groups/share/records.py): written
  before the answer, replayed at start-up (Kafka keeps them in its metadata log, which a
  Trafka single broker does not have);
- a cluster keeps them in ZooKeeper (`/config/groups/<group>` and a change notice,
  server/cluster/group_configs.py); every broker holds a copy, read at start and after
  each notice, so the group's coordinator applies them wherever the change was made.

Lookups never block: `int_value` / `text_value` answer from memory (the group's own value
within the broker's current bounds, else the broker's setting). Code that must act on a
change (the share coordinator's share partitions) registers with `add_listener`.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

import trio

from server.errors import InvalidRequest
from server.groups.group_config import GROUP_CONFIGS, broker_value, effective_int, parse, to_text, validate

log = logging.getLogger("trafka.groups.config")


class GroupConfigs:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.configs: dict[str, dict[str, str]] = {}
        self._listeners: list[Callable[[str], None]] = []
        self._lock = trio.Lock()  # one change at a time: each is computed from the one before

    # ------------------------------------------------------------------ lookups
    def own(self, group_id: str) -> dict[str, str]:
        """The configs set on `group_id` itself."""
        return dict(self.configs.get(group_id, {}))

    def int_value(self, group_id: str, name: str) -> int:
        return effective_int(self.broker.config, name, self.configs.get(group_id, {}).get(name))

    def text_value(self, group_id: str, name: str) -> str:
        """A STRING config as the group has it (parsed: trimmed), else its default."""
        own = self.configs.get(group_id, {}).get(name)
        if own is not None:
            try:
                return to_text(parse(name, own))
            except Exception:  # stored before a rule changed: the default applies
                log.warning("group %s: %s=%r is not valid here; the default applies", group_id, name, own)
        return broker_value(self.broker.config, GROUP_CONFIGS[name]) or ""

    def add_listener(self, listener: Callable[[str], None]) -> None:
        """Call `listener(group_id)` after the group's configs changed."""
        self._listeners.append(listener)

    # ------------------------------------------------------------------ changes
    async def alter(self, group_id: str, change: Callable[[dict[str, str]], Mapping[str, str]],
                    validate_only: bool) -> dict[str, Any]:
        """Make change(current) the group's configs after validating the whole set (Kafka's
        GroupConfig.validate); persisted before this returns. INVALID_REQUEST for the empty
        group id (Kafka has no default group resource)."""
        if not group_id:
            raise InvalidRequest("Default group resources are not allowed.")
        config = self.broker.config
        async with self._lock:
            cluster = self.broker.cluster
            if cluster is None:
                new = dict(change(self.own(group_id)))
                parsed = validate(new, config)
                if not validate_only:
                    await self.broker.share.write_group_configs(group_id, new)
                    self._set(group_id, new)
                return parsed
            from server.cluster import group_configs as zk_store

            if validate_only:
                new = dict(change(await zk_store.read(cluster.zk, group_id)))
                return validate(new, config)
            checked: dict[str, Any] = {}

            def checked_change(current: dict[str, str]) -> Mapping[str, str]:
                new = dict(change(current))
                checked.update(validate(new, config))
                return new

            new = await zk_store.alter(cluster.zk, group_id, checked_change)
            self._set(group_id, new)
            return checked

    def replayed(self, group_id: str, configs: Mapping[str, str] | None) -> None:
        """A single broker's start-up replay of `__share_group_state`: the group's newest
        configs (a cluster's are ZooKeeper's, whatever its share coordinators replay)."""
        if self.broker.cluster is None:
            self._set(group_id, dict(configs or {}))

    async def refresh(self, group_id: str) -> None:
        """A cluster: re-read the group's znode (a change notice, or before a share partition
        is initialised, so it starts at the group's current share.auto.offset.reset)."""
        cluster = self.broker.cluster
        if cluster is None:
            return
        from server.cluster import group_configs as zk_store

        try:
            configs = await zk_store.read(cluster.zk, group_id)
        except (ValueError, TypeError, AttributeError) as exc:
            log.warning("group %s: unreadable configs in ZooKeeper (%s); the broker's apply", group_id, exc)
            configs = {}
        self._set(group_id, configs)

    async def load_cluster(self) -> None:
        """A cluster, at start: every group's configs from ZooKeeper."""
        from server.cluster import group_configs as zk_store

        found = await zk_store.read_all(self.broker.cluster.zk)
        for group_id in set(self.configs) | set(found):
            self._set(group_id, found.get(group_id, {}))
        if found:
            log.info("configs of %d groups loaded from ZooKeeper", len(found))

    def _set(self, group_id: str, configs: dict[str, str]) -> None:
        before = self.configs.get(group_id, {})
        if configs:
            self.configs[group_id] = configs
        else:
            self.configs.pop(group_id, None)
        if configs == before:
            return
        log.info("group %s: configs now %s", group_id, configs)
        for listener in list(self._listeners):
            try:
                listener(group_id)
            except Exception:
                log.exception("applying the changed configs of group %s", group_id)
