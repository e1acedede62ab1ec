"""The transaction coordinator per __transaction_state partition: ids of a partition this
broker stops leading (`unload_partition`) answer NOT_COORDINATOR, come back with their
state when it is loaded again (`load_partition`, a PrepareCommit finished under the new
coordinator epoch), and answer COORDINATOR_LOAD_IN_PROGRESS while the load runs.

In-process on a real broker (no mocks): in a cluster the lead's LeaderAndIsr handling
makes these calls, which a single broker never receives over the wire. A slow load is
made by holding the partition's write lock, which the load takes before replaying.
"""

from __future__ import annotations

import itertools

import trio

from server.broker import Broker
from server.config import load_config
from server.context import RequestContext
from server.coordinator_log import partition_for_key
from server.handlers import HANDLERS
from server.session import Session
from server.txn import TxnState
from wire.connection import decode_request, decode_response, encode_request, encode_response
from wire.errors import ErrorCode as E
from wire.records import ControlType, Record, build_batch, read_txn_marker
from wire.registry import ApiKey

PARTITIONS = 4
_correlation = itertools.count(1)


def open_broker(tmp_path) -> Broker:
    broker = Broker(load_config(overrides={"log.dirs": str(tmp_path), "listeners": "127.0.0.1:9092",
                                           "transaction.state.log.num.partitions": str(PARTITIONS)}, environ={}))
    broker.open()
    broker.create_topic("t", 1)
    return broker


def run(broker: Broker, main) -> None:
    async def runner():
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.groups.run)
            await nursery.start(broker.txn.run)
            await main(nursery)
            nursery.cancel_scope.cancel()

    try:
        trio.run(runner)
    finally:
        broker.close()


async def call_api(broker: Broker, api_key: int, version: int, body: dict) -> dict:
    correlation = next(_correlation)
    frame = encode_request(api_key, version, correlation, body, client_id="test")
    request = decode_request(frame[4:])
    ctx = RequestContext(broker, Session("127.0.0.1", 50000), api_key, version, correlation, "test")
    response = await HANDLERS[api_key].handle(ctx, request.body)
    raw = encode_response(api_key, version, correlation, response)
    return decode_response(api_key, version, raw[4:])[1]


def two_ids() -> tuple[str, str]:
    first = "tx-a"
    other = next(f"tx-{i}" for i in range(100)
                 if partition_for_key(f"tx-{i}", PARTITIONS) != partition_for_key(first, PARTITIONS))
    return first, other


async def begin(broker: Broker, tid: str) -> tuple[int, int]:
    """InitProducerId, AddPartitionsToTxn t-0 and one transactional batch there."""
    txn = broker.txn
    r = await txn.init_producer_id(tid, 60000)
    assert r.error == E.NONE
    assert await txn.add_partitions(tid, r.producer_id, r.producer_epoch, {("t", 0)}) == E.NONE
    batch = build_batch([Record(0, 1_700_000_000_000, None, b"v")], producer_id=r.producer_id,
                        producer_epoch=r.producer_epoch, base_sequence=0, is_transactional=True)
    answer = await call_api(broker, ApiKey.PRODUCE, 9, {"transactional_id": tid, "acks": -1, "timeout_ms": 5000,
                                                       "topic_data": [{"name": "t", "partition_data": [
                                                           {"index": 0, "records": bytes(batch)}]}]})
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == E.NONE
    return r.producer_id, r.producer_epoch


def markers(broker: Broker) -> list[tuple[ControlType, int]]:
    plog = broker.logs.log("t", 0)
    return [read_txn_marker(data) for header, data in plog.iter_batches(plog.log_start_offset) if header.is_control]


async def wait_for_state(broker: Broker, tid: str, state: TxnState) -> None:
    with trio.fail_after(10):
        while (m := broker.txn.txns.get(tid)) is None or m.state != state or m.pending:
            await trio.sleep(0.01)


def test_unloaded_ids_answer_not_coordinator_and_a_prepare_commit_resumes_after_load(tmp_path):
    broker = open_broker(tmp_path)
    txn = broker.txn
    moved, kept = two_ids()
    p = txn.log.partition_for(moved)

    async def main(nursery):
        pid, epoch = await begin(broker, moved)
        await begin(broker, kept)
        lock = txn.log.lock(p)
        assert await txn.end_txn(moved, pid, epoch, True) == E.NONE
        # PrepareCommit is written; holding the lock keeps CompleteCommit from being written.
        await lock.acquire()
        with trio.fail_after(10):
            while not markers(broker):
                await trio.sleep(0.01)
        txn.unload_partition(p, 1)
        lock.release()
        await trio.sleep(0.2)  # the marker task finds the id gone and stops
        assert moved not in txn.txns and not txn.owns(p)

        assert (await txn.init_producer_id(moved, 60000)).error == E.NOT_COORDINATOR
        assert await txn.add_partitions(moved, pid, epoch, {("t", 0)}) == E.NOT_COORDINATOR
        assert await txn.end_txn(moved, pid, epoch, True) == E.NOT_COORDINATOR
        assert txn.verify_partition(moved, pid, epoch, ("t", 0)) == E.NOT_COORDINATOR
        assert txn.describe(moved) == (E.NOT_COORDINATOR, None)
        code, listed, _ = txn.list(None, None)
        assert code == E.NONE and [m.transactional_id for m in listed] == [kept]
        described = await call_api(broker, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [moved, kept]})
        assert [s["error_code"] for s in described["transaction_states"]] == [E.NOT_COORDINATOR, E.NONE]
        init = await call_api(broker, ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": moved,
                                                                  "transaction_timeout_ms": 60000,
                                                                  "producer_id": -1, "producer_epoch": -1})
        assert init["error_code"] == E.NOT_COORDINATOR
        added = await call_api(broker, ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": moved, "producer_id": pid,
                                                                      "producer_epoch": epoch, "group_id": "g"})
        assert added["error_code"] == E.NOT_COORDINATOR

        await txn.load_partition(p, 0)  # older than the unload's epoch: skipped
        assert not txn.owns(p)
        await txn.load_partition(p, 5)
        assert txn.owns(p) and txn.log.epoch(p) == 5
        # The PrepareCommit is finished: markers again, under the new coordinator epoch.
        await wait_for_state(broker, moved, TxnState.COMPLETE_COMMIT)
        assert markers(broker)[-1] == (ControlType.COMMIT, 5)
        m = txn.txns[moved]
        assert (m.producer_id, m.producer_epoch) == (pid, epoch)
        assert (await txn.init_producer_id(moved, 60000, pid, epoch)).producer_epoch == epoch + 1

    run(broker, main)


def test_ids_of_a_loading_partition_answer_load_in_progress(tmp_path):
    broker = open_broker(tmp_path)
    txn = broker.txn
    moved, kept = two_ids()
    p = txn.log.partition_for(moved)

    async def main(nursery):
        pid, epoch = await begin(broker, moved)
        txn.unload_partition(p, 1)
        lock = txn.log.lock(p)
        await lock.acquire()
        done = trio.Event()

        async def load():
            await txn.load_partition(p, 2)
            done.set()

        nursery.start_soon(load)
        await trio.sleep(0.05)
        assert p in txn.log.loading
        assert (await txn.init_producer_id(moved, 60000)).error == E.COORDINATOR_LOAD_IN_PROGRESS
        assert await txn.end_txn(moved, pid, epoch, False) == E.COORDINATOR_LOAD_IN_PROGRESS
        assert txn.verify_partition(moved, pid, epoch, ("t", 0)) == E.COORDINATOR_LOAD_IN_PROGRESS
        assert txn.describe(moved) == (E.COORDINATOR_LOAD_IN_PROGRESS, None)
        assert txn.list(None, None)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
        listed = await call_api(broker, ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []})
        assert listed["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
        assert (await txn.init_producer_id(kept, 60000)).error == E.NONE  # other partitions answer

        lock.release()
        with trio.fail_after(10):
            await done.wait()
        m = txn.txns[moved]
        assert m.state == TxnState.ONGOING and m.partitions == {("t", 0)}
        assert await txn.end_txn(moved, pid, epoch, False) == E.NONE
        await wait_for_state(broker, moved, TxnState.COMPLETE_ABORT)
        assert markers(broker)[-1] == (ControlType.ABORT, 2)

    run(broker, main)
