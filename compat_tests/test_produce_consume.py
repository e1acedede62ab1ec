"""Produce and consume back: exact bytes, order and offsets per partition.

Each scenario produces with the client under test and reads back with the same client, then
compares every partition's records with what was sent: keys, values, headers, order, and
offsets 0..n-1. A broker that loses, duplicates, reorders or alters a record fails here.
"""

from __future__ import annotations

import os
import socket
import struct

import pytest
from kafka.record.memory_records import MemoryRecordsBuilder

from compat_tests import kafka_wire as kw
from compat_tests.clients.base import LARGE_LIMIT, Message, NotSupportedByClient
from compat_tests.helpers import assert_exact, make_topic, now_ms, produce_via, wait_metadata


def _roundtrip(client, setup, topic, messages, partitions=1, configs=None, timeout=20.0,
               **produce_kwargs):
    make_topic(client, setup, topic, partitions, configs)
    deliveries = client.produce(topic, messages, **produce_kwargs)
    expected = {p: [m for m in messages if m.partition == p] for p in range(partitions)}
    if deliveries is not None:  # kcat reports none
        assert len(deliveries) == len(messages)
        next_offset = dict.fromkeys(range(partitions), 0)
        for m, d in zip(messages, deliveries):
            assert d.partition == m.partition
            if d.offset is not None:
                assert d.offset == next_offset[d.partition], (
                    f"delivery offset {d.offset} != {next_offset[d.partition]} "
                    f"in partition {d.partition}")
            next_offset[d.partition] += 1
    records = client.consume(topic, len(messages), timeout=timeout)
    assert_exact(records, expected)
    return records


def test_keys_and_null_keys(client, setup_client, topic_name):
    messages = []
    for p in range(3):
        for i in range(20):
            key = None if i % 4 == 0 else f"key-{p}-{i}".encode()
            messages.append(Message(f"value-{p}-{i}".encode(), key, partition=p))
    messages.append(Message(bytes(range(1, 256)), b"\x01binary\xffkey", partition=1))
    _roundtrip(client, setup_client, topic_name, messages, partitions=3)


def test_null_values(client, setup_client, topic_name):
    """Tombstones: a null value is not an empty value. (A record with neither key nor value
    is legal too, but kafka-python and aiokafka refuse to send one.)"""
    messages = [Message(None, b"k1", partition=0), Message(b"live", b"k2", partition=0),
                Message(None, b"k2", partition=0), Message(b"", b"k3", partition=0),
                Message(None, b"k3", partition=0)]
    _roundtrip(client, setup_client, topic_name, messages)


def test_headers(client, setup_client, topic_name):
    messages = [
        Message(b"one", b"k", headers=(("trace", b"abc"),), partition=0),
        Message(b"two", b"k", headers=(("a", b"1"), ("b", b"2"), ("a", b"3")), partition=0),
        Message(b"three", b"k", headers=(("empty", b""),), partition=0),
        Message(b"four", b"k", headers=(("utf8", "h\u00e9ader \u2713".encode()),), partition=0),
        Message(b"five", b"k", partition=0),
        Message(b"six", b"k", headers=tuple((f"h{i}", b"%d" % i) for i in range(20)), partition=0),
    ]
    _roundtrip(client, setup_client, topic_name, messages)


def test_header_null_value(client, setup_client, topic_name):
    """A header whose value is null (-1 length) stays null."""
    messages = [Message(b"v", b"k", headers=(("null", None), ("set", b"x")), partition=0)]
    _roundtrip(client, setup_client, topic_name, messages)


def test_create_time_timestamps(client, setup_client, topic_name):
    """Producer-set timestamps come back unchanged, typed CreateTime."""
    make_topic(client, setup_client, topic_name, 1)
    base = now_ms() - 3_600_000
    messages = [Message(f"t{i}".encode(), partition=0, timestamp=base + i * 1000)
                for i in range(5)]
    produce_via(client, setup_client, topic_name, messages)
    records = client.consume(topic_name, 5, timeout=15)
    assert_exact(records, {0: messages})
    assert [(r.timestamp, r.timestamp_type) for r in records] == [
        (base + i * 1000, "CreateTime") for i in range(5)]


def test_log_append_time(client, setup_client, topic_name):
    """message.timestamp.type=LogAppendTime: the broker stamps records when it appends them."""
    make_topic(client, setup_client, topic_name, 1,
               {"message.timestamp.type": "LogAppendTime"})
    old = now_ms() - 86_400_000
    before = now_ms()
    messages = [Message(f"lat{i}".encode(), partition=0, timestamp=old) for i in range(3)]
    try:
        client.produce(topic_name, messages)
    except NotSupportedByClient:  # kcat cannot set timestamps: then the client stamps them
        messages = [Message(m.value, partition=0) for m in messages]
        client.produce(topic_name, messages)
    after = now_ms()
    records = client.consume(topic_name, 3, timeout=15)
    assert_exact(records, {0: messages})
    for r in records:
        assert r.timestamp_type == "LogAppendTime", f"offset {r.offset}: {r.timestamp_type}"
        assert before - 2000 <= r.timestamp <= after + 2000, (
            f"offset {r.offset}: timestamp {r.timestamp} not the append time "
            f"({before}..{after}); producer sent {old}")


def test_empty_values(client, setup_client, topic_name):
    """An empty value (and an empty key) is b"", not null."""
    messages = [Message(b"", b"k1", partition=0), Message(b"x", b"", partition=0),
                Message(b"", b"", partition=0), Message(b"", b"k4", partition=0)]
    _roundtrip(client, setup_client, topic_name, messages)


@pytest.mark.timeout(180)
def test_large_values_1mib(client, setup_client, topic_name):
    """Three 1 MiB values; the topic's max.message.bytes allows them (Kafka's default would
    not: 1 MiB plus record overhead exceeds 1048588)."""
    messages = [Message(os.urandom(1 << 20), f"big{i}".encode(), partition=0) for i in range(3)]
    _roundtrip(client, setup_client, topic_name, messages,
               configs={"max.message.bytes": str(LARGE_LIMIT)}, timeout=60)


@pytest.mark.timeout(180)
def test_10000_small_messages(client, setup_client, topic_name):
    messages = [Message(b"m%05d" % i, b"k%d" % (i % 7) if i % 3 else None, partition=i % 2)
                for i in range(10_000)]
    messages.sort(key=lambda m: m.partition)  # one run per partition keeps kcat to two calls
    _roundtrip(client, setup_client, topic_name, messages, partitions=2, timeout=60)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compression(client, setup_client, topic_name, codec):
    messages = [Message(b"compressible payload %d " % i * 20, b"key-%d" % i, partition=0)
                for i in range(300)]
    _roundtrip(client, setup_client, topic_name, messages, compression=codec)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(client, setup_client, topic_name, acks):
    messages = [Message(b"acks-%s-%d" % (acks.encode(), i), b"k%d" % i, partition=0)
                for i in range(50)]
    _roundtrip(client, setup_client, topic_name, messages,
               acks=acks if acks == "all" else int(acks))


@pytest.mark.compat(client="raw")
def test_acks0_no_response_raw(broker, setup_client, topic_name):
    """Kafka never answers a Produce with acks=0: the next frame on the connection answers the
    next request. A broker that answers anyway makes the Java client (which expects no answer)
    read that frame as another request's, fail its correlation check and drop the connection."""
    setup_client.create_topic(topic_name, 1)
    wait_metadata(setup_client, topic_name, lambda t: t.error_code == 0 and 0 in t.partitions
                  and t.partitions[0] >= 0, what="a leader")
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=now_ms(), key=b"k", value=b"acks0", headers=[])
    builder.close()
    records = bytes(builder.buffer())
    # Produce v3 (non-flexible): transactional_id, acks, timeout, [topic [partition records]].
    body = (kw.string(None) + struct.pack(">hi", 0, 5000) + struct.pack(">i", 1)
            + kw.string(topic_name) + struct.pack(">i", 1)
            + struct.pack(">ii", 0, len(records)) + records)
    host, _, port = broker.bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.settimeout(10)
        for correlation_id in (1, 2):
            sock.sendall(kw.frame(kw.request_header(kw.API_PRODUCE, 3, correlation_id,
                                                    "trafka-compat", False) + body))
        sock.sendall(kw.frame(kw.request_header(kw.API_METADATA, 1, 3, "trafka-compat", False)
                              + struct.pack(">i", 0)))
        first = kw.read_frame(sock)
    (correlation_id,) = struct.unpack(">i", first[:4])
    assert correlation_id == 3, (
        f"the first frame back answers correlation id {correlation_id}: the broker answered a "
        "Produce with acks=0")
    records_back = setup_client.consume(topic_name, 2, timeout=15.0)
    assert [r.value for r in records_back] == [b"acks0", b"acks0"]


def test_idempotent_producer(client, setup_client, topic_name):
    """enable.idempotence=true: InitProducerId, sequence numbers; no duplicates, no gaps."""
    messages = [Message(b"idem-%d" % i, b"k%d" % (i % 5), partition=i % 2) for i in range(200)]
    messages.sort(key=lambda m: m.partition)
    _roundtrip(client, setup_client, topic_name, messages, partitions=2, idempotent=True)
