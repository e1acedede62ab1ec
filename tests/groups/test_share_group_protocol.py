"""Share groups (KIP-932) over real sockets with raw v1 requests: membership and epochs, the
simple assignor, share sessions, acquisition, acknowledgements, lock expiry, the delivery
count limit, long polls, durability across a restart, and the error codes of bad input.

One broker process per test (short locks: `group.share.record.lock.duration.ms`=1000).
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from tests.brokerproc import BrokerProcess, raw_request
from tests.groups.share_wire import ShareClient, acquired, create_topic, offsets, partition_entry, produce
from wire.errors import ErrorCode as E
from wire.registry import ApiKey as K

pytest.importorskip("confluent_kafka")

ACCEPT, RELEASE, REJECT, GAP = 1, 2, 3, 0
LOCK_MS = 1000


@pytest.fixture
def broker(tmp_path):
    with BrokerProcess(tmp_path / "data", "--set", f"group.share.record.lock.duration.ms={LOCK_MS}",
                       "--set", "group.share.delivery.count.limit=3",
                       "--set", "group.share.session.timeout.ms=3000",
                       "--set", "group.share.heartbeat.interval.ms=500") as b:
        yield b


def _assigned(response: dict) -> dict[uuid.UUID, list[int]]:
    assignment = response["assignment"]
    return {t["topic_id"]: sorted(t["partitions"]) for t in assignment["topic_partitions"]} if assignment else {}


def test_heartbeat_join_epochs_assignor_and_leave(broker):
    tid = create_topic(broker.bootstrap, "q", 2)
    a, b, c = (ShareClient(broker, "g") for _ in range(3))
    ra = a.join("q")
    assert ra["member_id"] == a.member and ra["member_epoch"] == 1 and ra["heartbeat_interval_ms"] == 500
    assert _assigned(ra) == {tid: [0, 1]}
    same = a.heartbeat()
    assert same["error_code"] == 0 and same["member_epoch"] == 1 and same["assignment"] is None
    # A second member: the group epoch moves, partitions are spread over both.
    rb = b.join("q")
    assert rb["member_epoch"] == 2 and len(_assigned(rb)[tid]) == 1
    ra = a.heartbeat()
    assert ra["member_epoch"] == 2 and len(_assigned(ra)[tid]) == 1
    assert set(_assigned(ra)[tid]) | set(_assigned(rb)[tid]) == {0, 1}
    # A third member on two partitions: every member gets one, one partition is shared.
    rc = c.join("q")
    assert len(_assigned(rc)[tid]) == 1
    # Stale and unknown epochs.
    assert a.heartbeat(epoch=1)["error_code"] == E.FENCED_MEMBER_EPOCH
    assert a.heartbeat(epoch=99)["error_code"] == E.FENCED_MEMBER_EPOCH
    assert a.heartbeat(epoch=3, member="nobody")["error_code"] == E.UNKNOWN_MEMBER_ID
    assert a.heartbeat(epoch=-1, member="nobody")["error_code"] == E.UNKNOWN_MEMBER_ID
    # Describe shows three members, then leave.
    d = a.describe("g", "missing")["groups"]
    assert d[0]["error_code"] == 0 and d[0]["group_state"] == "Stable" and len(d[0]["members"]) == 3
    assert d[0]["members"][0]["assignment"]["topic_partitions"][0]["topic_name"] == "q"
    assert d[1]["error_code"] == E.GROUP_ID_NOT_FOUND
    left = c.heartbeat(epoch=-1)
    assert left["error_code"] == 0 and left["member_epoch"] == -1
    assert len(a.describe()["groups"][0]["members"]) == 2


def test_heartbeat_bad_input_and_group_type(broker):
    create_topic(broker.bootstrap, "q")
    m = ShareClient(broker, "g")
    assert m.heartbeat(0, ["q"], member="")["error_code"] == E.INVALID_REQUEST
    assert m.heartbeat(0, None)["error_code"] == E.INVALID_REQUEST     # join without topics
    assert m.heartbeat(-2, ["q"])["error_code"] == E.INVALID_REQUEST
    # A classic group's id (it has committed offsets) is not a share group's.
    commit = raw_request("127.0.0.1", broker.port, K.OFFSET_COMMIT, 2, {
        "group_id": "classic", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
        "topics": [{"name": "q", "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                  "committed_metadata": ""}]}]})
    assert commit["topics"][0]["partitions"][0]["error_code"] == 0
    r = ShareClient(broker, "classic").heartbeat(0, ["q"])
    assert r["error_code"] == E.GROUP_ID_NOT_FOUND and "not a share group" in r["error_message"]
    d = m.describe("classic")["groups"][0]
    assert d["error_code"] == E.GROUP_ID_NOT_FOUND


def test_fetch_accept_and_session_epochs(broker):
    tid = create_topic(broker.bootstrap, "q")
    m = ShareClient(broker, "g")
    m.join("q")  # initialises the share partition at latest (the end of the empty log)
    produce(broker.bootstrap, "q", 10)
    # Sessions: no session yet, acknowledgements on the opening request.
    assert m.fetch(tid, epoch=3)["error_code"] == E.SHARE_SESSION_NOT_FOUND
    assert m.fetch(tid, epoch=0, acks={0: [(0, 0, [ACCEPT])]})["error_code"] == E.INVALID_REQUEST
    assert m.acknowledge(tid, {0: [(0, 0, [ACCEPT])]}, epoch=0)["error_code"] == E.INVALID_SHARE_SESSION_EPOCH
    first = m.fetch(tid, max_wait_ms=2000)
    assert first["error_code"] == 0 and first["acquisition_lock_timeout_ms"] == LOCK_MS
    assert acquired(first) == [(0, 9, 1)]
    records = partition_entry(first)["records"]
    assert records and len(records) > 61  # whole stored batches
    # A replayed or skipped epoch.
    assert m.fetch(tid, epoch=0 + 5)["error_code"] == E.INVALID_SHARE_SESSION_EPOCH
    # Accept 0-4 on the next fetch (piggy-backed), reject 5, release 6-9 per offset.
    r = m.fetch(tid, acks={0: [(0, 4, [ACCEPT]), (5, 9, [REJECT, RELEASE, RELEASE, RELEASE, RELEASE])]})
    assert r["error_code"] == 0 and partition_entry(r)["acknowledge_error_code"] == 0
    assert acquired(r) == [(6, 9, 2)]  # released records come back at once, to whoever fetches
    # Acknowledging what is settled, or not acquired: INVALID_RECORD_STATE, nothing applied.
    bad = m.acknowledge(tid, {0: [(0, 0, [ACCEPT])]})
    assert bad["error_code"] == 0 and bad["responses"][0]["partitions"][0]["error_code"] == E.INVALID_RECORD_STATE
    other = ShareClient(broker, "g")
    other.join("q")
    other.fetch(tid)
    stolen = other.acknowledge(tid, {0: [(6, 9, [ACCEPT])]})
    assert stolen["responses"][0]["partitions"][0]["error_code"] == E.INVALID_RECORD_STATE
    malformed = m.acknowledge(tid, {0: [(6, 9, [ACCEPT, ACCEPT])]})
    assert malformed["responses"][0]["partitions"][0]["error_code"] == E.INVALID_REQUEST
    ok = m.acknowledge(tid, {0: [(6, 9, [ACCEPT])]})
    assert ok["responses"][0]["partitions"][0]["error_code"] == 0
    # Closing the session (-1) applies the last acknowledgements; the session is gone after.
    assert m.acknowledge(tid, {0: []}, epoch=-1)["error_code"] == 0
    assert m.fetch(tid, epoch=m.session_epoch)["error_code"] == E.SHARE_SESSION_NOT_FOUND
    # Nothing is left to deliver.
    m.session_epoch = 0
    assert acquired(m.fetch(tid, max_wait_ms=300)) == []


def test_lock_expiry_redelivers_to_another_member(broker):
    tid = create_topic(broker.bootstrap, "q")
    a, b = ShareClient(broker, "g"), ShareClient(broker, "g")
    a.join("q")
    b.join("q")
    produce(broker.bootstrap, "q", 5)
    assert acquired(a.fetch(tid, max_wait_ms=2000)) == [(0, 4, 1)]
    # Held by a: b gets nothing until the lock expires, then the same records, second delivery.
    assert acquired(b.fetch(tid, max_wait_ms=200)) == []
    started = time.monotonic()
    got = b.fetch(tid, max_wait_ms=5000)  # woken by the expiry, not by the end of the wait
    assert acquired(got) == [(0, 4, 2)]
    assert time.monotonic() - started < 3
    # a's acknowledgement comes too late.
    late = a.acknowledge(tid, {0: [(0, 4, [ACCEPT])]})
    assert late["responses"][0]["partitions"][0]["error_code"] == E.INVALID_RECORD_STATE


def test_delivery_count_limit_archives_a_poison_record(broker):
    tid = create_topic(broker.bootstrap, "q")
    m = ShareClient(broker, "g")
    m.join("q")
    produce(broker.bootstrap, "q", 1)  # two batches: an acquisition takes whole batches
    produce(broker.bootstrap, "q", 1)
    counts = []
    for _ in range(3):  # group.share.delivery.count.limit=3
        r = m.fetch(tid, max_wait_ms=2000, max_records=1)
        got = acquired(r)
        assert got and got[0][0] == 0, got
        counts.append(got[0][2])
        m.acknowledge(tid, {0: [(got[0][0], got[0][1], [RELEASE])]})
        if got[0][1] >= 1:
            break
    assert counts == [1, 2, 3]
    # The third release archived offset 0: the next delivery is offset 1's first.
    r = m.fetch(tid, max_wait_ms=2000)
    assert offsets(r) == [1] and acquired(r)[0][2] == 1


def test_long_poll_is_woken_by_produce(broker):
    tid = create_topic(broker.bootstrap, "q")
    m = ShareClient(broker, "g")
    m.join("q")
    assert acquired(m.fetch(tid)) == []
    timer = threading.Timer(0.5, produce, (broker.bootstrap, "q", 1))
    timer.start()
    started = time.monotonic()
    r = m.fetch(tid, max_wait_ms=8000)
    timer.join()
    assert acquired(r) == [(0, 0, 1)] and time.monotonic() - started < 4


def test_member_session_timeout_releases_records(broker):
    tid = create_topic(broker.bootstrap, "q")
    a, b = ShareClient(broker, "g"), ShareClient(broker, "g")
    a.join("q")
    produce(broker.bootstrap, "q", 3)
    assert acquired(a.fetch(tid, max_wait_ms=2000)) == [(0, 2, 1)]
    time.sleep(3.5)  # group.share.session.timeout.ms=3000: a is removed and its session closed
    assert a.heartbeat()["error_code"] == E.UNKNOWN_MEMBER_ID
    assert a.fetch(tid)["error_code"] == E.SHARE_SESSION_NOT_FOUND
    b.join("q")
    assert acquired(b.fetch(tid, max_wait_ms=2000)) == [(0, 2, 2)]


def test_restart_keeps_accepted_records_settled(broker):
    tid = create_topic(broker.bootstrap, "q")
    m = ShareClient(broker, "g")
    m.join("q")
    produce(broker.bootstrap, "q", 10)
    assert acquired(m.fetch(tid, max_wait_ms=2000)) == [(0, 9, 1)]
    assert m.acknowledge(tid, {0: [(0, 4, [ACCEPT]), (5, 5, [REJECT])]})["responses"][0]["partitions"][0][
        "error_code"] == 0
    broker.restart()
    # Membership and share sessions are gone; the share partition's state is not.
    assert m.heartbeat()["error_code"] == E.UNKNOWN_MEMBER_ID
    assert m.fetch(tid)["error_code"] == E.SHARE_SESSION_NOT_FOUND
    m.join("q")
    m.session_epoch = 0
    r = m.fetch(tid, max_wait_ms=2000)
    assert offsets(r) == [6, 7, 8, 9]  # acquired only: delivered again; accepted/rejected: never
    produce(broker.bootstrap, "q", 2)
    assert offsets(m.fetch(tid, max_wait_ms=2000)) == [10, 11]


def test_unknown_topic_id_and_bad_requests(broker):
    create_topic(broker.bootstrap, "q")
    m = ShareClient(broker, "g")
    m.join("q")
    r = m.fetch(uuid.uuid4())
    assert r["error_code"] == 0 and r["responses"][0]["partitions"][0]["error_code"] == E.UNKNOWN_TOPIC_ID
    assert ShareClient(broker, "g", member="").fetch(uuid.uuid4(), epoch=0)["error_code"] == E.INVALID_REQUEST
    ack = m.acknowledge(uuid.uuid4(), {0: [(0, 0, [ACCEPT])]})
    assert ack["responses"][0]["partitions"][0]["error_code"] == E.UNKNOWN_TOPIC_ID


def _alter_group(broker, group: str, value: str | None, op: int = 0) -> dict:
    r = raw_request("127.0.0.1", broker.port, K.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": 32, "resource_name": group, "configs": [
            {"name": "share.auto.offset.reset", "config_operation": op, "value": value}]}],
        "validate_only": False})
    return r["responses"][0]


def test_share_auto_offset_reset_is_a_group_config(broker):
    tid = create_topic(broker.bootstrap, "q")
    produce(broker.bootstrap, "q", 3)  # before any member: latest would skip them
    assert _alter_group(broker, "g", "sometimes")["error_code"] == E.INVALID_CONFIG
    assert _alter_group(broker, "g", "earliest")["error_code"] == 0
    assert _alter_group(broker, "late", "earliest")["error_code"] == 0
    assert _alter_group(broker, "late", None, op=1)["error_code"] == 0  # DELETE: back to latest
    broker.restart()  # the group config is kept in __share_group_state
    m = ShareClient(broker, "g")
    m.join("q")
    assert acquired(m.fetch(tid, max_wait_ms=2000)) == [(0, 2, 1)]
    late = ShareClient(broker, "late")
    late.join("q")
    assert acquired(late.fetch(tid, max_wait_ms=300)) == []


def test_list_groups_shows_share_groups(broker):
    create_topic(broker.bootstrap, "q")
    ShareClient(broker, "sg").join("q")

    def listed(body: dict) -> dict:
        r = raw_request("127.0.0.1", broker.port, K.LIST_GROUPS, 5, body)
        return {g["group_id"]: (g["protocol_type"], g["group_state"], g["group_type"]) for g in r["groups"]}

    assert listed({"states_filter": [], "types_filter": []})["sg"] == ("share", "Stable", "share")
    assert "sg" in listed({"states_filter": [], "types_filter": ["Share"]})
    assert "sg" not in listed({"states_filter": [], "types_filter": ["classic"]})
    assert "sg" not in listed({"states_filter": ["Empty"], "types_filter": []})


def test_join_group_for_a_share_group_id(broker):
    create_topic(broker.bootstrap, "q")
    ShareClient(broker, "sg").join("q")
    r = raw_request("127.0.0.1", broker.port, K.JOIN_GROUP, 5, {
        "group_id": "sg", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}]})
    assert r["error_code"] == E.UNKNOWN_MEMBER_ID


def test_in_flight_window_is_bounded_by_max_record_locks(tmp_path):
    with BrokerProcess(tmp_path / "data", "--set", "group.share.partition.max.record.locks=4") as broker:
        tid = create_topic(broker.bootstrap, "q")
        m = ShareClient(broker, "g")
        m.join("q")
        produce(broker.bootstrap, "q", 10, one_per_batch=True)
        assert offsets(m.fetch(tid, max_wait_ms=2000)) == [0, 1, 2, 3]
        assert offsets(m.fetch(tid, max_wait_ms=200)) == []   # window full until settled
        m.acknowledge(tid, {0: [(0, 1, [ACCEPT])]})
        assert offsets(m.fetch(tid, max_wait_ms=2000)) == [4, 5]


def test_closing_the_sessions_connection_releases_at_once(tmp_path):
    # Locks of 60 s: only the closed connection can bring the records back this soon.
    with BrokerProcess(tmp_path / "data", "--set", "group.share.record.lock.duration.ms=60000") as broker:
        tid = create_topic(broker.bootstrap, "q")
        a, b = ShareClient(broker, "g"), ShareClient(broker, "g")
        a.join("q")
        b.join("q")
        produce(broker.bootstrap, "q", 3)
        assert acquired(a.fetch(tid, max_wait_ms=2000)) == [(0, 2, 1)]
        assert acquired(b.fetch(tid, max_wait_ms=200)) == []
        a.close()
        assert acquired(b.fetch(tid, max_wait_ms=5000)) == [(0, 2, 2)]
        assert a.fetch(tid, epoch=1)["error_code"] == E.SHARE_SESSION_NOT_FOUND  # a new connection


def _transactions(bootstrap: str) -> None:
    """Offsets 0-2 an aborted transaction, 3 its marker, 4-5 a committed one, 6 its marker."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx"})
    producer.init_transactions(15)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("q", f"aborted{i}".encode(), partition=0)
    producer.flush(15)
    producer.abort_transaction(15)
    producer.begin_transaction()
    for i in range(2):
        producer.produce("q", f"committed{i}".encode(), partition=0)
    producer.commit_transaction(15)


def test_share_isolation_level_read_committed_skips_aborted_transactions(broker):
    tid = create_topic(broker.bootstrap, "q")
    for group, level in (("rc", "read_committed"), ("ru", "read_uncommitted")):
        assert _alter_group(broker, group, "earliest")["error_code"] == 0
        r = raw_request("127.0.0.1", broker.port, K.INCREMENTAL_ALTER_CONFIGS, 1, {
            "resources": [{"resource_type": 32, "resource_name": group, "configs": [
                {"name": "share.isolation.level", "config_operation": 0, "value": level}]}],
            "validate_only": False})
        assert r["responses"][0]["error_code"] == 0
    _transactions(broker.bootstrap)
    rc, ru = ShareClient(broker, "rc"), ShareClient(broker, "ru")
    rc.join("q")
    ru.join("q")
    assert offsets(rc.fetch(tid, max_wait_ms=2000)) == [4, 5]
    assert offsets(ru.fetch(tid, max_wait_ms=2000)) == [0, 1, 2, 4, 5]  # markers never


def _delete_groups(broker, *groups: str) -> dict[str, int]:
    r = raw_request("127.0.0.1", broker.port, K.DELETE_GROUPS, 2, {"groups_names": list(groups)})
    return {g["group_id"]: g["error_code"] for g in r["results"]}


def _stale_write(broker, group: str, tid: uuid.UUID, state_epoch: int) -> int:
    """WriteShareGroupState of a share-partition leader that missed a delete (its copy's
    state epoch): offsets 0-2 available again, as a lock expiring would write them."""
    r = raw_request("127.0.0.1", broker.port, K.WRITE_SHARE_GROUP_STATE, 0, {
        "group_id": group, "topics": [{"topic_id": tid, "partitions": [{
            "partition": 0, "state_epoch": state_epoch, "leader_epoch": 0, "start_offset": 0,
            "state_batches": [{"first_offset": 0, "last_offset": 2, "delivery_state": 0, "delivery_count": 1}]}]}]})
    return r["results"][0]["partitions"][0]["error_code"]


def _read_state(broker, group: str, tid: uuid.UUID) -> dict:
    r = raw_request("127.0.0.1", broker.port, K.READ_SHARE_GROUP_STATE, 0, {
        "group_id": group, "topics": [{"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": 0}]}]})
    return r["results"][0]["partitions"][0]


def test_delete_groups_deletes_a_share_groups_state(broker):
    """DeleteGroups of an empty share group tombstones its share partitions' state in
    `__share_group_state` (Kafka's DeleteShareGroupState): the group starts over — at
    `share.auto.offset.reset`, the accepted records delivered again to a new member — and
    after a restart too. A group with members is NON_EMPTY_GROUP; before, a share group
    could not be deleted at all (GROUP_ID_NOT_FOUND)."""
    tid = create_topic(broker.bootstrap, "q")
    assert _alter_group(broker, "g", "earliest")["error_code"] == 0
    produce(broker.bootstrap, "q", 3)
    m = ShareClient(broker, "g")
    m.join("q")
    assert acquired(m.fetch(tid, max_wait_ms=2000)) == [(0, 2, 1)]
    assert partition_entry(m.acknowledge(tid, {0: [(0, 2, [1])]}))["error_code"] == 0
    assert _delete_groups(broker, "g") == {"g": E.NON_EMPTY_GROUP}
    assert m.heartbeat(-1)["error_code"] == 0  # leaves
    m.close()
    assert _delete_groups(broker, "g", "nobody") == {"g": E.NONE, "nobody": E.GROUP_ID_NOT_FOUND}
    # The deleted state keeps its state epoch, bumped: a write of the old epoch is fenced.
    assert _read_state(broker, "g", tid)["start_offset"] == -1
    assert _read_state(broker, "g", tid)["state_epoch"] == 1
    assert _stale_write(broker, "g", tid, 0) == E.FENCED_STATE_EPOCH
    again = ShareClient(broker, "g")
    again.join("q")
    assert acquired(again.fetch(tid, max_wait_ms=2000)) == [(0, 2, 1)]  # a fresh share partition
    again.heartbeat(-1)
    again.close()
    assert _delete_groups(broker, "g") == {"g": E.NONE}
    broker.restart()  # the tombstones are what the replay sees: no state comes back
    assert {k: _read_state(broker, "g", tid)[k] for k in ("start_offset", "state_epoch")} == {
        "start_offset": -1, "state_epoch": 2}  # the second life's epoch, bumped: it survives the restart
    assert _stale_write(broker, "g", tid, 1) == E.FENCED_STATE_EPOCH
    after = ShareClient(broker, "g")
    after.join("q")
    assert acquired(after.fetch(tid, max_wait_ms=2000)) == [(0, 2, 1)]
