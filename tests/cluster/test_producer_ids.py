"""Producer id blocks from /latest_producer_id_block on a real ZooKeeper: Kafka's znode
format, compare-and-set between racing brokers, one block kept ahead — and, through the
brokers, InitProducerId on three brokers never handing out the same id."""

from __future__ import annotations

import trio

from server.zookeeper import znodes
from server.cluster.producer_ids import ProducerIdBlocks
from server.zookeeper.client import ZooKeeperClient
from tests.cluster.clusterkit import Cluster
from tests.cluster.test_zk import SESSION_MS, run
from wire.registry import ApiKey


def test_blocks_follow_the_znode_and_never_overlap_between_racing_brokers(zk_connect):
    async def main():
        async with ZooKeeperClient() as zk1, ZooKeeperClient() as zk2, ZooKeeperClient() as zk3:
            for zk in (zk1, zk2, zk3):
                await zk.start(zk_connect, SESSION_MS)
            await zk1.ensure_persistent_paths()
            assert (await zk1.get(znodes.PRODUCER_ID_BLOCK_PATH))[0] == b""
            first = await ProducerIdBlocks(zk1, 1).take_block()
            assert first == znodes.ProducerIdBlock(1, 0, 999)
            data, stat = await zk1.get(znodes.PRODUCER_ID_BLOCK_PATH)
            assert data == b'{"version":1,"broker":1,"block_start":"0","block_end":"999"}'
            assert stat.version == 1

            # Three brokers taking small blocks at once: every CAS loser reads again.
            taken: list[znodes.ProducerIdBlock] = []
            allocators = [ProducerIdBlocks(zk, n, block_size=10) for n, zk in ((1, zk1), (2, zk2), (3, zk3))]

            async def take(a: ProducerIdBlocks) -> None:
                for _ in range(15):
                    taken.append(await a.take_block())

            async with trio.open_nursery() as nursery:
                for a in allocators:
                    nursery.start_soon(take, a)
            ids = [i for b in taken for i in range(b.first, b.last + 1)]
            assert len(ids) == len(set(ids)) == 45 * 10
            assert min(ids) == 1000 and max(ids) == 1000 + 450 - 1  # contiguous after the first block
            assert {b.broker_id for b in taken} == {1, 2, 3}
            last = znodes.ProducerIdBlock.decode((await zk2.get(znodes.PRODUCER_ID_BLOCK_PATH))[0])
            assert last.last == 1449

    run(main)


def test_next_block_is_taken_ahead(zk_connect):
    async def main():
        async with ZooKeeperClient() as zk:
            await zk.start(zk_connect, SESSION_MS)
            await zk.ensure_persistent_paths()
            blocks = ProducerIdBlocks(zk, 7, block_size=10)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(blocks.run)
                got = [await blocks.next_id() for _ in range(9)]
                assert got == list(range(9))
                with trio.fail_after(10):  # 90% used: the next block comes in the background
                    while not blocks.statistics()["block_ahead"]:
                        await trio.sleep(0.01)
                assert blocks.statistics()["blocks_taken"] == 2
                got = [await blocks.next_id() for _ in range(3)]
                assert got == [9, 10, 11]
                nursery.cancel_scope.cancel()

    run(main)


def test_brokers_never_hand_out_the_same_producer_id(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 3) as cluster:
        seen: dict[int, int] = {}
        body = {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
        for round_ in range(400):
            node = round_ % 3 + 1
            response = cluster.call(ApiKey.INIT_PRODUCER_ID, 4, body, node)
            assert response["error_code"] == 0, response
            pid = response["producer_id"]
            assert pid not in seen, f"producer id {pid} from broker {node} already given by broker {seen[pid]}"
            seen[pid] = node
        # Each broker took its own block(s) from ZooKeeper: ids from three disjoint ranges.
        by_block = {pid // 1000 for pid in seen}
        assert len(by_block) >= 3
