"""Readers fed whole, byte by byte, in random chunks and with trailing bytes; malformed,
truncated, lying and garbage input gives typed errors (never a bare struct.error,
construct error, IndexError, UnicodeDecodeError or MemoryError), fast and without
allocating what a length prefix claims.
"""

from __future__ import annotations

import struct
import time
import tracemalloc
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wire.connection import (
    NEED_DATA,
    Connection,
    EncodeError,
    Request,
    UnsupportedRequest,
    decode_request,
    decode_response,
    encode_api_versions_fallback,
    encode_request,
    encode_response,
)
from wire.errors import FrameTooLarge, MalformedFrame, ProtocolError
from wire.records import iter_headers
from wire.registry import CODEC_VERSIONS

from kafka.record.default_records import DefaultRecordBatchBuilder


def _batch(values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=None, value=value, headers=[])
    return bytes(builder.build())


BATCH = _batch([b"hello", b"world", b"x" * 100])

# (api key, version, body): a mix of flexible and non-flexible requests clients send.
SAMPLES = [
    (18, 3, {"client_software_name": "librdkafka", "client_software_version": "2.16.0"}),
    (18, 0, {}),
    (3, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": "orders"}], "allow_auto_topic_creation": True,
             "include_topic_authorized_operations": False}),
    (3, 5, {"topics": None, "allow_auto_topic_creation": False}),
    (0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": BATCH}]}]}),
    (0, 7, {"transactional_id": None, "acks": 1, "timeout_ms": 1500,
            "topic_data": [{"name": "orders", "partition_data": [{"index": 2, "records": BATCH}]}]}),
    (1, 11, {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 1,
             "session_id": 0, "session_epoch": -1,
             "topics": [{"topic": "orders", "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                            "fetch_offset": 3, "log_start_offset": -1,
                                                            "partition_max_bytes": 1 << 20}]}],
             "forgotten_topics_data": [], "rack_id": ""}),
    (12, 4, {"group_id": "g", "generation_id": 3, "member_id": "m-1", "group_instance_id": None}),
    (11, 7, {"group_id": "g", "session_timeout_ms": 45000, "rebalance_timeout_ms": 300000, "member_id": "",
             "group_instance_id": None, "protocol_type": "consumer",
             "protocols": [{"name": "range", "metadata": b"\x00\x01meta"}], "reason": None}),
]


def _frames():
    return [encode_request(key, version, 100 + i, body, client_id=f"client-{i}")
            for i, (key, version, body) in enumerate(SAMPLES)]


def _drain(conn: Connection) -> list:
    out = []
    while True:
        request = conn.next_request()
        if request is NEED_DATA:
            return out
        out.append(request)


def _summary(request: Request) -> tuple:
    return request.api_key, request.api_version, request.correlation_id, request.client_id, _plain(request.body)


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


EXPECTED = [_summary(decode_request(f[4:])) for f in _frames()]


# --------------------------------------------------------------------------- feeding


def test_fed_whole():
    conn = Connection()
    conn.receive_data(b"".join(_frames()))
    assert [_summary(r) for r in _drain(conn)] == EXPECTED
    assert conn.buffered == 0
    assert conn.requests_received == len(SAMPLES)


def test_fed_byte_by_byte():
    conn = Connection()
    got = []
    for byte in b"".join(_frames()):
        conn.receive_data(bytes([byte]))
        got.extend(_drain(conn))
    assert [_summary(r) for r in got] == EXPECTED
    assert conn.buffered == 0


@settings(max_examples=60, deadline=None, database=None)
@given(st.lists(st.integers(1, 700), min_size=1, max_size=60))
def test_fed_in_random_chunks(sizes):
    data = b"".join(_frames())
    conn = Connection()
    got = []
    pos = 0
    i = 0
    while pos < len(data):
        n = sizes[i % len(sizes)]
        conn.receive_data(memoryview(data)[pos:pos + n])
        pos += n
        i += 1
        got.extend(_drain(conn))
    assert [_summary(r) for r in got] == EXPECTED
    assert conn.buffered == 0


def test_trailing_bytes_wait_for_the_rest():
    frames = _frames()
    tail = frames[1][:7]
    conn = Connection()
    conn.receive_data(frames[0] + tail)
    assert [_summary(r) for r in _drain(conn)] == EXPECTED[:1]
    assert conn.buffered == len(tail)
    assert conn.pending_frame_size() == len(frames[1]) - 4
    assert conn.next_request() is NEED_DATA
    conn.receive_data(frames[1][7:])
    assert [_summary(r) for r in _drain(conn)] == EXPECTED[1:2]
    assert conn.buffered == 0


def test_records_are_views_that_survive_later_reads_and_can_be_patched():
    """Zero-copy records point into the receive buffer: later reads must not disturb them,
    and patching them in place (as the log does) must not disturb later frames."""
    produce = [f for f, (k, _v, _b) in zip(_frames(), SAMPLES) if k == 0]
    conn = Connection()
    conn.receive_data(produce[0] + produce[1][:10])
    (first,) = _drain(conn)
    records = first.body["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, memoryview) and not records.readonly
    assert records == BATCH
    struct.pack_into(">q", records, 0, 4242)  # patch the base offset in place
    conn.receive_data(produce[1][10:] + produce[0])
    second, third = _drain(conn)
    for later in (second, third):
        assert later.body["topic_data"][0]["partition_data"][0]["records"] == BATCH
    assert struct.unpack_from(">q", records, 0)[0] == 4242
    assert [h.record_count for _pos, h in iter_headers(records)] == [3]


def test_records_from_bytes_input_are_a_mutable_copy():
    frame = encode_request(*SAMPLES[4][:2], 1, SAMPLES[4][2])
    records = decode_request(frame[4:]).body["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, bytearray) and records == BATCH


# --------------------------------------------------------------------------- malformed input


def _assert_context(exc: ProtocolError, frame: bytes) -> None:
    """The error names what of the header was readable."""
    if len(frame) >= 8:
        key, version, correlation_id = struct.unpack_from(">hhi", frame)
        assert (exc.api_key, exc.api_version, exc.correlation_id) == (key, version, correlation_id)


@pytest.mark.parametrize("index", range(len(SAMPLES)))
def test_every_truncation_is_a_typed_error(index):
    frame = _frames()[index][4:]
    step = max(1, len(frame) // 400)  # the produce frames are long: sample their cut points
    for cut in list(range(0, len(frame), step)) + [len(frame) - 1]:
        with pytest.raises(MalformedFrame) as info:
            decode_request(frame[:cut])
        _assert_context(info.value, frame[:cut])


@pytest.mark.parametrize("index", range(len(SAMPLES)))
def test_trailing_bytes_inside_a_frame_are_counted_not_refused(index):
    # Kafka's parser ignores bytes after the body, and librdkafka 2.16 sends some.
    frame = _frames()[index][4:]
    plain = decode_request(frame)
    padded = decode_request(frame + b"\x00\x00\x00")
    assert padded.body == plain.body and plain.trailing == 0 and padded.trailing == 3


def test_truncated_frame_inside_connection_is_typed_and_consumed():
    frame = _frames()[2][4:]
    short = frame[:-3]
    conn = Connection()
    conn.receive_data(struct.pack(">i", len(short)) + short + _frames()[7])
    with pytest.raises(MalformedFrame) as info:
        conn.next_request()
    _assert_context(info.value, short)
    # The bad frame was consumed; the next one decodes.
    assert _summary(conn.next_request()) == EXPECTED[7]


def _request_header(key: int, version: int, correlation_id: int = 77, flexible: bool = False) -> bytes:
    return struct.pack(">hhih", key, version, correlation_id, 2) + b"id" + (b"\x00" if flexible else b"")


def _timed_typed_error(frame: bytes, *, decoder=decode_request) -> ProtocolError:
    """Decoding `frame` fails typed, with well under a millisecond's worth of work, and
    without allocating anything like what the frame claims."""
    with pytest.raises(ProtocolError):
        decoder(frame)  # once first: compiling the message's codec is not what is measured
    tracemalloc.start()
    try:
        started = time.perf_counter()
        with pytest.raises(ProtocolError) as info:
            decoder(frame)
        elapsed = time.perf_counter() - started
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # A decoder that believed the prefix would loop or allocate for seconds; 0.5 s leaves room
    # for a loaded CI machine descheduling this process (CI runs three suites side by side).
    assert elapsed < 0.5, f"took {elapsed * 1000:.1f} ms"
    assert peak < 256 * 1024, f"allocated {peak} bytes"
    return info.value


LIES = {
    # Metadata v4: topics array count 2^31-1, 10 bytes follow.
    "array count 2^31-1": _request_header(3, 4) + struct.pack(">i", (1 << 31) - 1) + b"\x00" * 10,
    # Metadata v12 (flexible): compact array count 2^32-2.
    "compact array count 2^32": _request_header(3, 12, flexible=True) + b"\xff\xff\xff\xff\x0f",
    # Produce v7: records length 2^31-1.
    "records length 2^31-1": _request_header(0, 7) + b"\xff\xff" + struct.pack(">hi", 1, 1000) + struct.pack(">i", 1)
    + struct.pack(">h", 1) + b"t" + struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", (1 << 31) - 1),
    # Heartbeat v3: group id string length 32767 with 3 bytes behind it.
    "string length 32767": _request_header(12, 3) + struct.pack(">h", 0x7FFF) + b"abc",
    # JoinGroup v5: protocol metadata bytes length 2^31-1.
    "bytes length 2^31-1": _request_header(11, 5) + struct.pack(">h", 1) + b"g" + struct.pack(">ii", 1, 1)
    + struct.pack(">h", 0) + b"\xff\xff" + struct.pack(">h", 1) + b"c" + struct.pack(">i", 1)
    + struct.pack(">h", 1) + b"r" + struct.pack(">i", (1 << 31) - 1),
    # Heartbeat v4 (flexible): a tagged-field count of 2^31.
    "tag count 2^31": _request_header(12, 4, flexible=True)[:-1] + b"\x80\x80\x80\x80\x08",
    # A known-version request whose header tag claims 2^32 bytes.
    "tag size 2^32": _request_header(12, 4, flexible=True)[:-1] + b"\x01\x00\xff\xff\xff\xff\x0f",
    # A varint that never ends.
    "endless varint": _request_header(3, 12, flexible=True) + b"\xff" * 64,
    # Negative lengths that are not -1.
    "string length -2": _request_header(12, 3) + struct.pack(">h", -2),
    "array count -7": _request_header(3, 4) + struct.pack(">i", -7),
    # Not UTF-8.
    "bad utf-8": _request_header(12, 3) + struct.pack(">h", 2) + b"\xff\xfe" + b"\x00" * 20,
    "bad utf-8 client id": struct.pack(">hhih", 12, 3, 77, 2) + b"\xc3\x28",
}


@pytest.mark.parametrize("name", list(LIES))
def test_lying_prefixes_fail_fast_without_allocating(name):
    frame = LIES[name]
    error = _timed_typed_error(frame)
    assert isinstance(error, MalformedFrame)
    _assert_context(error, frame)


def test_lying_response_prefix_fails_fast():
    frame = struct.pack(">i", 9) + struct.pack(">i", (1 << 31) - 1)  # Metadata v1 brokers count
    error = _timed_typed_error(frame, decoder=lambda f: decode_response(3, 1, f))
    assert isinstance(error, MalformedFrame) and error.correlation_id == 9


def test_connection_frame_size_limits():
    for size in (-1, -(1 << 31), 1001):
        conn = Connection(max_frame_size=1000)
        conn.receive_data(struct.pack(">i", size) + _request_header(3, 12))
        with pytest.raises(FrameTooLarge) as info:
            conn.next_request()
        assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (3, 12, 77)
    conn = Connection(max_frame_size=1000)
    conn.receive_data(struct.pack(">i", 1 << 30)[:4])
    with pytest.raises(FrameTooLarge):
        conn.next_request()


def test_declared_but_unsent_frame_allocates_nothing():
    conn = Connection()  # 100 MiB limit
    tracemalloc.start()
    try:
        conn.receive_data(struct.pack(">i", 100 * 1024 * 1024) + _request_header(0, 9))
        assert conn.next_request() is NEED_DATA
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


def test_tiny_frames_are_malformed():
    for size in range(8):
        conn = Connection()
        conn.receive_data(struct.pack(">i", size) + b"\x00" * size)
        with pytest.raises(MalformedFrame):
            conn.next_request()


# --------------------------------------------------------------------------- fuzz

_SERVED = [(key, version) for key, (lo, hi) in sorted(CODEC_VERSIONS.items()) for version in range(lo, hi + 1)]


def _flexible_request(key: int, version: int) -> bool:
    from wire.connection import request_header_version
    return request_header_version(key, version) == 2


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_SERVED), st.binary(max_size=200))
def test_fuzz_garbage_bodies(served, body):
    key, version = served
    frame = _request_header(key, version, flexible=_flexible_request(key, version)) + body
    try:
        result = decode_request(frame)
    except MalformedFrame as exc:
        _assert_context(exc, frame)
    else:
        assert isinstance(result, Request)


@settings(max_examples=300, deadline=None, database=None)
@given(st.binary(max_size=120))
def test_fuzz_garbage_frames(frame):
    try:
        result = decode_request(frame)
    except MalformedFrame as exc:
        _assert_context(exc, frame)
    else:
        assert isinstance(result, (Request, UnsupportedRequest))


@settings(max_examples=300, deadline=None, database=None)
@given(st.sampled_from(range(len(SAMPLES))), st.data())
def test_fuzz_mutated_frames(index, data):
    frame = bytearray(_frames()[index][4:])
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(frame) - 1))
        frame[pos] = data.draw(st.integers(0, 255))
    try:
        decode_request(bytes(frame))
    except MalformedFrame as exc:
        _assert_context(exc, bytes(frame))


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_SERVED), st.binary(max_size=200))
def test_fuzz_garbage_responses(served, body):
    key, version = served
    try:
        decode_response(key, version, body)
    except MalformedFrame:
        pass


@settings(max_examples=150, deadline=None, database=None)
@given(st.lists(st.binary(min_size=0, max_size=40), max_size=8))
def test_fuzz_connection_stream(chunks):
    """A connection fed garbage only ever answers requests, NEED_DATA or ProtocolError."""
    conn = Connection(max_frame_size=4096)
    for chunk in chunks:
        conn.receive_data(chunk)
        while True:
            try:
                result = conn.next_request()
            except FrameTooLarge:
                return  # the server closes the connection here
            except MalformedFrame:
                continue
            if result is NEED_DATA:
                break
            assert isinstance(result, (Request, UnsupportedRequest))


# --------------------------------------------------------------------------- unsupported


def test_unknown_api_key_and_version_are_unsupported_requests():
    cases = [(99, 0), (-1, 0), (3, 13), (1, 18), (18, 5), (0, -1), (1000, 7)]
    conn = Connection()
    for i, (key, version) in enumerate(cases):
        # The body is garbage and never looked at; header v1 only is read.
        conn.receive_data(encode_request(18, 0, 0, {})[:0] + struct.pack(">i", 12 + 5)
                          + struct.pack(">hhih", key, version, 500 + i, 2) + b"cc" + b"\xde\xad\xbe\xef\x00")
    results = _drain(conn)
    assert [type(r) for r in results] == [UnsupportedRequest] * len(cases)
    assert [(r.api_key, r.api_version, r.correlation_id, r.client_id) for r in results] == [
        (key, version, 500 + i, "cc") for i, (key, version) in enumerate(cases)]


# --------------------------------------------------------------------------- response headers


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_response_header_is_always_v0(version):
    body = {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}],
            "throttle_time_ms": 0}
    frame = encode_response(18, version, 0x01020304, body)
    assert frame[4:8] == b"\x01\x02\x03\x04"
    assert frame[8:10] == b"\x00\x00"  # error_code straight after the correlation id: no tag buffer
    assert decode_response(18, version, frame[4:])[1]["api_keys"][0]["max_version"] == 4


def test_flexible_responses_have_header_v1():
    frame = encode_response(3, 12, 5, {})
    assert frame[4:9] == b"\x00\x00\x00\x05\x00"
    frame = encode_response(3, 8, 5, {})
    assert frame[8:12] == b"\x00\x00\x00\x00"  # throttle_time_ms right after the id


def test_api_versions_fallback_is_v0_layout():
    frame = encode_api_versions_fallback(9, 35, [{"api_key": 18, "min_version": 0, "max_version": 4}])
    assert frame == struct.pack(">iihihhh", 4 + 2 + 4 + 6, 9, 35, 1, 18, 0, 4)


# --------------------------------------------------------------------------- encode errors


@pytest.mark.parametrize("body", [
    {"error_code": "x"},
    {"error_code": 1 << 20},
    {"error_code": None, "host": b"bytes-not-str"},
    {"host": 5},
])
def test_encode_errors_are_typed(body):
    with pytest.raises(EncodeError) as info:
        encode_response(10, 0, 3, body)
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (10, 0, 3)


def test_encode_error_for_unknown_api_or_version():
    with pytest.raises(EncodeError):
        encode_response(3, 99, 1, {})
    with pytest.raises(EncodeError):
        encode_response(999, 0, 1, {})
    with pytest.raises(EncodeError):
        encode_response(3, 12, 1, {"topics": [None]})
    with pytest.raises(EncodeError):
        encode_response(3, 12, 1, {"brokers": [{"node_id": 1, "host": "h", "rack": 7}]})


def test_none_for_a_non_nullable_field_means_its_default():
    """Handlers may leave a field None where the schema has a default (KStruct docs)."""
    frame = encode_response(3, 12, 1, {"brokers": [{"node_id": 1, "host": None}], "topics": None})
    _cid, body = decode_response(3, 12, frame[4:])
    assert body["brokers"][0]["host"] == "" and body["topics"] == []


# --------------------------------------------------------------------------- tagged fields


def _heartbeat_v4_with_tags(tags: bytes) -> bytes:
    """A Heartbeat v4 request whose body's tag section is `tags` (raw)."""
    frame = encode_request(12, 4, 5, {"group_id": "g", "generation_id": 1, "member_id": "m",
                                      "group_instance_id": None})[4:]
    assert frame.endswith(b"\x00")
    return frame[:-1] + tags


def test_unknown_tags_in_any_order_are_kept_and_sorted():
    """Like Kafka's generated readers, tag order is not enforced; a re-encode sorts."""
    frame = _heartbeat_v4_with_tags(b"\x02" + b"\x09\x01\xaa" + b"\x03\x02\xbb\xcc")
    request = decode_request(frame)
    assert request.body["_unknown_tags"] == {9: b"\xaa", 3: b"\xbb\xcc"}
    again = encode_request(12, 4, 5, request.body, client_id=request.client_id)
    assert again[4:] == _heartbeat_v4_with_tags(b"\x02" + b"\x03\x02\xbb\xcc" + b"\x09\x01\xaa")


def test_tagged_value_errors_name_the_field():
    # FetchResponse v12 partition: tag 0 is diverging_epoch (int32 epoch, int64 end_offset).
    body = {"responses": [{"topic": "t", "partitions": [{"diverging_epoch": {"epoch": "x"}}]}]}
    with pytest.raises(EncodeError, match="diverging_epoch"):
        encode_response(1, 12, 1, body)


def test_none_for_a_tagged_field_means_absent():
    body = {"responses": [{"topic": "t", "partitions": [{"diverging_epoch": None, "current_leader": None}]}]}
    plain = {"responses": [{"topic": "t", "partitions": [{}]}]}
    assert encode_response(1, 12, 1, body) == encode_response(1, 12, 1, plain)


def test_tags_at_their_default_are_not_written_unless_they_arrived_so():
    """Handlers never emit default-valued tags (librdkafka < 2.2,
    docs/design/clients.md#no-tagged-fields-at-their-default), but a
    decoded frame that carried one re-encodes to the same bytes."""
    body = {"error_code": 0, "api_keys": [], "throttle_time_ms": 0, "zk_migration_ready": False,
            "finalized_features_epoch": -1, "supported_features": []}
    frame = encode_response(18, 3, 1, body)
    assert frame.endswith(b"\x00\x00\x00\x00\x00")  # throttle_time_ms 0, then an empty tag section
    explicit = frame[4:-1] + b"\x01" + b"\x03\x01\x00"  # zk_migration_ready=false, sent explicitly
    _cid, decoded = decode_response(18, 3, explicit)
    assert decoded["zk_migration_ready"] is False and decoded["_default_tags"] == {3: b"\x00"}
    assert encode_response(18, 3, 1, decoded)[4:] == explicit


def test_decode_response_for_an_api_without_schema_is_typed():
    with pytest.raises(MalformedFrame):
        decode_response(999, 0, b"\x00\x00\x00\x01")


def test_big_partial_frame_after_small_ones():
    """The frozen-buffer path: small frames handed out, a large one still arriving."""
    small = _frames()[7]
    big = encode_request(0, 9, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 1,
                                   "topic_data": [{"name": "t", "partition_data": [
                                       {"index": 0, "records": _batch([b"z" * 200_000])}]}]})
    conn = Connection()
    conn.receive_data(small + small + big[:1000])
    first, second = _drain(conn)
    conn.receive_data(big[1000:150_000])
    assert conn.next_request() is NEED_DATA
    conn.receive_data(big[150_000:])
    (third,) = _drain(conn)
    assert _summary(first) == _summary(second) == EXPECTED[7]
    assert b"z" * 200_000 in bytes(third.body["topic_data"][0]["partition_data"][0]["records"])
    assert conn.buffered == 0
