"""Independent cross-checks against two clients' own protocol classes.

- kafka-python 3.0.12 (`kafka.protocol.*`, generated from Kafka 4.x JSON by its own code)
  and aiokafka 0.14 (`aiokafka.protocol.*`, hand-written positional schemas).
- Requests: built with their classes (and their request header), encoded by them, decoded
  by ours to the same values — and re-encoded by ours to the same bytes.
- Responses: encoded by ours, decoded by theirs to the same values.

Two layers:
1. Differential, random values (hypothesis, from the compiled tree, see
   test_codec_roundtrip): every (API, version) both sides know, requests and responses.
2. Realistic: the request builders a client calls (aiokafka's `Request.prepare` against our
   advertised ranges picks the version it would send us; kafka-python's classes at the
   versions it sends us, docs/design/clients.md#kafka-python), for ApiVersions, Metadata,
   Produce, Fetch, ListOffsets,
   FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
   OffsetFetch, CreateTopics, DeleteTopics and DescribeConfigs.
"""

from __future__ import annotations

import importlib
import uuid
import warnings

import pytest
from hypothesis import HealthCheck, given, settings

pytest.importorskip("kafka.protocol.api_message", reason="kafka-python 3.x not installed")
pytest.importorskip("aiokafka.protocol.api", reason="aiokafka not installed")

from test_codec_roundtrip import strategy_for  # noqa: E402  (the strategy derived from the compiled tree)
from wire import primitives as p  # noqa: E402
from wire.connection import Request, decode_request, encode_request, encode_response  # noqa: E402
from wire.errors import MalformedFrame  # noqa: E402
from wire.registry import API_VERSIONS, ApiKey  # noqa: E402
from wire.schema import _NullableStruct, message_struct  # noqa: E402

# kafka-python 3.0.12 reads its JSON schemas with importlib.resources' deprecated API.
warnings.filterwarnings("ignore", category=DeprecationWarning)
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

EXAMPLES = 5

# --------------------------------------------------------------------------- value comparison


def _int_from_bits(bits, code: str) -> int:
    value = sum(1 << b for b in bits)
    width = {"b": 8, "h": 16, "i": 32, "q": 64}.get(code)
    if width and value >= 1 << (width - 1):
        value -= 1 << width
    return value


def canon(node, value):
    """A comparable form of `value` as `node` would encode it.

    Plain fields all appear; tagged fields only when present and not at their default;
    underscore keys (unknown / kept-default tags) are dropped; bytes-likes become bytes;
    kafka-python's spellings (None for the zero uuid, a set of bits for a bitfield) become
    ours.
    """
    kind = type(node)
    if kind is p.KStruct:
        if value is None:
            value = {}
        out = {}
        for name, typ, default in node.fields:
            v = value.get(name, default) if isinstance(value, dict) else getattr(value, name, default)
            out[name] = canon(typ, default if v is None and default is not None and
                              not getattr(typ, "nullable", False) else v)
        if node.tagged is not None:
            for name, typ, default in node.tagged.fields.values():
                v = value.get(name) if isinstance(value, dict) else getattr(value, name, None)
                if v is None or v == default:
                    continue
                c = canon(typ, v)
                if c != canon(typ, default):
                    out[name] = c
        return out
    if kind is p.Array:
        if value is None:
            return None if node.nullable else []
        return [canon(node.element, v) for v in value]
    if kind is _NullableStruct:
        return None if value is None else canon(node.struct, value)
    if kind in (p.Bytes, p.Records):
        return None if value is None else bytes(value)
    if kind is p.Uuid:
        return p.ZERO_UUID if value is None else value
    if kind in (p.Fixed, p.Boolean) and isinstance(value, (set, frozenset)):
        return _int_from_bits(value, node.code)
    return value


def _strip_unknown(value):
    """Bodies for foreign encoders: no unknown tags (they have no way to carry ours)."""
    if isinstance(value, dict):
        return {k: _strip_unknown(v) for k, v in value.items() if not k.startswith("_")}
    if isinstance(value, list):
        return [_strip_unknown(v) for v in value]
    return value


# --------------------------------------------------------------------------- kafka-python

def _kafka_python_classes() -> dict[tuple[int, str], type]:
    from kafka.protocol.api_message import ApiMessage

    for module in ("kafka.protocol.metadata", "kafka.protocol.consumer", "kafka.protocol.producer",
                   "kafka.protocol.admin"):
        importlib.import_module(module)
    out = {}
    stack = list(ApiMessage.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", 0) is None and cls.__module__.startswith("kafka.protocol"):
            out[(cls.API_KEY, cls.type)] = cls
    return out


KP = _kafka_python_classes()

# kafka-python renames these (MetadataResponse.json_patch: a bitfield type); where its class
# has a field of our name (DescribeTopicPartitions' topic_authorized_operations) that is used.
KP_RENAMES = {"cluster_authorized_operations": "authorized_operations",
              "topic_authorized_operations": "authorized_operations"}


def _kp_value(owner, field, node, value, version):
    """Our value → what kafka-python's field takes (`owner`: the class holding the field)."""
    if value is None:
        return None
    if field.is_struct_array():
        sub = getattr(owner, field.type_str)
        return [_kp_container(sub, node.element, v, version) for v in value]
    if field.is_struct():
        sub = getattr(owner, field.type_str)
        struct = node.struct if type(node) is _NullableStruct else node
        return _kp_container(sub, struct, value, version)
    if field.type_str == "bitfield":
        return {b for b in range(32) if value & (1 << b)} if value >= 0 else None
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def _kp_kwargs(owner, node: p.KStruct, value: dict, version: int) -> dict:
    ours = {name: typ for name, typ, _d in node.fields}
    if node.tagged is not None:
        ours.update({name: typ for name, typ, _d in node.tagged.fields.values()})
    theirs = {field.name for field in owner._struct._fields}
    renamed = {(name if name in theirs else KP_RENAMES.get(name, name)): name for name in ours}
    kwargs = {}
    for field in owner._struct._fields:
        if not field.for_version_q(version):
            continue
        name = renamed.get(field.name)
        if name is None or name not in value:
            continue
        kwargs[field.name] = _kp_value(owner, field, ours[name], value[name], version)
    return kwargs


def _kp_container(cls, node, value, version):
    return cls(version=version, **_kp_kwargs(cls, node, value, version))


def kp_request_frame(key: int, version: int, body: dict, correlation_id: int = 11, client_id: str = "kp") -> bytes:
    cls = KP[(key, "request")]
    node = message_struct(key, "request", version)
    message = cls[version](**_kp_kwargs(cls, node, body, version))
    message.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(message.encode(header=True, framed=True))


def kp_decode_response(key: int, version: int, frame: bytes):
    cls = KP[(key, "response")]
    message = cls[version].decode(frame[4:], header=True)
    return message.header.correlation_id, message


def _kp_as_ours(node, message) -> dict:
    """kafka-python's decoded message → a dict in our names (kept as their values)."""
    raw = message.to_dict(json=False)
    return _rename_back(node, raw)


def _rename_back(node, value):
    kind = type(node)
    if kind is _NullableStruct:
        node = node.struct
        kind = p.KStruct
    if kind is p.KStruct and isinstance(value, dict):
        names = [n for n, _t, _d in node.fields]
        types = {n: t for n, t, _d in node.fields}
        if node.tagged is not None:
            names += [n for n, _t, _d in node.tagged.fields.values()]
            types.update({n: t for n, t, _d in node.tagged.fields.values()})
        out = {}
        for name in names:
            theirs = name if name in value else KP_RENAMES.get(name, name)
            if theirs in value:
                out[name] = _rename_back(types[name], value[theirs])
        return out
    if kind is p.Array and isinstance(value, list):
        return [_rename_back(node.element, v) for v in value]
    return value


def _kp_cases():
    for key in sorted(API_VERSIONS):
        lo, hi = API_VERSIONS[key]
        for kind in ("request", "response"):
            cls = KP.get((key, kind))
            if cls is None:
                continue
            for version in range(lo, min(hi, cls.max_version) + 1):
                yield pytest.param(key, kind, version, id=f"kp-{key}-{kind}-v{version}")


_settings = settings(max_examples=EXAMPLES, deadline=None, database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("key,kind,version", list(_kp_cases()))
def test_kafka_python_differential(key, kind, version):
    node = message_struct(key, kind, version)

    @_settings
    @given(strategy_for(node))
    def check(body):
        body = _strip_unknown(body)
        if kind == "request":
            theirs = kp_request_frame(key, version, body)
            request = decode_request(theirs[4:])
            assert isinstance(request, Request)
            assert (request.correlation_id, request.client_id) == (11, "kp")
            assert canon(node, request.body) == canon(node, body)
            ours = encode_request(key, version, 11, request.body, client_id="kp", header_tags=request.header_tags)
            assert ours == theirs
        else:
            if key == ApiKey.API_VERSIONS and version > 0 and body["error_code"]:
                # kafka-python (like Java) reads an ApiVersions error body as v0, the layout
                # Kafka answers errors in (encode_api_versions_fallback), whatever the version.
                body = {**body, "error_code": 0}
            ours = encode_response(key, version, 12, body)
            correlation_id, message = kp_decode_response(key, version, ours)
            assert correlation_id == 12
            assert canon(node, _kp_as_ours(node, message)) == canon(node, body)

    check()


# --------------------------------------------------------------------------- aiokafka

def _aiokafka_classes() -> dict[tuple[int, int, str], type]:
    from aiokafka.protocol.api import RequestStruct, Response

    out = {}
    for module in ("admin", "commit", "coordination", "fetch", "group", "metadata", "offset", "produce",
                   "transaction"):
        mod = importlib.import_module(f"aiokafka.protocol.{module}")
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, (RequestStruct, Response)) and hasattr(obj, "SCHEMA") \
                    and isinstance(getattr(obj, "API_VERSION", None), int):
                kind = "request" if issubclass(obj, RequestStruct) else "response"
                out[(obj.API_KEY, obj.API_VERSION, kind)] = obj
    return out


AIO = _aiokafka_classes()


def _positional(node, value, their):
    """Our dict → aiokafka's positional tuples, walking their schema (`their`) beside ours.

    aiokafka has no flexible versions, so no tagged fields. Two shapes differ without
    changing the bytes: where Kafka's JSON has an array of one-field structs (Metadata v0
    topics) aiokafka has an array of the field, and aiokafka sometimes groups consecutive
    fields in a nested Schema (CreatePartitions' new_partitions).
    """
    from aiokafka.protocol.types import Array, Schema

    kind = type(node)
    if kind is p.KStruct:
        if not isinstance(their, Schema):
            assert len(node.fields) == 1, f"{their!r} for a struct of {len(node.fields)} fields"
            name, typ, default = node.fields[0]
            return _positional(typ, value.get(name, default), their)
        items = iter([(t, value.get(n, d)) for n, t, d in node.fields])
        out = _fill(their, items)
        assert next(items, None) is None, f"aiokafka {their.names} has fewer fields than ours"
        return out
    if kind is p.Array:
        assert isinstance(their, Array)
        return None if value is None else [_positional(node.element, v, their.array_of) for v in value]
    if kind in (p.Bytes, p.Records):
        return None if value is None else bytes(value)
    return value


def _fill(schema, items) -> tuple:
    from aiokafka.protocol.types import Schema

    out = []
    for field in schema.fields:
        if isinstance(field, Schema):
            out.append(_fill(field, items))
        else:
            item = next(items, None)
            assert item is not None, f"aiokafka {schema.names} has more fields than ours"
            out.append(_positional(item[0], item[1], field))
    return tuple(out)


def _flatten(schema, values) -> list:
    """aiokafka's values for `schema`, nested sub-schemas inlined (see _positional)."""
    from aiokafka.protocol.types import Schema

    out = []
    for field, value in zip(schema.fields, values):
        if isinstance(field, Schema):
            out.extend((f, v) for f, v in _flatten(field, value))
        else:
            out.append((field, value))
    return out


def _from_positional(node, value, their):
    """aiokafka's decoded values (a Struct, or nested tuples) → our dict shape."""
    from aiokafka.protocol.types import Schema

    kind = type(node)
    if kind is p.KStruct:
        if not isinstance(their, Schema):  # aiokafka's scalar where Kafka has a one-field struct
            (name, typ, _d), = node.fields
            return {name: _from_positional(typ, value, their)}
        values = [value.get_item(n) for n in value.SCHEMA.names] if hasattr(value, "SCHEMA") else list(value)
        pairs = _flatten(their, values)
        assert len(pairs) == len(node.fields), f"aiokafka has {len(pairs)} fields, we have {len(node.fields)}"
        return {n: _from_positional(t, v, f) for (n, t, _d), (f, v) in zip(node.fields, pairs)}
    if kind is p.Array:
        return None if value is None else [_from_positional(node.element, v, their.array_of) for v in value]
    return value


def aio_request_frame(struct, correlation_id: int = 21, client_id: str = "aio") -> bytes:
    header = struct.build_request_header(correlation_id=correlation_id, client_id=client_id)
    payload = header.encode() + struct.encode()
    return len(payload).to_bytes(4, "big") + payload


# aiokafka schemas that disagree with Kafka's (aiokafka never sends or reads these versions).
AIO_KNOWN_BAD = {
    (2, 4, "request"): "aiokafka's OffsetRequest_v4 declares current_leader_epoch int64; Kafka: int32",
    (2, 5, "request"): "aiokafka's OffsetRequest_v5 declares current_leader_epoch int64; Kafka: int32",
    (29, 2, "request"): "aiokafka's DescribeAclsRequest_v2 is its v1 schema; Kafka's v2 is flexible",
    (29, 2, "response"): "aiokafka's DescribeAclsResponse_v2 is its v1 schema; Kafka's v2 is flexible",
}


def _aio_cases():
    for (key, version, kind), cls in sorted(AIO.items(), key=lambda item: item[0]):
        lo, hi = API_VERSIONS.get(key, (1, 0))
        if not lo <= version <= hi:
            continue
        marks = []
        if (key, version, kind) in AIO_KNOWN_BAD:
            marks.append(pytest.mark.skip(reason=AIO_KNOWN_BAD[(key, version, kind)]))
        elif getattr(AIO.get((key, version, "request")), "FLEXIBLE_VERSION", False):
            marks.append(pytest.mark.skip(reason="aiokafka's few flexible structs spell tags as fields"))
        yield pytest.param(key, version, kind, id=f"aio-{key}-{kind}-v{version}", marks=marks)


def test_aiokafka_list_offsets_v4_disagrees_with_kafka():
    """The one schema bug the differential found in aiokafka (skipped above): a partition's
    current_leader_epoch written as 8 bytes where Kafka has 4. aiokafka caps ListOffsets at
    v3, so its client never sends it; a broker cannot accommodate it either way."""
    from aiokafka.protocol.offset import OffsetRequest_v4

    struct = OffsetRequest_v4(-1, 0, [("t", [(0, 5, -1)])])
    frame = aio_request_frame(struct)
    assert decode_request(frame[4:]).trailing == 4


@pytest.mark.parametrize("key,version,kind", list(_aio_cases()))
def test_aiokafka_differential(key, version, kind):
    node = message_struct(key, kind, version)
    cls = AIO[(key, version, kind)]

    @_settings
    @given(strategy_for(node))
    def check(body):
        body = _strip_unknown(body)
        if kind == "request":
            theirs = aio_request_frame(cls(*_positional(node, body, cls.SCHEMA)))
            request = decode_request(theirs[4:])
            assert isinstance(request, Request) and request.client_id == "aio"
            assert canon(node, request.body) == canon(node, body)
            assert encode_request(key, version, 21, request.body, client_id="aio") == theirs
        else:
            ours = encode_response(key, version, 22, body)
            decoded = cls.decode(ours[8:])  # size prefix, then header v0: aiokafka has no flexible versions
            assert int.from_bytes(ours[4:8], "big") == 22
            assert canon(node, _from_positional(node, decoded, cls.SCHEMA)) == canon(node, body)

    check()


# --------------------------------------------------------------------------- coverage of the client versions

# What kafka-python 3.0.12 and aiokafka 0.14 send to a broker advertising our ranges (read from
# their
# sources and seen on the wire: docs/design/clients.md#kafka-python and
# docs/design/clients.md#aiokafka).
KAFKA_PYTHON_VERSIONS = {18: 4, 3: 12, 0: 9, 1: 12, 2: 9, 10: 6, 11: 7, 14: 5, 12: 4, 13: 5, 9: 8, 8: 8, 19: 7,
                         20: 6, 32: 4, 22: 4}
AIOKAFKA_VERSIONS = {18: 0, 3: 5, 0: 7, 1: 11, 2: 3, 10: 1, 11: 5, 14: 3, 12: 1, 13: 1, 9: 3, 8: 3, 19: 3, 20: 3,
                     32: 2}


def test_differential_cases_cover_the_client_versions():
    kp = {(c.values[0], c.values[1], c.values[2]) for c in _kp_cases()}
    aio = {(c.values[0], c.values[2], c.values[1]) for c in _aio_cases()}
    for key, version in KAFKA_PYTHON_VERSIONS.items():
        assert {(key, "request", version), (key, "response", version)} <= kp, f"kafka-python {key} v{version}"
    for key, version in AIOKAFKA_VERSIONS.items():
        assert {(key, "request", version), (key, "response", version)} <= aio, f"aiokafka {key} v{version}"


# --------------------------------------------------------------------------- realistic requests

def _batch() -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=16384)
    builder.append(0, timestamp=1_700_000_000_000, key=b"k", value=b"v", headers=[("h", b"1")])
    return bytes(builder.build())


def _aio_requests():
    """aiokafka's own request builders, at the version they pick against our ranges."""
    from aiokafka.protocol import admin, commit, coordination, fetch, group, metadata, offset, produce

    batch = _batch()
    built = {
        ApiKey.API_VERSIONS: admin.ApiVersionRequest(),
        ApiKey.METADATA: metadata.MetadataRequest(topics=["orders", "audit"]),
        ApiKey.PRODUCE: produce.ProduceRequest(transactional_id=None, required_acks=1, timeout=1500,
                                               topics=[("orders", [(0, batch)])]),
        ApiKey.FETCH: fetch.FetchRequest(max_wait_time=500, min_bytes=1, max_bytes=52428800, isolation_level=0,
                                         topics=[("orders", [(0, 42, 1048576)])]),
        ApiKey.LIST_OFFSETS: offset.OffsetRequest(replica_id=-1, isolation_level=0,
                                                  topics=[("orders", [(0, -2)])]),
        ApiKey.FIND_COORDINATOR: coordination.FindCoordinatorRequest(coordinator_key="group-a", coordinator_type=0),
        ApiKey.JOIN_GROUP: group.JoinGroupRequest(group="group-a", session_timeout=10000,
                                                  rebalance_timeout=300000, member_id="", group_instance_id=None,
                                                  protocol_type="consumer",
                                                  group_protocols=[("range", b"\x00\x01meta")]),
        ApiKey.SYNC_GROUP: group.SyncGroupRequest(group="group-a", generation_id=1, member_id="m-1",
                                                  group_instance_id=None,
                                                  group_assignment=[("m-1", b"\x00\x01assign")]),
        ApiKey.HEARTBEAT: group.HeartbeatRequest(group="group-a", generation_id=1, member_id="m-1"),
        ApiKey.LEAVE_GROUP: group.LeaveGroupRequest(group="group-a", member_id="m-1"),
        ApiKey.OFFSET_COMMIT: commit.OffsetCommitRequest(consumer_group="group-a", consumer_group_generation_id=1,
                                                         consumer_id="m-1", retention_time=-1,
                                                         topics=[("orders", [(0, 43, "meta")])]),
        ApiKey.OFFSET_FETCH: commit.OffsetFetchRequest(consumer_group="group-a", partitions=[("orders", [0, 1])]),
        ApiKey.CREATE_TOPICS: admin.CreateTopicsRequest(
            create_topic_requests=[("orders", 3, 1, [], [("retention.ms", "1000")])], timeout=30000,
            validate_only=False),
        ApiKey.DELETE_TOPICS: admin.DeleteTopicsRequest(topics=["orders"], timeout=30000),
        ApiKey.DESCRIBE_CONFIGS: admin.DescribeConfigsRequest(resources=[(2, "orders", ["retention.ms"])],
                                                              include_synonyms=False),
    }
    return built


def _aio_build(request):
    """Build `request` the way aiokafka's client does against our advertised ranges: the
    highest version of its own inside them — except the handshake, which aiokafka sends
    before it knows any range, with its first ApiVersions class (v0)."""
    if request.API_KEY == ApiKey.API_VERSIONS:
        return request.build(request._CLASSES[0])
    return request.prepare(dict(API_VERSIONS))


@pytest.mark.parametrize("key", sorted(AIOKAFKA_VERSIONS))
def test_aiokafka_request_builders(key):
    struct = _aio_build(_aio_requests()[key])
    assert struct.API_VERSION == AIOKAFKA_VERSIONS[key], "aiokafka picks the version recorded above"
    frame = aio_request_frame(struct, correlation_id=99, client_id="aiokafka-0.14")
    request = decode_request(frame[4:])
    assert isinstance(request, Request)
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) == (
        key, AIOKAFKA_VERSIONS[key], 99, "aiokafka-0.14")
    node = message_struct(key, "request", request.api_version)
    assert canon(node, request.body) == canon(node, _from_positional(node, struct, struct.SCHEMA))
    assert encode_request(key, request.api_version, 99, request.body, client_id="aiokafka-0.14") == frame
    body = request.body
    # Spot checks that the values landed in the right fields.
    if key == ApiKey.PRODUCE:
        assert body["acks"] == 1 and body["topic_data"][0]["partition_data"][0]["records"] == _batch()
    if key == ApiKey.FETCH:
        partition = body["topics"][0]["partitions"][0]
        assert (partition["fetch_offset"], partition["partition_max_bytes"]) == (42, 1048576)
        assert body["session_epoch"] == -1 and partition["current_leader_epoch"] == -1
    if key == ApiKey.JOIN_GROUP:
        assert body["protocols"] == [{"name": "range", "metadata": b"\x00\x01meta"}]
    if key == ApiKey.CREATE_TOPICS:
        assert body["topics"][0]["configs"] == [{"name": "retention.ms", "value": "1000"}]


def _kp_realistic() -> dict[int, dict]:
    """Request bodies as kafka-python's client fills them (field names are kafka-python's too)."""
    batch = _batch()
    return {
        18: {"client_software_name": "kafka-python", "client_software_version": "3.0.12"},
        3: {"topics": [{"topic_id": None, "name": "orders"}], "allow_auto_topic_creation": True,
            "include_topic_authorized_operations": False},
        0: {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": batch}]}]},
        1: {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800, "isolation_level": 0,
            "session_id": 0, "session_epoch": 0,
            "topics": [{"topic": "orders", "partitions": [{"partition": 0, "current_leader_epoch": 0,
                                                          "fetch_offset": 42, "last_fetched_epoch": -1,
                                                          "log_start_offset": -1,
                                                          "partition_max_bytes": 1048576}]}],
            "forgotten_topics_data": [], "rack_id": ""},
        2: {"replica_id": -1, "isolation_level": 0,
            "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                         "timestamp": -1}]}]},
        10: {"key_type": 0, "coordinator_keys": ["group-a"]},
        11: {"group_id": "group-a", "session_timeout_ms": 45000, "rebalance_timeout_ms": 300000, "member_id": "",
             "group_instance_id": None, "protocol_type": "consumer",
             "protocols": [{"name": "range", "metadata": b"\x00\x03meta"}]},
        14: {"group_id": "group-a", "generation_id": 1, "member_id": "m-1", "group_instance_id": None,
             "protocol_type": "consumer", "protocol_name": "range",
             "assignments": [{"member_id": "m-1", "assignment": b"\x00\x03assign"}]},
        12: {"group_id": "group-a", "generation_id": 1, "member_id": "m-1", "group_instance_id": None},
        13: {"group_id": "group-a", "members": [{"member_id": "m-1", "group_instance_id": None,
                                                 "reason": "the consumer is being closed"}]},
        9: {"groups": [{"group_id": "group-a", "topics": [{"name": "orders", "partition_indexes": [0, 1]}]}],
            "require_stable": True},
        8: {"group_id": "group-a", "generation_id_or_member_epoch": 1, "member_id": "m-1",
            "group_instance_id": None,
            "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "committed_offset": 43,
                                                         "committed_leader_epoch": -1,
                                                         "committed_metadata": ""}]}]},
        19: {"topics": [{"name": "orders", "num_partitions": 3, "replication_factor": 1, "assignments": [],
                         "configs": [{"name": "retention.ms", "value": "1000"}]}],
             "timeout_ms": 30000, "validate_only": False},
        20: {"topics": [{"name": "orders", "topic_id": uuid.UUID(int=0)}], "topic_names": [], "timeout_ms": 30000},
        32: {"resources": [{"resource_type": 2, "resource_name": "orders", "configuration_keys": None}],
             "include_synonyms": False, "include_documentation": False},
        22: {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1},
    }


@pytest.mark.parametrize("key", sorted(KAFKA_PYTHON_VERSIONS))
def test_kafka_python_requests_at_client_versions(key):
    version = KAFKA_PYTHON_VERSIONS[key]
    body = _kp_realistic()[key]
    frame = kp_request_frame(key, version, body, correlation_id=1234, client_id="kafka-python-3.0.12")
    request = decode_request(frame[4:])
    assert isinstance(request, Request)
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) == (
        key, version, 1234, "kafka-python-3.0.12")
    node = message_struct(key, "request", version)
    assert canon(node, request.body) == canon(node, body)
    assert encode_request(key, version, 1234, request.body, client_id="kafka-python-3.0.12",
                          header_tags=request.header_tags) == frame


# Responses as a broker answers the realistic requests: decoded by both clients.
RESPONSES = {
    18: {"error_code": 0, "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                                       for k, (lo, hi) in sorted(API_VERSIONS.items())], "throttle_time_ms": 0},
    3: {"throttle_time_ms": 0, "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "trafka-cluster", "controller_id": 1,
        "topics": [{"error_code": 0, "name": "orders", "topic_id": uuid.UUID(int=7), "is_internal": False,
                    "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 0,
                                    "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": []}],
                    "topic_authorized_operations": -2147483648}]},
    0: {"responses": [{"name": "orders", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 42, "log_append_time_ms": -1, "log_start_offset": 0,
         "record_errors": [], "error_message": None}]}], "throttle_time_ms": 0},
    1: {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [{"topic": "orders", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 43, "last_stable_offset": 43,
         "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
         "records": None}]}]},
    2: {"throttle_time_ms": 0, "topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "error_code": 0, "old_style_offsets": [], "timestamp": -1, "offset": 43,
         "leader_epoch": 0}]}]},
    10: {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "node_id": 1, "host": "127.0.0.1",
         "port": 9092, "coordinators": [{"key": "group-a", "node_id": 1, "host": "127.0.0.1", "port": 9092,
                                         "error_code": 0, "error_message": None}]},
    11: {"throttle_time_ms": 0, "error_code": 0, "generation_id": 1, "protocol_type": "consumer",
         "protocol_name": "range", "leader": "m-1", "skip_assignment": False, "member_id": "m-1",
         "members": [{"member_id": "m-1", "group_instance_id": None, "metadata": b"\x00\x03meta"}]},
    14: {"throttle_time_ms": 0, "error_code": 0, "protocol_type": "consumer", "protocol_name": "range",
         "assignment": b"\x00\x03assign"},
    12: {"throttle_time_ms": 0, "error_code": 27},
    13: {"throttle_time_ms": 0, "error_code": 0, "members": [{"member_id": "m-1", "group_instance_id": None,
                                                              "error_code": 0}]},
    9: {"throttle_time_ms": 0, "error_code": 0,
        "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "committed_offset": 43,
                                                      "committed_leader_epoch": -1, "metadata": "",
                                                      "error_code": 0}]}],
        "groups": [{"group_id": "group-a", "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "committed_offset": 43, "committed_leader_epoch": -1, "metadata": "",
             "error_code": 0}]}], "error_code": 0}]},
    8: {"throttle_time_ms": 0, "topics": [{"name": "orders", "partitions": [{"partition_index": 0,
                                                                           "error_code": 0}]}]},
    19: {"throttle_time_ms": 0, "topics": [{"name": "orders", "topic_id": uuid.UUID(int=7), "error_code": 0,
                                            "error_message": None, "num_partitions": 3, "replication_factor": 1,
                                            "configs": []}]},
    20: {"throttle_time_ms": 0, "responses": [{"name": "orders", "topic_id": uuid.UUID(int=7), "error_code": 0,
                                               "error_message": None}]},
    32: {"throttle_time_ms": 0, "results": [{"error_code": 0, "error_message": None, "resource_type": 2,
                                             "resource_name": "orders", "configs": [
        {"name": "retention.ms", "value": "1000", "read_only": False, "config_source": 1, "is_sensitive": False,
         "synonyms": [], "config_type": 5, "documentation": None}]}]},
    22: {"throttle_time_ms": 0, "error_code": 0, "producer_id": 1000, "producer_epoch": 0},
}


@pytest.mark.parametrize("key", sorted(KAFKA_PYTHON_VERSIONS))
def test_our_responses_decode_with_kafka_python(key):
    version = KAFKA_PYTHON_VERSIONS[key]
    node = message_struct(key, "response", version)
    frame = encode_response(key, version, 4321, RESPONSES[key])
    correlation_id, message = kp_decode_response(key, version, frame)
    assert correlation_id == 4321
    assert canon(node, _kp_as_ours(node, message)) == canon(node, RESPONSES[key])


@pytest.mark.parametrize("key", sorted(AIOKAFKA_VERSIONS))
def test_our_responses_decode_with_aiokafka(key):
    version = AIOKAFKA_VERSIONS[key]
    node = message_struct(key, "response", version)
    frame = encode_response(key, version, 4321, RESPONSES[key])
    struct = _aio_build(_aio_requests()[key])
    # aiokafka's own path: the request struct parses the response header, its RESPONSE_TYPE the body.
    import io

    stream = io.BytesIO(frame[4:])
    header = struct.parse_response_header(stream)
    assert header.correlation_id == 4321
    decoded = struct.RESPONSE_TYPE.decode(stream)
    assert stream.tell() == len(frame) - 4
    assert canon(node, _from_positional(node, decoded, decoded.SCHEMA)) == canon(node, RESPONSES[key])
