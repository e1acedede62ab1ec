"""Resource limits: frame size, connection count, idle and slow connections, partitions, fds.

Each limit gets its own small broker started with the setting under test. What is checked
is the contract of the limit (who is cut off, with what) and that everyone else is still
served afterwards.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import struct
import time

import pytest

from hardening_kit import (
    alive,
    api_versions_ok,
    closed_by_peer,
    connect,
    create_topic,
    fd_count,
    log_text,
    read_frame,
    request,
    roundtrip,
    rss_kb,
    scaled,
    socket_fd_count,
    wait_until,
)
from tests.brokerproc import BrokerProcess
from wire import ApiKey, decode_response, encode_request
from wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(120)


def _metadata_request(n_topics: int, name_len: int, cid: int = 1) -> bytes:
    topics = [{"name": f"t{i:05d}".ljust(name_len, "x")} for i in range(n_topics)]
    return encode_request(ApiKey.METADATA, 1, cid, {"topics": topics})


# --------------------------------------------------------------------------- socket.request.max.bytes


def test_socket_request_max_bytes(tmp_path):
    with BrokerProcess(tmp_path / "data", "--set", "socket.request.max.bytes=4096",
                       "--set", "auto.create.topics.enable=false") as broker:
        bystander = connect(broker.port)
        request(bystander, ApiKey.API_VERSIONS, 0, {})

        # Just under the limit: answered.
        small = _metadata_request(40, 90)
        assert len(small) - 4 <= 4096
        with connect(broker.port) as sock:
            sock.sendall(small)
            _cid, body = decode_response(ApiKey.METADATA, 1, read_frame(sock))
            assert len(body["topics"]) == 40

        # Over the limit: the connection is closed, nothing answered.
        big = _metadata_request(60, 90)
        assert len(big) - 4 > 4096
        with connect(broker.port) as sock:
            sock.sendall(big)
            assert closed_by_peer(sock, 5)

        # A prefix announcing 10 MB is refused as soon as the prefix arrives, not after 10 MB.
        with connect(broker.port) as sock:
            sock.sendall(struct.pack(">ihhi", 10_000_000, ApiKey.PRODUCE, 9, 77))
            started = time.monotonic()
            assert closed_by_peer(sock, 5)
            assert time.monotonic() - started < 2

        # The connection opened before is untouched.
        assert request(bystander, ApiKey.API_VERSIONS, 0, {}, correlation_id=2)["error_code"] == 0
        bystander.close()
        assert "frame size 10000000 outside 0..4096" in log_text(broker)


# --------------------------------------------------------------------------- max.connections


def _served(sock: socket.socket, cid: int = 1, timeout: float = 3.0) -> bool:
    """True if ApiVersions is answered on `sock`, False if the broker closed it."""
    sock.settimeout(timeout)
    try:
        return request(sock, ApiKey.API_VERSIONS, 0, {}, correlation_id=cid)["error_code"] == 0
    except (ConnectionError, OSError):
        return False


def test_max_connections(tmp_path):
    with BrokerProcess(tmp_path / "data", "--set", "max.connections=5") as broker:
        held = [connect(broker.port) for _ in range(5)]
        assert all(_served(s) for s in held)

        extra = connect(broker.port)
        assert not _served(extra), "a 6th connection was served with max.connections=5"
        extra.close()
        assert "max.connections=5 reached" in log_text(broker)

        # The five keep working.
        assert all(_served(s, cid=2) for s in held)

        # Free two slots: two new connections are served once the broker has seen the closes.
        for s in held[:2]:
            s.close()
        held = held[2:]
        time.sleep(0.3)
        fresh = [connect(broker.port) for _ in range(2)]
        assert all(_served(s) for s in fresh)
        held += fresh
        for s in held:
            s.close()


def test_max_connections_under_a_burst(tmp_path):
    """Twenty connections arriving at once with max.connections=5: at most five are served.

    (Counting connections in the connection task instead of at accept let a sixth in about
    half the time: a burst of accepts runs ahead of the tasks it starts.)"""
    with BrokerProcess(tmp_path / "data", "--set", "max.connections=5") as broker:
        for burst in range(3):
            socks = []
            for _ in range(20):
                s = socket.socket()
                s.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    s.connect(("127.0.0.1", broker.port))
                socks.append(s)
            time.sleep(0.5)  # let the broker accept the whole burst
            served = 0
            for s in socks:
                s.setblocking(True)
                if _served(s, timeout=2):
                    served += 1
            for s in socks:
                s.close()
            assert 1 <= served <= 5, f"burst {burst}: {served} of 20 connections served with max.connections=5"
            assert wait_until(lambda: api_versions_ok(broker.port, timeout=1), 5)


# --------------------------------------------------------------------------- connections.max.idle.ms

IDLE_MS = 1000


@pytest.fixture(scope="module")
def idle_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("idle") / "data",
                       "--set", f"connections.max.idle.ms={IDLE_MS}") as broker:
        yield broker


def _time_to_close(sock: socket.socket, limit: float) -> float | None:
    started = time.monotonic()
    return time.monotonic() - started if closed_by_peer(sock, limit) else None


def test_idle_connection_is_closed(idle_broker):
    with connect(idle_broker.port) as sock:
        request(sock, ApiKey.API_VERSIONS, 0, {})
        took = _time_to_close(sock, 5)
        assert took is not None, "an idle connection stayed open"
        assert 0.5 * IDLE_MS / 1000 <= took <= IDLE_MS / 1000 + 2


def test_half_sent_frame_is_dropped(idle_broker):
    with connect(idle_broker.port) as sock:
        sock.sendall(struct.pack(">ihhi", 100, ApiKey.METADATA, 1, 5) + b"\x00" * 4)
        took = _time_to_close(sock, 5)
        assert took is not None, "a connection stuck mid-frame stayed open"
        assert took <= IDLE_MS / 1000 + 2
    assert "mid-frame" in log_text(idle_broker)


def test_slow_frame_is_dropped(idle_broker):
    """A frame dripped one byte at a time never reaches the idle limit between bytes, but it
    must not hold the connection for longer than the idle time (slow-loris)."""
    frame = encode_request(ApiKey.METADATA, 1, 9, {"topics": [{"name": "x" * 60}]})
    with connect(idle_broker.port) as sock:
        started = time.monotonic()
        closed = False
        for i in range(len(frame) - 1):  # never the last byte
            try:
                sock.sendall(frame[i:i + 1])
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if closed_by_peer(sock, 0.2):
                closed = True
                break
            if time.monotonic() - started > 6 * IDLE_MS / 1000:
                break
        took = time.monotonic() - started
        assert closed, f"a frame dripped for {took:.1f} s was still being received (idle limit {IDLE_MS} ms)"
        assert took <= IDLE_MS / 1000 + 2


def test_busy_connection_and_long_poll_are_not_idle(idle_broker):
    create_topic(idle_broker.port, "idle-poll")
    with connect(idle_broker.port) as sock:
        # Requests every 0.4 s for 2.5 idle periods: never closed.
        for cid in range(7):
            assert request(sock, ApiKey.API_VERSIONS, 0, {}, correlation_id=cid)["error_code"] == 0
            time.sleep(0.4 * IDLE_MS / 1000)
        # A Fetch long-poll longer than the idle time is answered, not cut.
        from hardening_kit import fetch_body

        started = time.monotonic()
        body = request(sock, ApiKey.FETCH, 12, fetch_body("idle-poll", 0, 0, max_wait_ms=2 * IDLE_MS),
                       correlation_id=100)
        assert body["responses"][0]["partitions"][0]["error_code"] == 0
        assert time.monotonic() - started >= 1.5 * IDLE_MS / 1000


# --------------------------------------------------------------------------- trafka.max.partitions


def test_partition_limit(tmp_path):
    # __consumer_offsets takes one partition of the ten.
    with BrokerProcess(tmp_path / "data", "--set", "trafka.max.partitions=10") as broker:
        def create(name: str, n: int, validate_only: bool = False) -> dict:
            body = {"topics": [{"name": name, "num_partitions": n, "replication_factor": 1}],
                    "timeout_ms": 5000, "validate_only": validate_only}
            return roundtrip(broker.port, ApiKey.CREATE_TOPICS, 5, body)["topics"][0]

        assert create("limit-a", 6)["error_code"] == ErrorCode.NONE
        for validate_only in (True, False):
            refused = create("limit-b", 5, validate_only)
            assert refused["error_code"] == ErrorCode.POLICY_VIOLATION, refused
            assert "trafka.max.partitions=10" in refused["error_message"]
        assert create("limit-b", 3)["error_code"] == ErrorCode.NONE  # exactly at the limit

        grown = roundtrip(broker.port, ApiKey.CREATE_PARTITIONS, 1,
                          {"topics": [{"name": "limit-a", "count": 8, "assignments": None}],
                           "timeout_ms": 5000, "validate_only": False})["results"][0]
        assert grown["error_code"] == ErrorCode.POLICY_VIOLATION, grown

        # Auto-creation at the limit: an error for that topic, not a crash or a dropped connection.
        meta = roundtrip(broker.port, ApiKey.METADATA, 9,
                         {"topics": [{"name": "limit-auto"}], "allow_auto_topic_creation": True})
        assert meta["topics"][0]["error_code"] != ErrorCode.NONE

        # Through a real admin client: the error it shows is the broker's code.
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        future = admin.create_topics([NewTopic("limit-c", 2, 1)], request_timeout=10)["limit-c"]
        with pytest.raises(KafkaException) as info:
            future.result(15)
        assert info.value.args[0].code() == ErrorCode.POLICY_VIOLATION
        assert alive(broker)


# --------------------------------------------------------------------------- many connections


@contextlib.contextmanager
def _nofile_limit(soft: int):
    """Raise this process's soft RLIMIT_NOFILE (a broker started inside inherits it)."""
    old_soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft > hard:
        pytest.skip(f"need {soft} file descriptors, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (old_soft, hard))


N_CONNECTIONS = scaled(1000, 3000)


def test_a_thousand_connections(tmp_path):
    with _nofile_limit(max(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 2 * N_CONNECTIONS + 200)):
        with BrokerProcess(tmp_path / "data") as broker:
            pid = broker.proc.pid
            create_topic(broker.port, "many-conns")
            baseline_fds = fd_count(pid)
            baseline_rss = rss_kb(pid)
            socks: list[socket.socket] = []
            try:
                for i in range(N_CONNECTIONS):
                    socks.append(connect(broker.port, timeout=20))
                for i, s in enumerate(socks):
                    s.sendall(encode_request(ApiKey.API_VERSIONS, 0, i, {}))
                for i, s in enumerate(socks):
                    cid, body = decode_response(ApiKey.API_VERSIONS, 0, read_frame(s))
                    assert cid == i and body["error_code"] == 0
                assert wait_until(lambda: socket_fd_count(pid) >= N_CONNECTIONS, 10)

                # Real clients still work with the thousand connections open.
                import confluent_kafka as ck

                producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
                acked = []
                for n in range(200):
                    producer.produce("many-conns", value=b"%d" % n,
                                     on_delivery=lambda err, msg: acked.append(err is None))
                producer.flush(30)
                assert acked.count(True) == 200
                rss_growth = rss_kb(pid) - baseline_rss
                assert rss_growth < 150 * 1024, f"{N_CONNECTIONS} idle connections cost {rss_growth} KiB"
            finally:
                for s in socks:
                    s.close()
            assert wait_until(lambda: fd_count(pid) <= baseline_fds + 2, 10), \
                f"{fd_count(pid)} fds after closing everything, {baseline_fds} before"
            assert api_versions_ok(broker.port)


def test_file_descriptor_exhaustion(tmp_path):
    """A broker out of file descriptors keeps its existing connections and recovers."""
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        pid = broker.proc.pid
        try:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (200, resource.prlimit(pid, resource.RLIMIT_NOFILE)[1]))
        except (PermissionError, OSError) as exc:
            pytest.skip(f"cannot lower the broker's file limit: {exc}")
        keeper = connect(broker.port)
        assert _served(keeper)
        flood = []
        for _ in range(300):  # more than the broker can accept; the kernel queues the rest
            try:
                flood.append(connect(broker.port, timeout=2))
            except OSError:
                break
        time.sleep(1.0)
        assert alive(broker)
        assert "accept failed" in log_text(broker)
        assert _served(keeper, cid=2), "an established connection stopped being served"
        for s in flood:
            s.close()
        assert wait_until(lambda: api_versions_ok(broker.port, timeout=2), 15), "broker did not recover"
        assert alive(broker)
        # The flood's closes may still be in flight when the probe is answered: the accept
        # loop takes a queued burst at once, so up to ~190 connections end together.
        assert wait_until(lambda: fd_count(pid) < 60, 5), f"{fd_count(pid)} descriptors still open"
        keeper.close()
    finally:
        broker.kill()
