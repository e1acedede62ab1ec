"""The transaction coordinator over the wire: InitProducerId with a transactional id,
AddPartitionsToTxn, EndTxn, KIP-890 verification on Produce, zombie fencing, timeouts,
Describe/ListTransactions, read_committed Fetch and ListOffsets, and recovery after kill -9.

Raw requests against a broker subprocess, so each error code is seen exactly as a client
sees it; the stock clients run the same flows in compat_tests/test_transactions.py.
"""

from __future__ import annotations

import time

import pytest

from tests.brokerproc import BrokerProcess, raw_request
from wire.errors import ErrorCode as E
from wire.records import Record, build_batch, iter_headers, read_txn_marker
from wire.registry import ApiKey

HOST = "127.0.0.1"
FAST_TIMEOUTS = ("--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200")


def call(broker: BrokerProcess, key: ApiKey, version: int, body: dict) -> dict:
    return raw_request(HOST, broker.port, key, version, body)


def create(broker: BrokerProcess, topic: str, partitions: int = 1) -> None:
    body = {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout_ms": 10000, "validate_only": False}
    assert call(broker, ApiKey.CREATE_TOPICS, 5, body)["topics"][0]["error_code"] == 0


def init(broker: BrokerProcess, tid: str, timeout_ms: int = 60000, pid: int = -1, epoch: int = -1,
         retry_concurrent: bool = True) -> dict:
    deadline = time.monotonic() + 15
    while True:
        answer = call(broker, ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": tid, "transaction_timeout_ms": timeout_ms,
                                                           "producer_id": pid, "producer_epoch": epoch})
        if not retry_concurrent or answer["error_code"] != E.CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
            return answer
        time.sleep(0.05)


def add_partitions(broker, tid, pid, epoch, topic, partitions, version: int = 3) -> dict[int, int]:
    body = {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": partitions}]}
    answer = call(broker, ApiKey.ADD_PARTITIONS_TO_TXN, version, body)
    return {r["partition_index"]: r["partition_error_code"]
            for t in answer["results_by_topic_v3_and_below"] for r in t["results_by_partition"]}


def end(broker, tid, pid, epoch, commit: bool) -> int:
    return call(broker, ApiKey.END_TXN, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                            "committed": commit})["error_code"]


def end_and_wait(broker, tid, pid, epoch, commit: bool) -> None:
    assert end(broker, tid, pid, epoch, commit) == E.NONE
    wanted = "CompleteCommit" if commit else "CompleteAbort"
    deadline = time.monotonic() + 10
    while describe(broker, tid)["transaction_state"] != wanted:
        assert time.monotonic() < deadline, describe(broker, tid)
        time.sleep(0.02)


def produce(broker, topic, partition, pid, epoch, seq, values, tid: str | None, transactional: bool = True) -> dict:
    batch = build_batch([Record(i, 1_700_000_000_000, None, v) for i, v in enumerate(values)], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, is_transactional=transactional)
    answer = call(broker, ApiKey.PRODUCE, 9, {"transactional_id": tid, "acks": -1, "timeout_ms": 5000,
                                              "topic_data": [{"name": topic, "partition_data": [
                                                  {"index": partition, "records": bytes(batch)}]}]})
    return answer["responses"][0]["partition_responses"][0]


def fetch(broker, topic, partition, offset, isolation: int) -> dict:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": isolation,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                                        "fetch_offset": offset, "log_start_offset": -1,
                                                        "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    return call(broker, ApiKey.FETCH, 12, body)["responses"][0]["partitions"][0]


def list_latest(broker, topic, partition, isolation: int) -> int:
    body = {"replica_id": -1, "isolation_level": isolation,
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                       "timestamp": -1}]}]}
    return call(broker, ApiKey.LIST_OFFSETS, 5, body)["topics"][0]["partitions"][0]["offset"]


def describe(broker, tid) -> dict:
    return call(broker, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]})["transaction_states"][0]


def batches(records: bytes):
    return [(h, bytes(records[pos:pos + h.size])) for pos, h in iter_headers(records)]


def test_commit_abort_lso_and_aborted_transactions(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        create(broker, "t")
        first = init(broker, "tx")
        assert first["error_code"] == E.NONE and first["producer_epoch"] == 0
        pid, epoch = first["producer_id"], first["producer_epoch"]
        assert add_partitions(broker, "tx", pid, epoch, "t", [0]) == {0: E.NONE}
        assert produce(broker, "t", 0, pid, epoch, 0, [b"a", b"b"], "tx")["error_code"] == E.NONE
        # Open transaction: read_committed stops at its first offset (the LSO), read_uncommitted does not.
        assert list_latest(broker, "t", 0, 1) == 0 and list_latest(broker, "t", 0, 0) == 2
        committed = fetch(broker, "t", 0, 0, 1)
        assert committed["last_stable_offset"] == 0 and committed["high_watermark"] == 2
        assert not committed["records"] and committed["aborted_transactions"] == []
        uncommitted = fetch(broker, "t", 0, 0, 0)
        assert uncommitted["aborted_transactions"] is None and len(batches(uncommitted["records"])) == 1
        end_and_wait(broker, "tx", pid, epoch, commit=False)
        # After the abort: a marker at offset 2, the LSO at the log end, an aborted range.
        assert list_latest(broker, "t", 0, 1) == 3
        after = fetch(broker, "t", 0, 0, 1)
        assert after["aborted_transactions"] == [{"producer_id": pid, "first_offset": 0}]
        found = batches(after["records"])
        assert [h.is_control for h, _ in found] == [False, True]
        kind, coordinator_epoch = read_txn_marker(found[1][1])
        assert kind.name == "ABORT" and coordinator_epoch == 0
        # A committed transaction after it: no new aborted range.
        assert add_partitions(broker, "tx", pid, epoch, "t", [0]) == {0: E.NONE}
        assert produce(broker, "t", 0, pid, epoch, 2, [b"c"], "tx")["error_code"] == E.NONE
        end_and_wait(broker, "tx", pid, epoch, commit=True)
        tail = fetch(broker, "t", 0, 3, 1)
        assert tail["aborted_transactions"] == [] and tail["last_stable_offset"] == 5
        assert [h.is_control for h, _ in batches(tail["records"])] == [False, True]


def test_produce_to_a_partition_not_in_the_transaction_is_invalid_txn_state(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        create(broker, "t", 2)
        answer = init(broker, "tx")
        pid, epoch = answer["producer_id"], answer["producer_epoch"]
        assert add_partitions(broker, "tx", pid, epoch, "t", [0]) == {0: E.NONE}
        assert produce(broker, "t", 1, pid, epoch, 0, [b"x"], "tx")["error_code"] == E.INVALID_TXN_STATE
        # transactional batches without a transactional id: Kafka's KafkaApis refuses them before
        # anything else, with or without an authorizer
        assert produce(broker, "t", 0, pid, epoch, 0, [b"x"], None)["error_code"] == \
            E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert produce(broker, "t", 0, pid, epoch, 0, [b"x"], "tx")["error_code"] == E.NONE
        # a plain (non-transactional) batch from a producer inside its transaction
        assert produce(broker, "t", 0, pid, epoch, 1, [b"y"], None, transactional=False)["error_code"] == \
            E.INVALID_TXN_STATE
        # unknown partitions in AddPartitionsToTxn: that one UNKNOWN, the rest not attempted
        assert add_partitions(broker, "tx", pid, epoch, "t", [1, 7]) == {1: E.OPERATION_NOT_ATTEMPTED,
                                                                         7: E.UNKNOWN_TOPIC_OR_PARTITION}


def test_misuse_answers_kafkas_codes(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        create(broker, "t")
        assert init(broker, "tx", timeout_ms=900_001)["error_code"] == E.INVALID_TRANSACTION_TIMEOUT
        assert init(broker, "tx", timeout_ms=0)["error_code"] == E.INVALID_TRANSACTION_TIMEOUT
        answer = init(broker, "tx")
        pid, epoch = answer["producer_id"], answer["producer_epoch"]
        assert end(broker, "tx", pid, epoch, True) == E.INVALID_TXN_STATE  # nothing open
        assert end(broker, "nobody", pid, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
        assert end(broker, "tx", pid + 1, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
        assert add_partitions(broker, "tx", pid, epoch + 1, "t", [0]) == {0: E.PRODUCER_FENCED}
        assert add_partitions(broker, "tx", pid, epoch, "t", [0]) == {0: E.NONE}
        end_and_wait(broker, "tx", pid, epoch, commit=True)
        assert end(broker, "tx", pid, epoch, True) == E.NONE  # a retried commit
        assert end(broker, "tx", pid, epoch, False) == E.INVALID_TXN_STATE  # abort after commit
        # a client control batch is never accepted
        marker = bytearray(build_batch([Record(0, 0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
                                       producer_id=pid, producer_epoch=epoch, is_transactional=True,
                                       is_control=True))
        got = call(broker, ApiKey.PRODUCE, 9, {"transactional_id": "tx", "acks": -1, "timeout_ms": 5000,
                                               "topic_data": [{"name": "t", "partition_data": [
                                                   {"index": 0, "records": bytes(marker)}]}]})
        assert got["responses"][0]["partition_responses"][0]["error_code"] == E.INVALID_RECORD


def test_a_new_instance_fences_the_zombie_and_aborts_its_transaction(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        create(broker, "t")
        old = init(broker, "tx")
        pid, epoch = old["producer_id"], old["producer_epoch"]
        assert add_partitions(broker, "tx", pid, epoch, "t", [0]) == {0: E.NONE}
        assert produce(broker, "t", 0, pid, epoch, 0, [b"zombie"], "tx")["error_code"] == E.NONE
        # The first call of the new instance aborts the open transaction and asks to retry.
        first = init(broker, "tx", retry_concurrent=False)
        assert first["error_code"] == E.CONCURRENT_TRANSACTIONS
        new = init(broker, "tx")
        assert new["error_code"] == E.NONE and new["producer_id"] == pid and new["producer_epoch"] > epoch + 1
        assert describe(broker, "tx")["transaction_state"] == "Empty"
        # The zombie: fenced at the coordinator, its writes refused at the partition.
        assert add_partitions(broker, "tx", pid, epoch, "t", [0]) == {0: E.PRODUCER_FENCED}
        assert end(broker, "tx", pid, epoch, True) == E.PRODUCER_FENCED
        assert produce(broker, "t", 0, pid, epoch, 1, [b"late"], "tx")["error_code"] in (
            E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED)
        assert fetch(broker, "t", 0, 0, 1)["aborted_transactions"] == [{"producer_id": pid, "first_offset": 0}]
        # KIP-360: the current instance may re-init with its own id and epoch
        again = init(broker, "tx", pid=pid, epoch=new["producer_epoch"])
        assert again["error_code"] == E.NONE and again["producer_epoch"] == new["producer_epoch"] + 1
        assert init(broker, "tx", pid=pid, epoch=epoch)["error_code"] == E.PRODUCER_FENCED


def test_a_transaction_past_its_timeout_is_aborted(tmp_path):
    with BrokerProcess(tmp_path / "data", *FAST_TIMEOUTS) as broker:
        create(broker, "t")
        answer = init(broker, "tx", timeout_ms=500)
        pid, epoch = answer["producer_id"], answer["producer_epoch"]
        assert add_partitions(broker, "tx", pid, epoch, "t", [0]) == {0: E.NONE}
        assert produce(broker, "t", 0, pid, epoch, 0, [b"slow"], "tx")["error_code"] == E.NONE
        deadline = time.monotonic() + 10
        while describe(broker, "tx")["transaction_state"] != "CompleteAbort":
            assert time.monotonic() < deadline, describe(broker, "tx")
            time.sleep(0.05)
        assert describe(broker, "tx")["producer_epoch"] == epoch + 1  # fenced
        assert end(broker, "tx", pid, epoch, True) == E.PRODUCER_FENCED
        assert list_latest(broker, "t", 0, 1) == 2  # the record and the ABORT marker
        assert fetch(broker, "t", 0, 0, 1)["aborted_transactions"] == [{"producer_id": pid, "first_offset": 0}]


def test_describe_and_list_transactions(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        create(broker, "t", 2)
        a = init(broker, "tx-a")
        init(broker, "tx-b")
        assert add_partitions(broker, "tx-a", a["producer_id"], a["producer_epoch"], "t", [1, 0]) == \
            {0: E.NONE, 1: E.NONE}
        state = describe(broker, "tx-a")
        assert state["error_code"] == E.NONE and state["transaction_state"] == "Ongoing"
        assert state["topics"] == [{"topic": "t", "partitions": [0, 1]}] and state["transaction_start_time_ms"] > 0
        assert describe(broker, "nope")["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND
        listed = call(broker, ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": ["ongoing", "Nonsense"],
                                                           "producer_id_filters": [], "duration_filter": -1})
        assert [s["transactional_id"] for s in listed["transaction_states"]] == ["tx-a"]
        assert listed["unknown_state_filters"] == ["Nonsense"]
        everything = call(broker, ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []})
        assert sorted(s["transactional_id"] for s in everything["transaction_states"]) == ["tx-a", "tx-b"]
        long_running = call(broker, ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": [], "producer_id_filters": [],
                                                                 "duration_filter": 3_600_000})
        # tx-a's transaction started just now; tx-b runs none (start -1), and Kafka 4.4 lists
        # such an id under any duration filter (now - start > filter).
        assert [s["transactional_id"] for s in long_running["transaction_states"]] == ["tx-b"]


def test_verify_only_add_partitions_v4(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        create(broker, "t", 2)
        a = init(broker, "tx")
        pid, epoch = a["producer_id"], a["producer_epoch"]
        assert add_partitions(broker, "tx", pid, epoch, "t", [0]) == {0: E.NONE}
        body = {"transactions": [{"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch,
                                  "verify_only": True, "topics": [{"name": "t", "partitions": [0, 1]}]}]}
        answer = call(broker, ApiKey.ADD_PARTITIONS_TO_TXN, 4, body)
        assert answer["error_code"] == E.NONE
        codes = {r["partition_index"]: r["partition_error_code"]
                 for r in answer["results_by_transaction"][0]["topic_results"][0]["results_by_partition"]}
        assert codes == {0: E.NONE, 1: E.INVALID_TXN_STATE}


@pytest.mark.parametrize("stop", ["kill", "restart"])
def test_recovery_after_a_stop_mid_transaction(tmp_path, stop):
    """Ongoing transactions survive a stop (kill -9 or clean) in __transaction_state and in
    the partitions' producer state: the LSO holds until the coordinator aborts them; the
    aborted-transaction index is rebuilt; a committed one stays committed."""
    with BrokerProcess(tmp_path / "data", *FAST_TIMEOUTS) as broker:
        create(broker, "t")
        a = init(broker, "committed")
        assert add_partitions(broker, "committed", a["producer_id"], a["producer_epoch"], "t", [0]) == {0: E.NONE}
        assert produce(broker, "t", 0, a["producer_id"], a["producer_epoch"], 0, [b"c"], "committed")["error_code"] == 0
        end_and_wait(broker, "committed", a["producer_id"], a["producer_epoch"], commit=True)
        b = init(broker, "aborted")
        assert add_partitions(broker, "aborted", b["producer_id"], b["producer_epoch"], "t", [0]) == {0: E.NONE}
        assert produce(broker, "t", 0, b["producer_id"], b["producer_epoch"], 0, [b"x"], "aborted")["error_code"] == 0
        end_and_wait(broker, "aborted", b["producer_id"], b["producer_epoch"], commit=False)
        c = init(broker, "open", timeout_ms=3000)
        assert add_partitions(broker, "open", c["producer_id"], c["producer_epoch"], "t", [0]) == {0: E.NONE}
        assert produce(broker, "t", 0, c["producer_id"], c["producer_epoch"], 0, [b"o"], "open")["error_code"] == 0
        assert list_latest(broker, "t", 0, 1) == 4
        if stop == "kill":
            broker.kill()
            broker.start()
        else:
            broker.restart()
        assert describe(broker, "committed")["transaction_state"] == "CompleteCommit"
        assert describe(broker, "aborted")["transaction_state"] == "CompleteAbort"
        assert fetch(broker, "t", 0, 0, 1)["aborted_transactions"] == [
            {"producer_id": b["producer_id"], "first_offset": 2}]
        # the open one still holds the LSO until its timeout aborts it
        assert list_latest(broker, "t", 0, 1) == 4 or describe(broker, "open")["transaction_state"] != "Ongoing"
        deadline = time.monotonic() + 15
        while describe(broker, "open")["transaction_state"] != "CompleteAbort":
            assert time.monotonic() < deadline, describe(broker, "open")
            time.sleep(0.05)
        assert list_latest(broker, "t", 0, 1) == 6
        assert fetch(broker, "t", 0, 0, 1)["aborted_transactions"] == [
            {"producer_id": b["producer_id"], "first_offset": 2}, {"producer_id": c["producer_id"], "first_offset": 4}]


def test_the_lso_never_lags_the_log_start_offset(tmp_path):
    """DeleteRecords past the start of an open transaction: read_committed consumers are
    told a last stable offset inside the log, not one below its start."""
    with BrokerProcess(tmp_path / "data") as broker:
        create(broker, "t")
        a = init(broker, "tx")
        assert add_partitions(broker, "tx", a["producer_id"], a["producer_epoch"], "t", [0]) == {0: E.NONE}
        assert produce(broker, "t", 0, a["producer_id"], a["producer_epoch"], 0, [b"open"], "tx")["error_code"] == 0
        assert produce(broker, "t", 0, -1, -1, -1, [b"p1", b"p2", b"p3"], None, transactional=False)["error_code"] == 0
        assert list_latest(broker, "t", 0, 1) == 0
        deleted = call(broker, ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "offset": 2}]}], "timeout_ms": 5000})
        assert deleted["topics"][0]["partitions"][0]["error_code"] == E.NONE
        assert list_latest(broker, "t", 0, 1) == 2
        assert fetch(broker, "t", 0, 2, 1)["last_stable_offset"] == 2
