"""Group configs in a cluster: `/config/groups/<group>` and its change notices.

Kafka 4 keeps group configs in its metadata log, which every broker follows; the cluster
here keeps them the way ZooKeeper-mode Kafka keeps the other config entities (topics,
brokers, users): `/config/groups/<group>` holds the group's whole set as
`{"version":1,"config":{...}}` (the group id URL-encoded, since a group id may hold a
`/`), and each write is followed by a change notice `{"version":2,"entity_path":
"groups/<group>"}` under `/config/changes`. Every broker follows the notices
(server/cluster/config_manager.py) and re-reads the group's znode into its
`broker.group_configs`, so the group's coordinator — wherever the group's
`__consumer_offsets` partition is led — applies a change made through any broker. At start a
broker reads every group's znode before it serves.

A write is a compare-and-set on the znode's version: two brokers altering one group at once
do not lose either change (the loser re-reads and applies its change again).
"""

from __future__ import annotations

import logging
import urllib.parse
from typing import Callable, Mapping

from server.zookeeper import znodes as zn

log = logging.getLogger("trafka.cluster.config")

ENTITY_TYPE = "groups"


def group_path(group_id: str) -> str:
    return zn.config_entity_path(ENTITY_TYPE, urllib.parse.quote(group_id, safe=""))


def group_of(entity_name: str) -> str:
    """The group id of a `groups/<name>` notice or a child of /config/groups."""
    return urllib.parse.unquote(entity_name)


async def read(zk, group_id: str) -> dict[str, str]:
    """The group's configs as ZooKeeper holds them ({} when it has none)."""
    found = await zk.get(group_path(group_id))
    return zn.decode_entity_config(found[0] if found else None)


async def read_all(zk) -> dict[str, dict[str, str]]:
    """Every group's configs (start-up)."""
    from server.zookeeper.client import NoNode

    try:
        children = await zk.children(f"{zn.CONFIG_PATH}/{ENTITY_TYPE}")
    except NoNode:
        return {}
    out = {}
    for child in children:
        group_id = group_of(child)
        try:
            configs = await read(zk, group_id)
        except (ValueError, TypeError, AttributeError) as exc:
            log.warning("group %s: unreadable configs in ZooKeeper (%s); the broker's apply", group_id, exc)
            continue
        if configs:
            out[group_id] = configs
    return out


async def alter(zk, group_id: str, change: Callable[[dict[str, str]], Mapping[str, str]]) -> dict[str, str]:
    """Write change(current) as the group's configs (compare-and-set, retried when another
    broker wrote in between) and a change notice; the new configs."""
    from server.zookeeper.client import BadVersion, NodeExists

    path = group_path(group_id)
    while True:
        found = await zk.get(path)
        current = zn.decode_entity_config(found[0] if found else None)
        configs = dict(change(current))
        data = zn.encode_entity_config(configs)
        try:
            if found is None:
                await zk.create(path, data, make_parents=True)
            else:
                await zk.set(path, data, found[1].version)
        except (BadVersion, NodeExists):
            continue
        break
    await zk.create(zn.CONFIG_CHANGES_PATH + "/" + zn.CONFIG_CHANGE_PREFIX,
                    zn.encode_config_change_notification(f"{ENTITY_TYPE}/{urllib.parse.quote(group_id, safe='')}"),
                    sequential=True, make_parents=True)
    return configs
