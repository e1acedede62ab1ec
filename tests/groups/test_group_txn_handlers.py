"""TxnOffsetCommit over the wire, with the transaction coordinator deciding: the offsets
partition must be in the producer's transaction (AddOffsetsToTxn), the offsets stay
unstable until EndTxn, then they are committed or gone.

These need `broker.txn` (the transaction coordinator, server/txn/); they skip without it.
"""

from __future__ import annotations

import pytest
import trio

from wire.errors import ErrorCode as E
from wire.registry import API_VERSIONS, ApiKey as K

TXN_ID = "tx-1"


def needs_txn(env) -> None:
    if not hasattr(env.broker, "txn"):
        pytest.skip("needs the transaction coordinator (broker.txn)")


async def start_txn_coordinator(env) -> None:
    run = getattr(env.broker.txn, "run", None)
    if run is not None:
        await env.nursery.start(run)


async def init_producer(env) -> tuple[int, int]:
    r = await env.call_api(K.INIT_PRODUCER_ID, 1, {"transactional_id": TXN_ID, "transaction_timeout_ms": 60_000})
    assert r["error_code"] == E.NONE
    return r["producer_id"], r["producer_epoch"]


async def add_offsets(env, pid: int, epoch: int, group: str = "g") -> int:
    r = await env.call_api(K.ADD_OFFSETS_TO_TXN, 1, {"transactional_id": TXN_ID, "producer_id": pid,
                                                      "producer_epoch": epoch, "group_id": group})
    return r["error_code"]


def txn_commit_body(version: int, pid: int, epoch: int, offsets: dict, group: str = "g") -> dict:
    topics: dict[str, list] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o, "committed_leader_epoch": 0,
                                         "committed_metadata": "md"})
    return {"transactional_id": TXN_ID, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
            "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


async def txn_commit(env, version: int, pid: int, epoch: int, offsets: dict) -> dict:
    r = await env.call_api(K.TXN_OFFSET_COMMIT, version, txn_commit_body(version, pid, epoch, offsets))
    return {(t["name"], p["partition_index"]): p["error_code"] for t in r["topics"] for p in t["partitions"]}


async def end_txn(env, pid: int, epoch: int, commit: bool) -> int:
    r = await env.call_api(K.END_TXN, 1, {"transactional_id": TXN_ID, "producer_id": pid, "producer_epoch": epoch,
                                          "committed": commit})
    return r["error_code"]


async def fetch_stable(env, partitions: list[int]) -> dict:
    r = await env.call_api(K.OFFSET_FETCH, 7, {"group_id": "g", "require_stable": True,
                                               "topics": [{"name": "t", "partition_indexes": partitions}]})
    return {p["partition_index"]: (p["committed_offset"], p["error_code"]) for p in r["topics"][0]["partitions"]}


async def wait_stable(env, partitions: list[int]) -> dict:
    """What a consumer with isolation.level=read_committed does: retry while unstable."""
    with trio.fail_after(30):
        while True:
            got = await fetch_stable(env, partitions)
            if all(code != E.UNSTABLE_OFFSET_COMMIT for _, code in got.values()):
                return got
            await trio.sleep(0.1)


VERSIONS = range(API_VERSIONS[K.TXN_OFFSET_COMMIT][0], API_VERSIONS[K.TXN_OFFSET_COMMIT][1] + 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_partitions_are_answered_without_a_transaction_check(group_env, version):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        errors = await txn_commit(env, version, 1000, 0, {("t", 4): 5, ("x", 0): 1})
        assert errors == {("t", 4): E.UNKNOWN_TOPIC_OR_PARTITION, ("x", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert "g" not in env.groups.groups

    env.run(main)


@pytest.mark.parametrize("version", VERSIONS)
def test_txn_offset_commit_then_end_txn_at_every_version(group_env, version):
    env = group_env()
    needs_txn(env)
    env.create_topic("t", 2)

    async def main(env):
        await start_txn_coordinator(env)
        pid, epoch = await init_producer(env)
        assert await add_offsets(env, pid, epoch) == E.NONE
        errors = await txn_commit(env, version, pid, epoch, {("t", 0): 5, ("t", 1): 6, ("x", 0): 1})
        assert errors == {("t", 0): E.NONE, ("t", 1): E.NONE, ("x", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert await fetch_stable(env, [0, 1]) == {0: (-1, E.UNSTABLE_OFFSET_COMMIT), 1: (-1, E.UNSTABLE_OFFSET_COMMIT)}
        assert await end_txn(env, pid, epoch, True) == E.NONE
        assert await wait_stable(env, [0, 1]) == {0: (5, E.NONE), 1: (6, E.NONE)}

    env.run(main)


def test_aborted_txn_offsets_never_show(group_env):
    env = group_env()
    needs_txn(env)
    env.create_topic("t", 1)

    async def main(env):
        await start_txn_coordinator(env)
        pid, epoch = await init_producer(env)
        assert await add_offsets(env, pid, epoch) == E.NONE
        assert await txn_commit(env, 3, pid, epoch, {("t", 0): 5}) == {("t", 0): E.NONE}
        assert await end_txn(env, pid, epoch, False) == E.NONE
        assert await wait_stable(env, [0]) == {0: (-1, E.NONE)}

    env.run(main)


def test_txn_offset_commit_outside_the_transaction_is_refused(group_env):
    env = group_env()
    needs_txn(env)
    env.create_topic("t", 1)

    async def main(env):
        await start_txn_coordinator(env)
        pid, old_epoch = await init_producer(env)
        pid_again, epoch = await init_producer(env)  # a new instance of the producer fences the old
        assert pid_again == pid and epoch > old_epoch
        # No AddOffsetsToTxn: the offsets partition is not in the transaction (KIP-890).
        assert await txn_commit(env, 3, pid, epoch, {("t", 0): 5}) == {("t", 0): E.INVALID_TXN_STATE}
        assert env.groups.pending_txn_partitions("g") == set()
        assert await add_offsets(env, pid, epoch) == E.NONE
        # A stale epoch is a fenced producer.
        assert await txn_commit(env, 3, pid, old_epoch, {("t", 0): 5}) == {("t", 0): E.INVALID_PRODUCER_EPOCH}
        assert env.groups.pending_txn_partitions("g") == set()

    env.run(main)
