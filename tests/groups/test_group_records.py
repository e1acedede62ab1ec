"""The __consumer_offsets record formats (Kafka's GroupMetadataManager layouts)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.groups import records as rec
from server.coordinator_log import java_string_hash, partition_for_key

names = st.text(min_size=0, max_size=40)
nullable = st.none() | names
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


@given(names, names, i32)
def test_offset_key_round_trip(group, topic, partition):
    key = rec.OffsetKey(group, topic, partition)
    assert rec.decode_key(rec.encode_offset_key(key)) == key


@given(names)
def test_group_key_round_trip(group):
    assert rec.decode_key(rec.encode_group_key(rec.GroupKey(group))) == rec.GroupKey(group)


@given(i64, i32, names, i64)
def test_offset_value_round_trip(offset, epoch, metadata, ts):
    value = rec.OffsetValue(offset, epoch, metadata, ts)
    assert rec.decode_offset_value(rec.encode_offset_value(value)) == value


member = st.builds(rec.MemberValue, names, nullable, names, names, i32, i32, st.binary(max_size=50),
                   st.binary(max_size=50))


@given(st.builds(rec.GroupValue, names.filter(bool), i32, nullable, nullable, i64, st.lists(member, max_size=4)))
def test_group_value_round_trip(value):
    assert rec.decode_group_value(rec.encode_group_value(value)) == value


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def test_kafka_layouts_byte_for_byte():
    # OffsetCommitKey v1 and OffsetCommitValue v3 as Kafka writes them.
    assert rec.encode_offset_key(rec.OffsetKey("g", "t", 7)) == struct.pack(">h", 1) + _s("g") + _s("t") + \
        struct.pack(">i", 7)
    assert rec.encode_offset_value(rec.OffsetValue(42, 5, "m", 1000)) == struct.pack(">hqi", 3, 42, 5) + _s("m") + \
        struct.pack(">q", 1000)
    assert rec.encode_group_key(rec.GroupKey("g")) == struct.pack(">h", 2) + _s("g")


def test_older_value_versions_are_read():
    v0 = struct.pack(">hq", 0, 9) + _s("meta") + struct.pack(">q", 77)
    assert rec.decode_offset_value(v0) == rec.OffsetValue(9, -1, "meta", 77)
    v1 = struct.pack(">hq", 1, 9) + _s("") + struct.pack(">qq", 77, 88)
    assert rec.decode_offset_value(v1) == rec.OffsetValue(9, -1, "", 77, 88)
    # GroupMetadataValue v0: no rebalance timeout, state timestamp or instance id.
    g0 = (struct.pack(">h", 0) + _s("consumer") + struct.pack(">i", 4) + _s("range") + _s("m1")
          + struct.pack(">i", 1) + _s("m1") + _s("client") + _s("/h") + struct.pack(">i", 10000)
          + struct.pack(">i", 2) + b"su" + struct.pack(">i", 1) + b"a")
    value = rec.decode_group_value(g0)
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == ("consumer", 4, "range", "m1")
    [m] = value.members
    assert (m.member_id, m.group_instance_id, m.session_timeout, m.rebalance_timeout) == ("m1", None, 10000, 10000)
    assert (m.subscription, m.assignment) == (b"su", b"a")


@pytest.mark.parametrize("raw", [b"", b"\x00", struct.pack(">h", 9) + _s("g"), struct.pack(">h", 1) + b"\x00\x05ab"])
def test_bad_keys_raise(raw):
    with pytest.raises(rec.BadRecord):
        rec.decode_key(raw)


def test_partition_for_matches_java_hashcode():
    # Java: "abc".hashCode() == 96354; "polygenelubricants".hashCode() == Integer.MIN_VALUE.
    assert java_string_hash("abc") == 96354
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for_key("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert java_string_hash("é😀") == (((0xE9 * 31) + 0xD83D) * 31 + 0xDE00)
    assert partition_for_key("abc", 50) == 96354 % 50


def test_subscription_and_assignment_topics():
    sub = struct.pack(">hi", 1, 2) + _s("a") + _s("b") + struct.pack(">i", -1) + struct.pack(">i", 0)
    assert rec.subscribed_topics(sub) == {"a", "b"}
    assert rec.subscribed_topics(b"\x00") is None
    assignment = struct.pack(">hi", 0, 1) + _s("a") + struct.pack(">iii", 2, 0, 1) + struct.pack(">i", -1)
    assert rec.assigned_topics(assignment) == {"a"}
    assert rec.assigned_topics(b"") == set()
