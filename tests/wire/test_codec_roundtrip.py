"""Property: for every served message and version, encode → decode → encode is identity.

The hypothesis strategy is derived from the compiled construct tree itself
(`wire.schema.message_struct`), so it covers exactly what the codec runs: every field at
its version, nullability, compact lengths, tagged fields (present or not) and unknown tags
(which must survive a round trip byte for byte). Requests go through the request header
(`encode_request` / `decode_request`), responses through the response header
(`encode_response` / `decode_response`).

Bounded: a handful of examples per (API, kind, version), about 10 s in all.
"""

from __future__ import annotations

import functools
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wire import primitives as p
from wire.connection import Request, decode_request, decode_response, encode_request, encode_response
from wire.registry import CODEC_VERSIONS
from wire.schema import _NullableStruct, message_struct

EXAMPLES = 12

_INT_RANGES = {
    "b": (-(1 << 7), (1 << 7) - 1),
    "h": (-(1 << 15), (1 << 15) - 1),
    "i": (-(1 << 31), (1 << 31) - 1),
    "q": (-(1 << 63), (1 << 63) - 1),
    "H": (0, (1 << 16) - 1),
    "I": (0, (1 << 32) - 1),
}

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_binary = st.binary(max_size=24)


def _maybe_null(strategy, nullable: bool):
    return st.one_of(st.none(), strategy) if nullable else strategy


def strategy_for(node) -> st.SearchStrategy:
    """Values for one compiled node (see wire.primitives / wire.schema)."""
    kind = type(node)
    if kind is p.Boolean:
        return st.booleans()
    if kind is p.Fixed:
        if node.code == "d":
            return st.floats(allow_nan=False)
        lo, hi = _INT_RANGES[node.code]
        # Mostly small values, sometimes the extremes.
        return st.one_of(st.integers(-2, 300).filter(lambda v: lo <= v <= hi), st.sampled_from((lo, hi)),
                         st.integers(lo, hi))
    if kind is p.Uuid:
        return st.one_of(st.just(p.ZERO_UUID), st.uuids())
    if kind is p.String:
        return _maybe_null(_text, node.nullable)
    if kind in (p.Bytes, p.Records):
        return _maybe_null(_binary, node.nullable)
    if kind is p.Array:
        return _maybe_null(st.lists(strategy_for(node.element), max_size=3), node.nullable)
    if kind is _NullableStruct:
        return st.one_of(st.none(), strategy_for(node.struct))
    if kind is p.KStruct:
        return _struct_strategy(node)
    raise AssertionError(f"no strategy for {node!r}")


def _struct_strategy(node: p.KStruct) -> st.SearchStrategy:
    required = {name: strategy_for(typ) for name, typ, _d in node.fields}
    optional = {}
    if node.tagged is not None:
        known = node.tagged.fields
        optional = {name: strategy_for(typ) for name, typ, _d in known.values()}
        # Unknown tags above the known ones: kept as raw bytes and written back.
        first_free = max(known, default=-1) + 1
        optional[p.TaggedFields.UNKNOWN_TAGS] = st.dictionaries(
            st.integers(first_free, first_free + 40), st.binary(max_size=6), min_size=1, max_size=2
        )
    return st.fixed_dictionaries(required, optional=optional)


@functools.lru_cache(maxsize=None)
def _strategy(key: int, kind: str, version: int) -> st.SearchStrategy:
    return strategy_for(message_struct(key, kind, version))


def _cases():
    for key in sorted(CODEC_VERSIONS):
        lo, hi = CODEC_VERSIONS[key]
        for version in range(lo, hi + 1):
            for kind in ("request", "response"):
                yield pytest.param(key, kind, version, id=f"{key}-{kind}-v{version}")


def _normalize(node, value):
    """What a decode of `value` should give: tagged fields at their default are not
    written, bytes come back as bytes-like, and None in a non-nullable array is []."""
    kind = type(node)
    if value is None:
        if kind is p.Array and not node.nullable:
            return []
        return None
    if kind is p.KStruct:
        out = {name: _normalize(typ, value[name]) for name, typ, _d in node.fields}
        if node.tagged is not None:
            for name, typ, default in node.tagged.fields.values():
                if name in value and value[name] != default:
                    out[name] = _normalize(typ, value[name])
            if value.get(p.TaggedFields.UNKNOWN_TAGS):
                out[p.TaggedFields.UNKNOWN_TAGS] = dict(value[p.TaggedFields.UNKNOWN_TAGS])
        return out
    if kind is p.Array:
        return [_normalize(node.element, v) for v in value]
    if kind is _NullableStruct:
        return _normalize(node.struct, value)
    if kind in (p.Bytes, p.Records):
        return bytes(value)
    return value


def _plain(value):
    """Decoded values with memoryviews/bytearrays as bytes, for comparison."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


@pytest.mark.parametrize("key,kind,version", list(_cases()))
def test_roundtrip(key, kind, version):
    node = message_struct(key, kind, version)

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(body=_strategy(key, kind, version), correlation_id=st.integers(-(1 << 31), (1 << 31) - 1),
           client_id=st.one_of(st.none(), _text))
    def check(body, correlation_id, client_id):
        if kind == "request":
            first = encode_request(key, version, correlation_id, body, client_id=client_id)
            decoded = decode_request(bytearray(first[4:]))
            assert isinstance(decoded, Request)
            assert (decoded.api_key, decoded.api_version, decoded.correlation_id, decoded.client_id) == (
                key, version, correlation_id, client_id)
            again = encode_request(key, version, correlation_id, decoded.body, client_id=decoded.client_id)
            decoded_body = decoded.body
        else:
            first = encode_response(key, version, correlation_id, body)
            got_id, decoded_body = decode_response(key, version, first[4:])
            assert got_id == correlation_id
            again = encode_response(key, version, correlation_id, decoded_body)
        assert int.from_bytes(first[:4], "big", signed=True) == len(first) - 4
        assert again == first
        assert _plain(decoded_body) == _normalize(node, body)

    check()


def test_strategy_reaches_tagged_and_unknown_fields():
    """The generator really produces tagged and unknown-tag values (guards the strategy)."""
    node = message_struct(1, "response", 12)  # FetchResponse: tagged diverging_epoch etc.
    seen = set()

    @settings(max_examples=60, deadline=None, database=None)
    @given(_strategy(1, "response", 12))
    def collect(body):
        for topic in body["responses"]:
            for partition in topic["partitions"]:
                seen.update(k for k in partition if k not in {n for n, _t, _d in node.fields})

    collect()
    assert p.TaggedFields.UNKNOWN_TAGS in seen
    assert seen & {"diverging_epoch", "current_leader", "snapshot_id"}


def test_uuid_and_float_values_roundtrip_exactly():
    body = {"topics": [{"topic_id": uuid.UUID(int=(1 << 128) - 1), "name": None}],
            "allow_auto_topic_creation": True, "include_topic_authorized_operations": False}
    frame = encode_request(3, 12, 1, body)
    assert decode_request(frame[4:]).body["topics"][0]["topic_id"] == uuid.UUID(int=(1 << 128) - 1)
