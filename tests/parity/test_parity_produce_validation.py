"""Produce refuses what Kafka 4.4 refuses in a client's batch: INVALID_RECORD (87).

Kafka checks more than the CRC of a produced batch (UnifiedLog.analyzeAndValidateRecords,
LogValidator): one magic-2 batch per partition, base offset 0, a positive record count that
agrees with the last offset delta, a base sequence when there is a producer id, and records
that parse and fill the batch (their offset deltas need not be 0, 1, 2, ...). A batch that breaks any of them
but whose CRC is right (the CRC says nothing about whether the bytes it covers make sense)
is answered INVALID_RECORD; before, Trafka stored it, and every consumer fetching it then
failed. Each hostile batch here is sent to a Trafka broker (always) and to an Apache Kafka
4.4 node (when its jars are resolved) and both answers are compared; a well-formed batch
is accepted by both afterwards, so nothing was half-written.
"""

from __future__ import annotations

import struct
import time

import pytest

from compat_tests.brokers import TRAFKA_SUITE_ARGS, started
from compat_tests.kafka_brokers import KafkaBroker
from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.errors import ErrorCode
from wire.records import CRC, CRC_START, Record, build_batch, crc32c
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(300)

TOPIC = "ppv"


def _batch(count: int = 2, compression: int = 0, **kw) -> bytearray:
    records = [Record(offset=i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v%d" % i,
                      headers=[("h", b"x")]) for i in range(count)]
    return bytearray(build_batch(records, compression=compression, **kw))


def _recrc(batch: bytearray) -> bytes:
    """The CRC made right again: what is wrong is inside what it covers."""
    struct.pack_into(">I", batch, CRC, crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)


def _set(batch: bytearray, fmt: str, at: int, value: int) -> bytearray:
    struct.pack_into(fmt, batch, at, value)
    return batch


def _trailing() -> bytes:
    batch = _batch() + b"\x00\x00\x00"
    return _recrc(_set(batch, ">i", 8, len(batch) - 12))


def _compressed_short() -> bytes:
    """A gzip batch whose compressed records end inside the second record."""
    from wire import compression

    whole = _batch(2)
    body = compression.compress(1, bytes(whole[61:-3]))
    batch = whole[:61] + body
    _set(batch, ">h", 21, 1)  # gzip
    return _recrc(_set(batch, ">i", 8, len(batch) - 12))


def _negative_header_count() -> bytes:
    batch = _batch(1)
    at = 61 + 10  # length, attributes, timestamp delta, offset delta, key (1 + 2), value (1 + 2): the header count
    assert batch[at] == 2
    batch[at] = 3  # zigzag -2
    return _recrc(batch)


def _offset_delta_gap() -> bytes:
    records = [Record(offset=o, timestamp=1_700_000_000_000, key=b"k", value=b"v") for o in (0, 3)]
    batch = bytearray(build_batch(records))
    return _recrc(_set(batch, ">i", 23, 1))  # the header agrees with the count: only the record is wrong


HOSTILE = {
    "base-offset-5": lambda: bytes(_set(_batch(), ">q", 0, 5)),
    "base-offset--1": lambda: bytes(_set(_batch(), ">q", 0, -1)),
    "record-length-past-the-batch": lambda: _recrc(_set(_batch(), ">B", 61, 0x7E)),
    "record-length-1": lambda: _recrc(_set(_batch(), ">B", 61, 0x02)),
    "bytes-after-the-records": _trailing,
    "count-above-records": lambda: _recrc(_set(_batch(), ">i", 57, 3)),
    "count-below-records": lambda: _recrc(_set(_batch(), ">i", 57, 1)),
    "last-offset-delta-off": lambda: _recrc(_set(_batch(), ">i", 23, 5)),
    "count-0": lambda: _recrc(_set(_set(_batch(), ">i", 57, 0), ">i", 23, -1)),
    "two-batches": lambda: bytes(_batch()) + bytes(_batch()),
    "producer-id-without-sequence": lambda: bytes(_batch(producer_id=1000, producer_epoch=0, base_sequence=-1)),
    "negative-header-count": _negative_header_count,
    "compressed-records-cut-short": _compressed_short,
}


def produce(port: int, data: bytes) -> tuple[int, int]:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": data}]}]}
    answer = raw_request("127.0.0.1", port, ApiKey.PRODUCE, 9, body)["responses"][0]["partition_responses"][0]
    return answer["error_code"], answer["base_offset"]


def _ready(port: int) -> None:
    """A topic whose leader answers (Kafka's is NOT_LEADER_OR_FOLLOWER for a moment)."""
    create_topic(port, TOPIC, 1)
    deadline = time.monotonic() + 30
    while produce(port, bytes(_batch()))[0] != ErrorCode.NONE:
        assert time.monotonic() < deadline, "the topic's leader never answered"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def trafka(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("ppv-trafka") / "data", *TRAFKA_SUITE_ARGS) as proc:
        _ready(proc.port)
        yield proc.port


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    node = started(lambda: KafkaBroker(tmp_path_factory.mktemp("ppv-kafka")))
    try:
        _ready(node.port)
        yield node.port
    finally:
        node.stop()


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_trafka_refuses_a_batch_kafka_refuses(trafka, case):
    before = produce(trafka, bytes(_batch()))[1]
    assert produce(trafka, HOSTILE[case]()) == (ErrorCode.INVALID_RECORD, -1)
    assert produce(trafka, bytes(_batch()))[1] == before + 2  # nothing of the refused batch was written


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_kafka_answers_the_same(kafka, trafka, case):
    assert produce(trafka, HOSTILE[case]())[0] == produce(kafka, HOSTILE[case]())[0] == ErrorCode.INVALID_RECORD


def test_an_offset_delta_gap_passes_as_in_kafka(kafka, trafka):
    """Kafka does not check the records' offset deltas; neither does Trafka."""
    assert produce(trafka, _offset_delta_gap())[0] == produce(kafka, _offset_delta_gap())[0] == ErrorCode.NONE


def test_well_formed_batches_still_pass(trafka):
    """Every codec, null keys and values, several headers, a record of a large varint length."""
    for codec in (0, 1, 2, 3, 4):
        records = [Record(offset=i, timestamp=1_700_000_000_000 + i * 10_000_000, key=None if i % 2 else b"k",
                          value=None if i == 3 else b"v" * (i * 100), headers=[("a", b"1"), ("b", None)] * (i % 3))
                   for i in range(20)]
        assert produce(trafka, bytes(build_batch(records, compression=codec)))[0] == ErrorCode.NONE, codec
