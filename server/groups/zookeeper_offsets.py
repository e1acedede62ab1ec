"""Offsets kept in ZooKeeper: what OffsetCommit v0 and OffsetFetch v0 read and write.

Kafka before 0.8.2 had no offsets topic: consumers stored their positions in ZooKeeper,
and version 0 of OffsetCommit/OffsetFetch asks the broker to do that for them. Kafka 3.9
still does in ZooKeeper mode — znode /consumers/<group>/offsets/<topic>/<partition>, the
offset in decimal, no metadata, nothing to do with the group coordinator (no generation,
no member check) — and answers UNSUPPORTED_VERSION without ZooKeeper (KRaft). A Trafka
broker in a cluster has ZooKeeper and does the former; a single broker the latter.
"""

from __future__ import annotations

from server.zookeeper import znodes as zn
from server.zookeeper.client import NodeExists, NoNode, ZooKeeperClient


async def commit(zk: ZooKeeperClient, group: str, topic: str, partition: int, offset: int) -> None:
    """Kafka's KafkaZkClient.setOrCreateConsumerOffset: set the znode, creating it (and its
    parents) when it does not exist yet."""
    path = zn.consumer_offset_path(group, topic, partition)
    data = str(offset).encode()
    try:
        await zk.set(path, data, -1)
    except NoNode:
        try:
            await zk.create(path, data, make_parents=True)
        except NodeExists:  # another commit created it a moment before: ours is the later one
            await zk.set(path, data, -1)


async def fetch(zk: ZooKeeperClient, group: str, topic: str, partition: int) -> int | None:
    """The committed offset, or None when none was committed."""
    found = await zk.get(zn.consumer_offset_path(group, topic, partition))
    if found is None:
        return None
    return int(found[0].decode())
