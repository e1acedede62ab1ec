"""Who an append and a high watermark move wake on a leader (server/partition.py).

A follower's fetch parked on the leader reads to the log end offset: an append wakes it,
a high watermark moved by another follower's fetch does not (it would only read nothing
and park again). Consumers and acks=all produces wait for the high watermark: an append
that the followers have yet to confirm does not wake them; the fetch that moves it does.
On a single broker (no followers) every append moves the high watermark and wakes both.
"""

from __future__ import annotations

import time
import uuid

import trio

from server.partition import Partition
from server.producers import ProducerIdManager
from storage import LogConfig, PartitionLog
from wire.records import Record, build_batch, iter_headers


def _partition(tmp_path, replicas: list[int]) -> Partition:
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig())
    return Partition("t", 0, uuid.uuid4(), plog, node_id=1, producer_ids=ProducerIdManager(tmp_path),
                     replicas=replicas)


async def _append(partition: Partition) -> int:
    batch = build_batch([Record(0, int(time.time() * 1000), b"k", b"v")])
    await partition.append_records(batch, list(iter_headers(batch)), 1)
    return partition.log_end_offset


def _park(partition: Partition) -> tuple[trio.Event, trio.Event]:
    consumer, follower = trio.Event(), trio.Event()
    partition.waiters.add(consumer)
    partition.replica_waiters.add(follower)
    return consumer, follower


def test_leader_wakes_followers_on_appends_and_readers_on_the_high_watermark(tmp_path):
    async def main():
        partition = _partition(tmp_path, [1, 2, 3])
        now = int(time.time() * 1000)
        partition.make_leader(1, [1, 2, 3], [1, 2, 3], 0, now)
        for follower in (2, 3):
            partition.update_follower(follower, 0, now)

        consumer, follower = _park(partition)
        end = await _append(partition)
        assert partition.high_watermark == 0
        assert follower.is_set() and not consumer.is_set()

        consumer, follower = _park(partition)
        partition.update_follower(2, end, now)  # broker 3 has yet to confirm: no move
        assert partition.high_watermark == 0 and not consumer.is_set() and not follower.is_set()
        partition.update_follower(3, end, now)
        assert partition.high_watermark == end
        assert consumer.is_set() and not follower.is_set()

        consumer, follower = _park(partition)
        partition.make_follower(2, 2, [1, 2, 3], [1, 2, 3], 1)  # leadership moves: everyone looks again
        assert consumer.is_set() and follower.is_set()

    trio.run(main)


def test_single_broker_append_wakes_everyone(tmp_path):
    async def main():
        partition = _partition(tmp_path, [1])
        consumer, follower = _park(partition)
        end = await _append(partition)
        assert partition.high_watermark == end
        assert consumer.is_set() and follower.is_set()

    trio.run(main)
