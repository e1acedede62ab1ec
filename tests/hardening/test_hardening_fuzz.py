"""Malformed frames against a running broker, with real clients working beside them.

Each fuzz family sends its examples on fresh connections while `Traffic` (an idempotent
confluent-kafka producer and a consumer) runs on the same broker. After every example the
broker process must be alive and the fuzz connection must have ended in one of two ways:
closed by the broker, or answered with frames that decode as responses to what we sent
(same correlation id, same API and version). After each family the traffic must have lost
nothing and the broker's RSS must have stayed under a bound.

Families: random bytes; a valid header with a garbage body for every API key and version
we serve; schema-generated requests that are then cut, given lying length prefixes, huge
array counts, negative sizes or invalid UTF-8 names; and the same requests unmutated,
which run the handlers on odd but well-formed input (no handler may crash on them).

Hypothesis example counts are small by default; TRAFKA_LONG_TESTS=1 runs about 20x more.
"""

from __future__ import annotations

import random
import socket
import struct
import time
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hardening_kit import (
    LONG,
    Traffic,
    alive,
    api_versions_ok,
    connect,
    create_topic,
    log_text,
    make_batch,
    roundtrip,
    rss_kb,
    scaled,
)
from tests.brokerproc import BrokerProcess
from wire import ApiKey, decode_response, encode_request
from wire import primitives as p
from wire.errors import ErrorCode, ProtocolError
from wire.registry import API_VERSIONS
from wire.connection import request_header_version
from wire.schema import _NullableStruct, message_struct

pytestmark = pytest.mark.timeout(scaled(240, 1800))

SERVED = [(key, version) for key, (lo, hi) in sorted(API_VERSIONS.items()) for version in range(lo, hi + 1)]
MAY_BLOCK = {ApiKey.FETCH, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP}
EXAMPLES = scaled(400, 8000)
RSS_GROWTH_LIMIT_KB = 100 * 1024  # over the broker's RSS before fuzzing
ANSWER_TIMEOUT_S = 10.0
# Fields the broker may legitimately wait on; generated values are kept short so an
# example that is answered "properly" (after a wait) does not stall the run.
_WAIT_FIELDS = {"max_wait_ms", "rebalance_timeout_ms", "timeout_ms"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # No auto-creation and a partition cap: generated Metadata/CreateTopics requests would
    # otherwise create thousands of directories.
    proc = BrokerProcess(tmp_path_factory.mktemp("fuzz") / "data",
                         "--set", "auto.create.topics.enable=false", "--set", "trafka.max.partitions=400",
                         "--set", "group.min.session.timeout.ms=10")
    proc.start()
    replenish_pool(proc.port)
    try:
        yield proc
    finally:
        was_alive = alive(proc)
        proc.kill()
        assert was_alive, f"broker died during the fuzz run:\n{proc.log_tail()}"


@pytest.fixture
def traffic(broker):
    topic = f"fuzz-traffic-{uuid.uuid4().hex[:8]}"
    create_topic(broker.port, topic, partitions=2)
    t = Traffic(broker.bootstrap, topic, partitions=2).start()
    yield t
    # finish() is called by the test so failures show there; this is the safety net.
    if not t._stop.is_set():
        t.finish(10)


def replenish_pool(port: int) -> None:
    """(Re)create the pool topics; generated DeleteTopics requests remove them now and then."""
    topics = [{"name": name, "num_partitions": n, "replication_factor": 1,
               "configs": [{"name": "cleanup.policy", "value": "compact"}] if "compact" in name else []}
              for name, n in POOL_TOPICS.items()]
    roundtrip(port, ApiKey.CREATE_TOPICS, 5, {"topics": topics, "timeout_ms": 5000})


# --------------------------------------------------------------------------- one exchange


class Outcome:
    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.closed = False  # the broker closed (EOF or reset) after our half-close
        self.timed_out = False
        self.tail = b""  # bytes after the last whole frame


def exchange(port: int, payload: bytes, timeout: float = ANSWER_TIMEOUT_S) -> Outcome:
    """Send `payload`, half-close, read until the broker closes; never raises on resets."""
    out = Outcome()
    received = bytearray()
    sock = connect(port, timeout)
    try:
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the broker closed while we were sending: a valid outcome
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                out.timed_out = True
                break
            sock.settimeout(left)
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                out.timed_out = True
                break
            except (ConnectionResetError, BrokenPipeError):
                out.closed = True
                break
            if not chunk:
                out.closed = True
                break
            received += chunk
    finally:
        sock.close()
    pos = 0
    while pos + 4 <= len(received):
        size = struct.unpack_from(">i", received, pos)[0]
        if size < 4 or pos + 4 + size > len(received):
            break
        out.frames.append(bytes(received[pos + 4:pos + 4 + size]))
        pos += 4 + size
    out.tail = bytes(received[pos:])
    return out


def check_outcome(out: Outcome, sent: list[tuple[int, int, int]], *, may_block: bool = False) -> None:
    """The broker closed, and every frame it sent answers one of `sent` (key, version, cid)."""
    assert not out.tail, f"broker sent {len(out.tail)} bytes that are not a whole frame"
    if out.timed_out:
        assert may_block, "broker neither answered nor closed the connection"
    else:
        assert out.closed
    by_cid = {cid: (key, version) for key, version, cid in sent}
    for frame in out.frames:
        cid = struct.unpack_from(">i", frame)[0]
        assert cid in by_cid, f"response with correlation id {cid}, which we never sent"
        key, version = by_cid[cid]
        layout = version
        if key == ApiKey.API_VERSIONS and not (API_VERSIONS[key][0] <= version <= API_VERSIONS[key][1]):
            layout = 0  # KIP-511: an unknown ApiVersions version is answered in the v0 layout
        try:
            _cid, body = decode_response(key, layout, frame)
        except (ProtocolError, KeyError) as exc:
            raise AssertionError(f"response to {ApiKey(key).name} v{version} does not decode: {exc}") from None
        if not (API_VERSIONS.get(key, (1, 0))[0] <= version <= API_VERSIONS.get(key, (1, 0))[1]):
            assert body.get("error_code") == ErrorCode.UNSUPPORTED_VERSION


class Watch:
    """Process alive after each example, RSS sampled, a health round trip now and then."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.pid = broker.proc.pid
        self.baseline_kb = rss_kb(self.pid)
        self.peak_kb = self.baseline_kb
        self.examples = 0
        self.blocked = 0

    def after_example(self) -> None:
        self.examples += 1
        assert alive(self.broker), f"broker died:\n{self.broker.log_tail()}"
        self.peak_kb = max(self.peak_kb, rss_kb(self.pid))
        assert self.peak_kb - self.baseline_kb < RSS_GROWTH_LIMIT_KB, \
            f"broker RSS grew from {self.baseline_kb} KiB to {self.peak_kb} KiB"
        if self.examples % 25 == 0:
            assert api_versions_ok(self.broker.port), "broker stopped answering ApiVersions"


def finish_traffic(traffic: Traffic, watch: Watch) -> None:
    result = traffic.finish()
    assert not result.problems(), result.problems()
    assert len(result.acked) >= 20, f"the background producer got only {len(result.acked)} acks"
    assert watch.examples > 0


FUZZ_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=not LONG,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                HealthCheck.filter_too_much])


# --------------------------------------------------------------------------- schema strategies


_INT_BOUNDS = {"b": (-(1 << 7), (1 << 7) - 1), "h": (-(1 << 15), (1 << 15) - 1), "i": (-(1 << 31), (1 << 31) - 1),
               "q": (-(1 << 63), (1 << 63) - 1), "H": (0, (1 << 16) - 1), "I": (0, (1 << 32) - 1)}
NAME_ALPHABET = st.sampled_from("abcxyz019._-/ é\x00\u2603")


def _int_strategy(code: str) -> st.SearchStrategy[int]:
    lo, hi = _INT_BOUNDS[code]
    edges = [v for v in (lo, hi, -1, 0, 1, 2, hi // 2) if lo <= v <= hi]
    return st.one_of(st.sampled_from(edges), st.integers(max(lo, -3), min(hi, 40)), st.integers(lo, hi))


def _bytes_strategy(records: bool) -> st.SearchStrategy[bytes]:
    plain = st.binary(max_size=120)
    if not records:
        return plain
    batch = st.lists(st.binary(max_size=40), min_size=1, max_size=4).map(lambda vs: bytes(make_batch(vs)))
    return st.one_of(plain, batch)


# Names that exist on the fuzz broker (topics created by the fixture, a group the
# generated requests share, config names), so generated requests reach past the "unknown
# topic" checks into the handlers. The traffic topics are never in it.
POOL_TOPICS = {"fz-a": 2, "fz-b": 1, "fz-compact": 1}
NAME_POOL = ["fz-a", "fz-b", "fz-compact", "fz-group", "retention.ms", "cleanup.policy", "max.message.bytes",
             "segment.bytes", "message.timestamp.type", "compact", "delete", "range", "consumer", "1", "0", "-1",
             "", "__consumer_offsets"]
# Values that make a field mean something, for fields whose random values are mostly refused.
FIELD_VALUES = {
    "acks": [-1, 0, 1], "session_id": [0], "session_epoch": [-1, 0], "isolation_level": [0, 1],
    "resource_type": [2, 4], "key_type": [0], "index": [0, 1], "partition": [0, 1], "partition_index": [0, 1],
    "num_partitions": [1, 2, -1], "replication_factor": [1, -1], "count": [2, 3], "generation_id": [-1, 0, 1],
    "producer_id": [-1], "producer_epoch": [-1], "current_leader_epoch": [-1, 0], "timestamp": [-1, -2, 0],
    "config_operation": [0, 1, 2, 3], "replica_id": [-1], "fetch_offset": [0, 1, 5], "offset": [0, 1, -1],
    "committed_offset": [0, 1, -1], "max_bytes": [1 << 20, 0, 1], "partition_max_bytes": [1 << 20, 1],
    "leader_epoch": [-1, 0], "min_bytes": [0, 1], "session_timeout_ms": [10, 6000], "log_start_offset": [-1],
}


def strategy_for(typ, name: str = "") -> st.SearchStrategy:
    """Well-formed values of one construct type from wire.schema."""
    if isinstance(typ, p.KStruct):
        fields = {n: strategy_for(t, n) for n, t, _d in typ.fields}
        return st.fixed_dictionaries(fields)
    if isinstance(typ, _NullableStruct):
        return st.one_of(st.none(), strategy_for(typ.struct, name))
    if isinstance(typ, p.Array):
        items = st.lists(strategy_for(typ.element, name), max_size=3)
        return st.one_of(st.none(), items) if typ.nullable else items
    if isinstance(typ, p.Boolean):
        return st.booleans()
    if isinstance(typ, p.Fixed):
        if typ.code == "d":
            return st.floats(allow_nan=True, allow_infinity=True)
        if name in _WAIT_FIELDS:
            return st.integers(-1, 50)
        general = _int_strategy(typ.code)
        if name in FIELD_VALUES:
            return st.one_of(st.sampled_from(FIELD_VALUES[name]), general)
        return general
    if isinstance(typ, p.Uuid):
        return st.one_of(st.just(p.ZERO_UUID), st.uuids())
    if isinstance(typ, p.String):
        text = st.one_of(st.sampled_from(NAME_POOL), st.sampled_from(["fz-a", "fz-b", "fz-group"]),
                         st.text(NAME_ALPHABET, max_size=12))
        if not typ.compact:
            text = st.one_of(text, st.text(NAME_ALPHABET, min_size=240, max_size=300))
        if typ.nullable:
            # transactional_id and friends: null is the common, meaningful value
            return st.one_of(st.none(), text) if name != "transactional_id" else st.one_of(st.none(), st.none(), text)
        return text
    if isinstance(typ, p.Bytes):
        data = _bytes_strategy(isinstance(typ, p.Records))
        return st.one_of(st.none(), data) if typ.nullable else data
    raise TypeError(f"no strategy for {typ!r}")


_STRATEGIES: dict[tuple[int, int], st.SearchStrategy] = {}


def body_for(key: int, version: int) -> st.SearchStrategy[dict]:
    strategy = _STRATEGIES.get((key, version))
    if strategy is None:
        strategy = _STRATEGIES[(key, version)] = strategy_for(message_struct(key, "request", version))
    return strategy


@st.composite
def well_formed_request(draw) -> tuple[int, int, int, bytes]:
    key, version = draw(st.sampled_from(SERVED))
    body = draw(body_for(key, version))
    cid = draw(st.integers(0, (1 << 31) - 1))
    client_id = draw(st.one_of(st.none(), st.text(max_size=10)))
    return key, version, cid, encode_request(key, version, cid, body, client_id=client_id)


# --------------------------------------------------------------------------- the families


def test_random_bytes(broker, traffic):
    watch = Watch(broker)
    frame_like = st.builds(lambda size, data: struct.pack(">i", size) + data,
                           st.one_of(st.integers(-5, 64), st.integers(-(1 << 31), (1 << 31) - 1)),
                           st.binary(max_size=200))

    @FUZZ_SETTINGS
    @given(st.one_of(st.binary(min_size=1, max_size=600), frame_like))
    def run(payload):
        out = exchange(broker.port, payload)
        assert out.closed, "broker neither answered nor closed the connection"
        assert not out.tail
        watch.after_example()

    run()
    finish_traffic(traffic, watch)


def test_garbage_body_for_every_api_version(broker, traffic):
    """Deterministic sweep: every served (key, version) and a few unserved, six bad bodies each."""
    watch = Watch(broker)
    rng = random.Random(8)
    targets = SERVED + [(key, API_VERSIONS[key][1] + 1) for key in API_VERSIONS] + [(99, 0), (-1, 0), (18, 32767)]
    for key, version in targets:
        def header(cid: int) -> bytes:
            tags = b"\x00" if request_header_version(key, version) >= 2 else b""
            return struct.pack(">hhih", key, version, cid, 6) + b"trafka" + tags

        try:
            default_body = encode_request(key, version, 1, {})[4 + len(header(1)):]
        except (ProtocolError, KeyError):
            default_body = b"\x00" * 8
        bodies = [b"", b"\xff" * 64, b"\x00" * 64, bytes(rng.getrandbits(8) for _ in range(64)),
                  default_body[:-1], default_body + b"\x00"]
        for cid, body in enumerate(bodies, start=1):
            frame = header(cid) + body
            out = exchange(broker.port, struct.pack(">i", len(frame)) + frame)
            check_outcome(out, [(key, version, cid)], may_block=key in MAY_BLOCK)
            watch.after_example()
    finish_traffic(traffic, watch)


def _mutate(draw, frame: bytes) -> bytes:
    """One kind of damage to an encoded request (size prefix included)."""
    body = bytearray(frame[4:])
    kind = draw(st.sampled_from(["truncate", "lying_prefix_long", "lying_prefix_short", "negative_prefix",
                                 "huge_count", "negative_size", "bad_utf8", "flip", "append"]))
    if kind == "truncate":
        cut = draw(st.integers(0, max(0, len(body) - 1)))
        return struct.pack(">i", cut) + bytes(body[:cut])
    if kind == "lying_prefix_long":
        extra = draw(st.one_of(st.integers(1, 100), st.integers(1, 99_000_000)))
        return struct.pack(">i", len(body) + extra) + bytes(body)
    if kind == "lying_prefix_short":
        short = draw(st.integers(0, max(0, len(body) - 1)))
        return struct.pack(">i", short) + bytes(body)
    if kind == "negative_prefix":
        return struct.pack(">i", draw(st.integers(-(1 << 31), -1))) + bytes(body)
    if len(body) <= 8:
        return frame
    pos = draw(st.integers(8, len(body) - 1))
    if kind == "huge_count":
        value = draw(st.sampled_from([b"\x7f\xff\xff\xff", b"\x40\x00\x00\x00", b"\x00\x0f\xff\xff",
                                      b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x08", b"\x7f\xff"]))
    elif kind == "negative_size":
        value = draw(st.sampled_from([b"\xff\xfe", b"\x80\x00", b"\xff\xff\xff\xfe", b"\x80\x00\x00\x00",
                                      b"\xff\xff"]))
    elif kind == "bad_utf8":
        value = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80"]))
    elif kind == "flip":
        value = bytes([body[pos] ^ (1 << draw(st.integers(0, 7)))])
    else:
        value = draw(st.binary(min_size=1, max_size=8))
        pos = len(body)
    body[pos:pos + len(value)] = value
    return struct.pack(">i", len(body)) + bytes(body)


@st.composite
def mutated_request(draw) -> tuple[int, int, int, bytes]:
    key, version, cid, frame = draw(well_formed_request())
    return key, version, cid, _mutate(draw, frame)


def test_mutated_requests(broker, traffic):
    watch = Watch(broker)

    @FUZZ_SETTINGS
    @given(mutated_request())
    def run(example):
        key, version, cid, payload = example
        out = exchange(broker.port, payload)
        check_outcome(out, [(key, version, cid)], may_block=key in MAY_BLOCK)
        watch.after_example()

    run()
    finish_traffic(traffic, watch)


def test_good_request_then_bad_frame_on_one_connection(broker, traffic):
    """What came before the bad frame on the same connection is still answered, in order."""
    watch = Watch(broker)

    @FUZZ_SETTINGS
    @given(mutated_request(), st.integers(1, 3))
    def run(example, good_count):
        key, version, cid, bad = example
        good = b"".join(encode_request(ApiKey.API_VERSIONS, 0, -1 - i, {}) for i in range(good_count))
        out = exchange(broker.port, good + bad)
        check_outcome(out, [(ApiKey.API_VERSIONS, 0, -1 - i) for i in range(good_count)] + [(key, version, cid)],
                      may_block=key in MAY_BLOCK)
        cids = [struct.unpack_from(">i", frame)[0] for frame in out.frames[:good_count]]
        assert cids == [-1 - i for i in range(good_count)], "requests before the bad frame were not all answered"
        watch.after_example()

    run()
    finish_traffic(traffic, watch)


def test_invalid_utf8_names(broker, traffic):
    """Topic, group and client names that are not UTF-8: the frame is refused, nothing else."""
    watch = Watch(broker)
    placeholder = "QQQQQQQQ"
    requests = [
        (ApiKey.METADATA, 1, {"topics": [{"name": placeholder}]}),
        (ApiKey.METADATA, 12, {"topics": [{"name": placeholder, "topic_id": p.ZERO_UUID}],
                               "allow_auto_topic_creation": True}),
        (ApiKey.CREATE_TOPICS, 5, {"topics": [{"name": placeholder, "num_partitions": 1,
                                               "replication_factor": 1}], "timeout_ms": 1000}),
        (ApiKey.PRODUCE, 9, {"acks": -1, "timeout_ms": 1000, "topic_data": [
            {"name": placeholder, "partition_data": [{"index": 0, "records": bytes(make_batch([b"v"]))}]}]}),
        (ApiKey.FIND_COORDINATOR, 2, {"key": placeholder, "key_type": 0}),
        (ApiKey.DELETE_TOPICS, 4, {"topic_names": [placeholder], "timeout_ms": 1000}),
    ]

    @FUZZ_SETTINGS
    @given(st.sampled_from(requests),
           st.binary(min_size=len(placeholder), max_size=len(placeholder)).filter(_not_utf8),
           st.booleans())
    def run(req, bad_name, in_client_id):
        key, version, body = req
        client_id = placeholder if in_client_id else "hardening"
        frame = encode_request(key, version, 7, body, client_id=client_id)
        assert placeholder.encode() in frame
        payload = frame.replace(placeholder.encode(), bad_name)
        out = exchange(broker.port, payload)
        check_outcome(out, [(key, version, 7)])
        assert not out.frames, "a request with a non-UTF-8 name was answered as if it were valid"
        watch.after_example()

    run()
    finish_traffic(traffic, watch)


def _not_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def test_well_formed_random_requests(broker, traffic):
    """Odd but decodable requests for every served API: answered, never a handler crash."""
    watch = Watch(broker)
    log_before = len(log_text(broker))

    @FUZZ_SETTINGS
    @given(well_formed_request())
    def run(example):
        key, version, cid, payload = example
        out = exchange(broker.port, payload)
        check_outcome(out, [(key, version, cid)], may_block=key in MAY_BLOCK)
        watch.after_example()
        if watch.examples % 20 == 0:
            replenish_pool(broker.port)

    run()
    finish_traffic(traffic, watch)
    crashes = [line for line in log_text(broker)[log_before:].splitlines() if "handler failed" in line]
    assert not crashes, "handlers raised on well-formed input:\n" + "\n".join(crashes[:20])


def test_lying_length_prefixes_allocate_nothing(broker):
    """50 connections each announce a ~95 MiB frame and send a few bytes: RSS stays flat."""
    pid = broker.proc.pid
    before = rss_kb(pid)
    socks = []
    try:
        for i in range(50):
            s = connect(broker.port)
            s.sendall(struct.pack(">i", 95 * 1024 * 1024 + i) + struct.pack(">hhi", 0, 9, i) + b"\x00" * 100)
            socks.append(s)
        time.sleep(0.5)
        assert alive(broker)
        growth = rss_kb(pid) - before
        assert growth < 20 * 1024, f"RSS grew by {growth} KiB for 50 frames that never arrive"
        assert api_versions_ok(broker.port)
    finally:
        for s in socks:
            s.close()


def test_huge_array_count_in_every_array_position(broker):
    """Metadata/Produce/Fetch with an array count of 2^31-1 (and 2^32-1 compact) at each array."""
    watch = Watch(broker)
    cases = [
        (ApiKey.METADATA, 1, {"topics": [{"name": "a"}]}),
        (ApiKey.METADATA, 12, {"topics": [{"name": "a", "topic_id": p.ZERO_UUID}]}),
        (ApiKey.PRODUCE, 7, {"acks": 1, "timeout_ms": 1, "topic_data": [{"name": "a", "partition_data": [
            {"index": 0, "records": b"x"}]}]}),
        (ApiKey.PRODUCE, 9, {"acks": 1, "timeout_ms": 1, "topic_data": [{"name": "a", "partition_data": [
            {"index": 0, "records": b"x"}]}]}),
        (ApiKey.FETCH, 11, {"max_wait_ms": 0, "topics": [{"topic": "a", "partitions": [{"partition": 0}]}]}),
        (ApiKey.FETCH, 12, {"max_wait_ms": 0, "topics": [{"topic": "a", "partitions": [{"partition": 0}]}]}),
    ]
    for key, version, body in cases:
        frame = encode_request(key, version, 3, body)
        # Every position where a 4-byte (or varint) count could sit.
        for pos in range(14, len(frame) - 1):
            for value in (b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff\x0f"):
                mutated = bytearray(frame)
                mutated[pos:pos + len(value)] = value
                mutated[0:4] = struct.pack(">i", len(mutated) - 4)
                out = exchange(broker.port, bytes(mutated), timeout=5)
                check_outcome(out, [(key, version, 3)], may_block=key in MAY_BLOCK)
                watch.after_example()


# --------------------------------------------------------------------------- a SASL listener

SASL_MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    """A SASL_PLAINTEXT listener with every mechanism, and a SCRAM user so SCRAM exchanges
    get past their first message."""
    import hashlib
    import os

    from tests.security.sasl_kit import Raw, sasl_broker as make

    proc = make(tmp_path_factory.mktemp("fuzz-sasl") / "data")
    proc.start()
    with Raw(proc.port) as raw:
        assert raw.plain("admin", "admin-secret")["error_code"] == 0
        salt = os.urandom(16)
        raw.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": [], "upsertions": [
            {"name": "fuzz", "mechanism": m, "iterations": 4096, "salt": salt,
             "salted_password": hashlib.pbkdf2_hmac(h, b"pw", salt, 4096)} for m, h in ((1, "sha256"), (2, "sha512"))]})
    try:
        yield proc
    finally:
        was_alive = alive(proc)
        proc.kill()
        assert was_alive, f"SASL broker died during the fuzz run:\n{proc.log_tail()}"


@st.composite
def sasl_exchange(draw) -> tuple[list[tuple[int, int, int]], bytes, bool]:
    """A handshake (v0 or v1) for a drawn mechanism, then hostile tokens: SaslAuthenticate
    requests after v1, bare length-prefixed tokens after v0 (and lying prefixes)."""
    mechanism = draw(st.sampled_from(SASL_MECHANISMS + ["GSSAPI", ""]))
    handshake_version = draw(st.sampled_from([0, 1]))
    sent = [(ApiKey.SASL_HANDSHAKE, handshake_version, 1)]
    payload = encode_request(ApiKey.SASL_HANDSHAKE, handshake_version, 1, {"mechanism": mechanism})
    tokens = draw(st.lists(st.one_of(
        st.binary(max_size=300),
        st.sampled_from([b"\0fuzz\0pw", b"n,,n=fuzz,r=abc", b"n,,n=fuzz,r=abc,tokenauth=true", b"c=biws,r=x,p=AAAA",
                         b"n,,\x01auth=Bearer a.b.\x01\x01", b"\x01", b"p=tls-unique,,n=x,r=y", b"n,,n=a=ZZ,r=1"]),
    ), min_size=1, max_size=3))
    raw_mode = handshake_version == 0
    for i, token in enumerate(tokens):
        if raw_mode:
            size = draw(st.one_of(st.just(len(token)), st.integers(-(1 << 31), (1 << 31) - 1)))
            payload += struct.pack(">i", size) + token
        else:
            version = draw(st.integers(0, 2))
            payload += encode_request(ApiKey.SASL_AUTHENTICATE, version, i + 2, {"auth_bytes": token})
            sent.append((ApiKey.SASL_AUTHENTICATE, version, i + 2))
    if draw(st.booleans()):  # a request that needs authentication
        payload += encode_request(ApiKey.METADATA, 9, 99, {"topics": []})
        sent.append((ApiKey.METADATA, 9, 99))
    return sent, payload, raw_mode


def test_sasl_listener_hostile_exchanges(sasl_broker):
    """Every exchange ends answered-then-closed (or answered and waiting for more after a
    success), never hung; Metadata is never answered before authentication."""
    watch = Watch(sasl_broker)

    @FUZZ_SETTINGS
    @given(sasl_exchange())
    def run(example):
        sent, payload, raw_mode = example
        out = exchange(sasl_broker.port, payload)
        assert out.closed or not out.timed_out, "broker neither answered nor closed the connection"
        if not raw_mode:
            check_outcome(out, sent)
            assert all(struct.unpack_from(">i", f)[0] != 99 for f in out.frames), \
                "Metadata answered before authentication"
        watch.after_example()

    run()


def test_sasl_listener_any_request_before_authentication(sasl_broker):
    """Random well-formed requests of every API on an unauthenticated SASL connection: only
    ApiVersions and the SASL APIs are answered; anything else closes the connection."""
    watch = Watch(sasl_broker)
    allowed = {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}

    @FUZZ_SETTINGS
    @given(well_formed_request())
    def run(example):
        key, version, cid, frame = example
        out = exchange(sasl_broker.port, frame)
        assert out.closed
        if key not in allowed:
            assert not out.frames, f"{ApiKey(key).name} answered before authentication"
        else:
            check_outcome(out, [(key, version, cid)])
        watch.after_example()

    run()
