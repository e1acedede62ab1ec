"""The config change notices under /config/changes (server/cluster/config_manager.py)
against a real ZooKeeper: processed once each, in sequence order, as the watch fires; the
processed ones older than the expiration deleted (Kafka's 15 minutes)."""

from __future__ import annotations

from types import SimpleNamespace

import trio

from server.zookeeper import znodes as zn
from server.cluster.config_manager import CHANGE_EXPIRATION_MS, TopicConfigManager, sequence_of
from server.zookeeper.client import ZooKeeperClient
from server.topics import TopicRegistry
from tests.cluster.test_zk import SESSION_MS, run, wait_until


def test_sequence_of():
    assert sequence_of("config_change_0000000042") == 42
    assert sequence_of("something_else") == -1
    assert sequence_of("config_change_x") == -1
    assert CHANGE_EXPIRATION_MS == 15 * 60 * 1000


def test_notices_are_followed_in_order_and_old_ones_purged(tmp_path, zk_connect):
    async def main() -> None:
        async with ZooKeeperClient() as zk:
            await zk.start(zk_connect, SESSION_MS)
            await zk.ensure_persistent_paths()
            broker_notices: list[str] = []

            async def on_broker_notice(entity: str) -> None:
                broker_notices.append(entity)
            node = SimpleNamespace(zk=zk, broker=SimpleNamespace(topics=TopicRegistry(tmp_path)),
                                   controller=SimpleNamespace(active=False),
                                   broker_configs=SimpleNamespace(on_notice=on_broker_notice))
            manager = TopicConfigManager(node)
            processed: list[str] = []
            original = manager._process

            async def record(entity_path: str) -> None:
                processed.append(entity_path)
                await original(entity_path)
            manager._process = record

            async def notify(entity: str) -> int:
                path = await zk.create(zn.CONFIG_CHANGES_PATH + "/" + zn.CONFIG_CHANGE_PREFIX,
                                       zn.encode_config_change_notification(entity), sequential=True)
                return sequence_of(path.rsplit("/", 1)[1])

            first = await notify("topics/a")
            await notify("topics/b")
            await manager.run()  # arms the watch, whose first callback processes what is there
            await wait_until(lambda: len(processed) == 2)
            assert processed == ["topics/a", "topics/b"]
            third = await notify("topics/c")
            await wait_until(lambda: manager.last_processed == third)
            assert processed == ["topics/a", "topics/b", "topics/c"]
            assert third > first
            assert len(await zk.children(zn.CONFIG_CHANGES_PATH)) == 3  # all younger than 15 minutes

            manager.expiration_ms = 0  # everything processed is now old
            await trio.sleep(0.05)
            fourth = await notify("brokers/<default>")
            await wait_until(lambda: manager.last_processed == fourth)
            assert processed[-1] == "brokers/<default>"
            assert broker_notices[-1] == "<default>"  # handed to the dynamic broker configs
            with trio.fail_after(10):
                while await zk.children(zn.CONFIG_CHANGES_PATH):
                    await trio.sleep(0.05)  # the newest goes too: its ctime is before "now - 0"
            assert processed.count("topics/a") == 1  # each notice once

    run(main)
