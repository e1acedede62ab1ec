"""Offsets: ListOffsets, seeking, out-of-range resets, and Fetch long-polling."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from compat_tests import kafka_wire as kw
from compat_tests.clients.base import Message, OffsetOutOfRange
from compat_tests.helpers import assert_exact, make_topic, now_ms, produce_via


def _values(records):
    return [(r.partition, r.offset, r.value) for r in records]


def _background(fn):
    """Run fn in a thread; returns a getter that joins and returns (or raises) its result."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def result(timeout=60):
        thread.join(timeout)
        assert not thread.is_alive(), "background consumer did not finish"
        if "error" in box:
            raise box["error"]
        return box["value"]

    return result


def test_list_offsets_earliest_latest(client, setup_client, topic_name):
    make_topic(client, setup_client, topic_name, 2)
    assert [client.list_offsets(topic_name, p, s) for p in (0, 1) for s in ("earliest", "latest")
            ] == [0, 0, 0, 0], "empty partitions"
    setup_client.produce(topic_name, [Message(b"a%d" % i, partition=0) for i in range(7)]
                         + [Message(b"b%d" % i, partition=1) for i in range(3)])
    got = {(p, s): client.list_offsets(topic_name, p, s) for p in (0, 1)
           for s in ("earliest", "latest")}
    assert got == {(0, "earliest"): 0, (0, "latest"): 7, (1, "earliest"): 0, (1, "latest"): 3}


def test_list_offsets_by_timestamp(client, setup_client, topic_name):
    """ListOffsets by timestamp: the first offset whose timestamp is >= the one asked."""
    make_topic(client, setup_client, topic_name, 1)
    base = now_ms() - 600_000
    messages = [Message(b"ts%d" % i, partition=0, timestamp=base + i * 1000) for i in range(5)]
    produce_via(client, setup_client, topic_name, messages)
    assert client.list_offsets(topic_name, 0, base) == 0
    assert client.list_offsets(topic_name, 0, base + 1500) == 2
    assert client.list_offsets(topic_name, 0, base + 4000) == 4
    assert client.list_offsets(topic_name, 0, base + 60_000) is None


def test_seek_and_reread(client, setup_client, topic_name):
    make_topic(client, setup_client, topic_name, 1)
    messages = [Message(b"s%02d" % i, b"k", partition=0) for i in range(20)]
    client.produce(topic_name, messages)
    assert_exact(client.consume(topic_name, 5, start={0: 5}), {0: messages[5:10]}, {0: 5})
    assert_exact(client.consume(topic_name, 3, start={0: 0}), {0: messages[0:3]})
    # asking for more than is left returns the tail and nothing else
    tail = client.consume(topic_name, 5, start={0: 17}, timeout=4)
    assert_exact(tail, {0: messages[17:]}, {0: 17})


def test_out_of_range_reset_earliest(client, setup_client, topic_name):
    make_topic(client, setup_client, topic_name, 1)
    messages = [Message(b"r%d" % i, partition=0) for i in range(10)]
    setup_client.produce(topic_name, messages)
    records = client.consume(topic_name, 10, start={0: 50}, auto_offset_reset="earliest",
                             timeout=10)
    assert_exact(records, {0: messages})


def test_out_of_range_reset_latest(client, setup_client, topic_name):
    """Reset to latest: the consumer skips the 10 old records and gets only the new one."""
    make_topic(client, setup_client, topic_name, 1)
    setup_client.produce(topic_name, [Message(b"old%d" % i, partition=0) for i in range(10)])
    result = _background(lambda: client.consume(
        topic_name, 1, start={0: 50}, auto_offset_reset="latest", timeout=12))
    time.sleep(4)  # the consumer fetches, is told out of range, and resets to 10
    setup_client.produce(topic_name, [Message(b"new", partition=0)])
    assert _values(result()) == [(0, 10, b"new")]


def test_out_of_range_reset_none(client, setup_client, topic_name):
    """auto.offset.reset=none: fetching past the end is an error the application sees."""
    make_topic(client, setup_client, topic_name, 1)
    setup_client.produce(topic_name, [Message(b"x%d" % i, partition=0) for i in range(10)])
    with pytest.raises(OffsetOutOfRange):
        got = client.consume(topic_name, 1, start={0: 50}, auto_offset_reset="none", timeout=10)
        pytest.fail(f"no error; consumed {_values(got)}")


def test_long_poll(client, setup_client, topic_name):
    """A consumer waiting on an empty partition (fetch wait 3 s) gets a record produced while
    it waits, within that wait time."""
    make_topic(client, setup_client, topic_name, 1)
    result = _background(lambda: (client.consume(topic_name, 1, start={0: 0},
                                                 fetch_wait_ms=3000, timeout=20),
                                  time.monotonic()))
    time.sleep(2.5)
    produced_at = time.monotonic()
    setup_client.produce(topic_name, [Message(b"late", partition=0)])
    records, returned_at = result()
    assert _values(records) == [(0, 0, b"late")]
    # returned_at includes closing the consumer, so allow a little over the wait time
    assert returned_at - produced_at < 3.0 + 1.5, f"took {returned_at - produced_at:.2f}s"


@pytest.mark.compat(client="raw")
def test_fetch_long_poll_raw(broker, setup_client, topic_name):
    """Fetch v4 by hand: on an empty partition the broker holds the request for max_wait_ms,
    and answers early when a record arrives meanwhile."""
    make_topic(setup_client, setup_client, topic_name, 1)
    host, _, port = broker.bootstrap.rpartition(":")
    kw.wait_partition_served(host, int(port), topic_name, 0)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        started = time.monotonic()
        sock.sendall(kw.fetch_request_v4(topic_name, 0, 0, max_wait_ms=1500))
        empty = kw.parse_fetch_v4(kw.read_frame(sock))
        held = time.monotonic() - started
        part = empty[(topic_name, 0)]
        assert part.error_code == 0 and part.records == b"" and part.high_watermark == 0
        assert 1.2 <= held <= 3.0, f"empty fetch answered after {held:.2f}s, max_wait 1.5s"

        started = time.monotonic()
        sock.sendall(kw.fetch_request_v4(topic_name, 0, 0, max_wait_ms=4000, correlation_id=12))
        time.sleep(0.5)
        setup_client.produce(topic_name, [Message(b"wake", partition=0)])
        woken = kw.parse_fetch_v4(kw.read_frame(sock))
        waited = time.monotonic() - started
        part = woken[(topic_name, 0)]
        assert part.error_code == 0 and part.high_watermark == 1
        assert kw.batch_offsets(part.records) == [(0, 0)]
        assert waited < 3.0, f"fetch not woken by the produce: answered after {waited:.2f}s of 4s"
