"""Fetch sessions (KIP-227) over real sockets: raw Fetch requests against a broker process.

Each request goes over a fresh connection unless a test says otherwise, so every test also
shows that a session belongs to the broker, not to the connection that created it.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request, recv_exact
from wire import ApiKey, decode_response, encode_request
from wire.errors import ErrorCode
from wire.records import Record, build_batch

# Record timestamps: recent, since the module's broker lives past its first retention check
# (30 s after start-up), which deletes segments older than retention.ms (7 days), as Kafka does.
RECENT_MS = int(time.time() * 1000)

V = 12  # names (Kafka's consumer sends up to 12 when it has no topic ids, kafka-python always)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("sessions") / "data") as proc:
        yield proc


def _create(broker, topic: str, partitions: int) -> uuid.UUID:
    return create_topic(broker.port, topic, partitions)


def _produce(broker, topic: str, partition: int, count: int = 1) -> None:
    batch = build_batch([Record(i, RECENT_MS, b"k", b"v%d" % i) for i in range(count)])
    answer = raw_request("127.0.0.1", broker.port, ApiKey.PRODUCE, 9, {
        "transactional_id": None, "acks": -1, "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": bytes(batch)}]}]})
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0


def _part(partition: int, offset: int = 0) -> dict:
    return {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
            "partition_max_bytes": 1 << 20, "last_fetched_epoch": -1}


def _body(session_id: int, epoch: int, topics: list[dict], forgotten: list[dict] = (), max_wait_ms: int = 0) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 50 << 20,
            "isolation_level": 0, "session_id": session_id, "session_epoch": epoch, "topics": topics,
            "forgotten_topics_data": list(forgotten), "rack_id": ""}


def fetch(broker, session_id: int, epoch: int, topics: list[dict], forgotten: list[dict] = (),
          version: int = V, max_wait_ms: int = 0, sock: socket.socket | None = None) -> dict:
    body = _body(session_id, epoch, topics, forgotten, max_wait_ms)
    if sock is None:
        return raw_request("127.0.0.1", broker.port, ApiKey.FETCH, version, body)
    sock.sendall(encode_request(ApiKey.FETCH, version, 7, body))
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    return decode_response(ApiKey.FETCH, version, recv_exact(sock, size))[1]


def listed(answer: dict) -> dict[tuple[str, int], dict]:
    """(topic or topic id, partition) -> partition answer."""
    return {(t.get("topic") or t.get("topic_id"), p["partition_index"]): p
            for t in answer["responses"] for p in t["partitions"]}


def _new_session(broker, topic: str, partitions: int, version: int = V) -> tuple[int, dict]:
    answer = fetch(broker, 0, 0, [{"topic": topic, "partitions": [_part(p) for p in range(partitions)]}],
                   version=version)
    assert answer["error_code"] == 0 and answer["session_id"] != 0, answer
    return answer["session_id"], answer


def test_full_fetch_creates_a_session_and_incremental_fetches_list_only_changes(broker):
    _create(broker, "s-incr", 3)
    _produce(broker, "s-incr", 0, 2)
    session, first = _new_session(broker, "s-incr", 3)
    # a full response lists every partition
    assert sorted(listed(first)) == [("s-incr", 0), ("s-incr", 1), ("s-incr", 2)]
    assert len(listed(first)[("s-incr", 0)]["records"]) > 0
    # epoch 1: the consumer moves partition 0 on past the two records; nothing changed since
    answer = fetch(broker, session, 1, [{"topic": "s-incr", "partitions": [_part(0, 2)]}])
    assert answer["error_code"] == 0 and answer["session_id"] == session and answer["responses"] == [], answer
    # new data in partition 1 only: the incremental answer lists partition 1 only
    _produce(broker, "s-incr", 1, 3)
    answer = fetch(broker, session, 2, [])
    got = listed(answer)
    assert list(got) == [("s-incr", 1)], answer
    assert got[("s-incr", 1)]["high_watermark"] == 3 and len(got[("s-incr", 1)]["records"]) > 0
    # the client advances partition 1: its records were already sent, the high watermark did not move
    answer = fetch(broker, session, 3, [{"topic": "s-incr", "partitions": [_part(1, 3)]}])
    assert answer["responses"] == [], answer
    assert fetch(broker, session, 4, [])["error_code"] == 0


def test_a_session_continues_over_a_new_connection(broker):
    _create(broker, "s-reconnect", 2)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        first = fetch(broker, 0, 0, [{"topic": "s-reconnect", "partitions": [_part(0), _part(1)]}], sock=sock)
        session = first["session_id"]
        assert session != 0
        assert fetch(broker, session, 1, [], sock=sock)["responses"] == []
    _produce(broker, "s-reconnect", 1)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        answer = fetch(broker, session, 2, [], sock=sock)
    assert answer["session_id"] == session and list(listed(answer)) == [("s-reconnect", 1)], answer


def test_incremental_long_poll_wakes_on_produce_and_lists_that_partition(broker):
    _create(broker, "s-poll", 4)
    session, _first = _new_session(broker, "s-poll", 4)
    started = time.monotonic()
    timer = threading.Timer(0.3, _produce, (broker, "s-poll", 2))
    timer.start()
    answer = fetch(broker, session, 1, [], max_wait_ms=5000)
    timer.join()
    assert time.monotonic() - started < 4, "the wait was not woken by the produce"
    assert list(listed(answer)) == [("s-poll", 2)], answer


def test_a_session_closed_during_a_long_poll(broker):
    """A client that reconnects and starts over (a full fetch naming its session) while its
    old connection still waits: the waiting fetch ends normally, the broker keeps serving."""
    _create(broker, "s-closed", 2)
    session, _first = _new_session(broker, "s-closed", 2)
    answers = []
    waiter = threading.Thread(target=lambda: answers.append(fetch(broker, session, 1, [], max_wait_ms=1500)))
    waiter.start()
    time.sleep(0.3)
    closing = fetch(broker, session, -1, [{"topic": "s-closed", "partitions": [_part(0)]}])
    assert closing["session_id"] == 0 and closing["error_code"] == 0
    waiter.join(10)
    assert answers and answers[0]["error_code"] == 0, answers
    assert fetch(broker, session, 2, [])["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert _new_session(broker, "s-closed", 2)[0] != 0


def test_forgotten_topics_leave_the_session_and_added_ones_join(broker):
    _create(broker, "s-forget", 2)
    _create(broker, "s-added", 1)
    session, _first = _new_session(broker, "s-forget", 2)
    answer = fetch(broker, session, 1, [], forgotten=[{"topic": "s-forget", "partitions": [1]}])
    assert answer["responses"] == []
    _produce(broker, "s-forget", 1)
    _produce(broker, "s-forget", 0)
    answer = fetch(broker, session, 2, [])
    assert list(listed(answer)) == [("s-forget", 0)], answer  # partition 1 was forgotten
    # add another topic: the next answer lists it (new to the session: its offsets are news)
    # (and partition 0 moves past the record it got)
    answer = fetch(broker, session, 3, [{"topic": "s-forget", "partitions": [_part(0, 1)]},
                                        {"topic": "s-added", "partitions": [_part(0)]}])
    assert list(listed(answer)) == [("s-added", 0)], answer
    # forgetting every partition closes the session (sessionless answer, id 0); the id is gone
    answer = fetch(broker, session, 4, [], forgotten=[{"topic": "s-forget", "partitions": [0]},
                                                       {"topic": "s-added", "partitions": [0]}])
    assert answer["error_code"] == 0 and answer["session_id"] == 0 and answer["responses"] == [], answer
    assert fetch(broker, session, 5, [])["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_wrong_epoch_is_invalid_fetch_session_epoch_and_the_session_survives(broker):
    _create(broker, "s-epoch", 1)
    session, _first = _new_session(broker, "s-epoch", 1)
    for wrong in (2, 7):
        answer = fetch(broker, session, wrong, [])
        assert answer["error_code"] == ErrorCode.INVALID_FETCH_SESSION_EPOCH, answer
        assert answer["session_id"] == 0 and answer["responses"] == []
    assert fetch(broker, session, 1, [])["error_code"] == 0
    # a replay of epoch 1 (a duplicate request) is an epoch error too
    assert fetch(broker, session, 1, [])["error_code"] == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert "INVALID_FETCH_SESSION_EPOCH" in broker.log_tail(200)


def test_unknown_session_id_is_fetch_session_id_not_found(broker):
    _create(broker, "s-unknown", 1)
    for session_id in (12345, -5):
        answer = fetch(broker, session_id, 1, [{"topic": "s-unknown", "partitions": [_part(0)]}])
        assert answer["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND, answer
        assert answer["session_id"] == 0 and answer["responses"] == []
    # session id 0 with an incremental epoch names no session either
    assert fetch(broker, 0, 3, [])["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_final_epoch_closes_the_session_and_initial_epoch_replaces_it(broker):
    _create(broker, "s-close", 1)
    session, _first = _new_session(broker, "s-close", 1)
    answer = fetch(broker, session, -1, [{"topic": "s-close", "partitions": [_part(0)]}])
    assert answer["error_code"] == 0 and answer["session_id"] == 0 and len(listed(answer)) == 1, answer
    assert fetch(broker, session, 1, [])["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # epoch 0 naming a session: that one is closed and a new one made (full answer)
    session, _first = _new_session(broker, "s-close", 1)
    answer = fetch(broker, session, 0, [{"topic": "s-close", "partitions": [_part(0)]}])
    assert answer["session_id"] not in (0, session) and len(listed(answer)) == 1, answer
    assert fetch(broker, session, 1, [])["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert fetch(broker, answer["session_id"], 1, [])["error_code"] == 0


def test_topic_ids_v13_sessions(broker):
    topic_id = _create(broker, "s-ids", 2)
    answer = fetch(broker, 0, 0, [{"topic_id": topic_id, "partitions": [_part(0), _part(1)]}], version=13)
    session = answer["session_id"]
    assert answer["error_code"] == 0 and session != 0
    assert sorted(listed(answer)) == [(topic_id, 0), (topic_id, 1)]
    _produce(broker, "s-ids", 0)
    answer = fetch(broker, session, 1, [], version=13)
    assert list(listed(answer)) == [(topic_id, 0)], answer
    # an unknown topic id added to the session: UNKNOWN_TOPIC_ID for it, listed (an error is news)
    unknown = uuid.uuid4()
    answer = fetch(broker, session, 2, [{"topic_id": topic_id, "partitions": [_part(0, 1)]},
                                        {"topic_id": unknown, "partitions": [_part(0)]}], version=13)
    got = listed(answer)
    assert list(got) == [(unknown, 0)] and got[(unknown, 0)]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID, answer
    # a session made with topic ids asked by a version without them, and the reverse
    answer = fetch(broker, session, 3, [], version=12)
    assert answer["error_code"] == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR and answer["session_id"] == 0, answer
    by_name, _first = _new_session(broker, "s-ids", 2, version=12)
    answer = fetch(broker, by_name, 1, [], version=13)
    assert answer["error_code"] == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, answer
    # a full v13 fetch of an unknown id: UNKNOWN_TOPIC_ID, and the session is still made
    answer = fetch(broker, 0, 0, [{"topic_id": unknown, "partitions": [_part(0)]}], version=13)
    assert answer["session_id"] != 0 and listed(answer)[(unknown, 0)]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID


def test_sessionless_fetches_are_unchanged(broker):
    _create(broker, "s-none", 2)
    answer = fetch(broker, 0, -1, [{"topic": "s-none", "partitions": [_part(0), _part(1)]}])
    assert answer["session_id"] == 0 and len(listed(answer)) == 2


@pytest.fixture
def small_cache(tmp_path):
    with BrokerProcess(tmp_path / "data", "--set", "max.incremental.fetch.session.cache.slots=1",
                       "--set", "min.incremental.fetch.session.eviction.ms=1000") as proc:
        _create(proc, "c", 3)
        yield proc


def test_a_full_cache_answers_session_id_0(small_cache):
    first, _answer = _new_session(small_cache, "c", 1)
    answer = fetch(small_cache, 0, 0, [{"topic": "c", "partitions": [_part(0)]}])
    # no room: a full answer without a session, every partition listed
    assert answer["error_code"] == 0 and answer["session_id"] == 0 and len(listed(answer)) == 1, answer
    assert fetch(small_cache, first, 1, [])["error_code"] == 0  # the first session is still there


def test_an_idle_session_is_evicted_for_a_new_one(small_cache):
    first, _answer = _new_session(small_cache, "c", 1)
    time.sleep(1.3)  # idle longer than min.incremental.fetch.session.eviction.ms
    second, _answer = _new_session(small_cache, "c", 1)
    assert second != first
    assert fetch(small_cache, first, 1, [])["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert fetch(small_cache, second, 1, [])["error_code"] == 0
    assert "evicted" in small_cache.log_tail(100)


def test_an_old_busy_session_gives_way_to_a_larger_one_only(small_cache):
    first, _answer = _new_session(small_cache, "c", 1)
    time.sleep(1.3)
    assert fetch(small_cache, first, 1, [])["error_code"] == 0  # used now, but older than the eviction time
    # a session of the same size may not evict it...
    answer = fetch(small_cache, 0, 0, [{"topic": "c", "partitions": [_part(0)]}])
    assert answer["session_id"] == 0, answer
    # ...a larger one may
    second, _answer = _new_session(small_cache, "c", 2)
    assert fetch(small_cache, first, 2, [])["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert fetch(small_cache, second, 1, [])["error_code"] == 0


# ---- stock clients: the Java consumer and kafka-python use sessions ------------------------

PARTITIONS = 6
PER_PARTITION = 200


def _produce_while(bootstrap: str, topic: str) -> threading.Thread:
    """A producer thread writing PER_PARTITION numbered records into each partition, slowly
    enough that the consumer's fetches meet both idle and busy partitions."""
    from confluent_kafka import Producer

    def run() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
        for i in range(PER_PARTITION):
            for p in range(PARTITIONS):
                if p % 3 == 0 or i % 10 == 0:  # partitions 1, 2, 4, 5 stay idle most of the time
                    producer.produce(topic, key=b"%d" % p, value=b"%d-%d" % (p, i), partition=p)
            if i % 5 == 0:  # about 2 s in all
                producer.flush(10)
                time.sleep(0.05)
        assert producer.flush(30) == 0

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _expected() -> dict[int, list[bytes]]:
    return {p: [b"%d-%d" % (p, i) for i in range(PER_PARTITION) if p % 3 == 0 or i % 10 == 0]
            for p in range(PARTITIONS)}


def _session_stats(proc: BrokerProcess) -> dict[str, int]:
    """The broker's fetch session counters, from the line it logs when it stops."""
    proc.stop()
    line = [l for l in proc.log_tail(400).splitlines() if "fetch sessions:" in l][-1]
    return {k: int(v) for k, v in (item.split("=") for item in line.split("fetch sessions:")[1].split())}


@pytest.fixture
def fresh_broker(tmp_path):
    with BrokerProcess(tmp_path / "data") as proc:
        _create(proc, "stock", PARTITIONS)
        yield proc


def test_kafka_python_consumer_uses_incremental_fetches(fresh_broker):
    from kafka import KafkaConsumer, TopicPartition

    producer = _produce_while(fresh_broker.bootstrap, "stock")
    consumer = KafkaConsumer(bootstrap_servers=fresh_broker.bootstrap, fetch_max_wait_ms=100,
                             enable_auto_commit=False, consumer_timeout_ms=1000)
    consumer.assign([TopicPartition("stock", p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    offsets: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    want = sum(len(v) for v in _expected().values())
    deadline = time.monotonic() + 60
    try:
        while sum(len(v) for v in got.values()) < want and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                for r in records:
                    got[tp.partition].append(r.value)
                    offsets[tp.partition].append(r.offset)
    finally:
        consumer.close()
    producer.join(30)
    assert got == _expected()  # every record once, in order
    assert all(o == list(range(len(o))) for o in offsets.values())
    stats = _session_stats(fresh_broker)
    assert stats["created"] >= 1 and stats["incremental_fetches"] >= 10, stats


def test_java_consumer_uses_incremental_fetches(fresh_broker):
    from compat_tests.clients.base import NotSupportedByClient
    from compat_tests.clients.java_client import JavaClient

    try:
        client = JavaClient(fresh_broker.bootstrap)
    except NotSupportedByClient as exc:
        pytest.skip(str(exc))
    try:
        member = client.group_member(["stock"], "java-sessions")
        producer = _produce_while(fresh_broker.bootstrap, "stock")
        want = sum(len(v) for v in _expected().values())
        deadline = time.monotonic() + 90
        while len(member.records()) < want and time.monotonic() < deadline and member.error() is None:
            time.sleep(0.2)
        producer.join(30)
        records = member.records()
        assert member.error() is None, member.error()
        member.leave()
    finally:
        client.close()
    got = {p: [r.value for r in records if r.partition == p] for p in range(PARTITIONS)}
    assert got == _expected()  # every record once, in order
    assert all([r.offset for r in records if r.partition == p] == list(range(len(got[p]))) for p in got)
    stats = _session_stats(fresh_broker)
    assert stats["created"] >= 1 and stats["incremental_fetches"] >= 10, stats


# ---- the cache's rules, with a clock of our own ---------------------------------------------

def _cache(slots: int, eviction_ms: int = 1000):
    from server.fetch_sessions import FetchSessionCache

    now = [0]
    return FetchSessionCache(slots, eviction_ms, clock=lambda: now[0]), now


def _full(cache, partitions: int, replica_id: int = -1) -> int:
    parts = [_part(p) for p in range(partitions)]
    context = cache.new_context(12, 0, 0, replica_id, [("t", parts)], [])
    responses = [{"topic": "t", "partitions": [
        {"partition_index": p, "error_code": 0, "high_watermark": 0, "last_stable_offset": 0, "log_start_offset": 0,
         "preferred_read_replica": -1, "records": b""} for p in range(partitions)]}]
    return context.finish(responses)[1]


def test_next_epoch_wraps_as_kafka():
    from server.fetch_sessions import FINAL_EPOCH, next_epoch

    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch(0x7FFFFFFF) == 1  # never back to 0, the initial epoch
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_follower_sessions_are_privileged():
    cache, now = _cache(1)
    consumer = _full(cache, 10)
    assert consumer != 0
    # a follower may evict a young consumer session, even a larger one
    follower = _full(cache, 1, replica_id=2)
    assert follower != 0 and consumer not in cache.sessions
    # a consumer may not evict a young follower session, however large its own
    assert _full(cache, 100) == 0
    # once older than the eviction time (and just used, so not stale) it is evictable by size
    now[0] = 1500
    cache.touch(cache.sessions[follower], now[0])
    assert _full(cache, 100) == 0  # a consumer's key (False, ...) sorts below a follower's (True, ...)
    assert _full(cache, 5, replica_id=3) != 0  # a larger follower session may
    assert cache.evictions == 2 and cache.refused == 2
