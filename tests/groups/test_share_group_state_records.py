"""`__share_group_state` in Kafka's share coordinator format (KIP-932): ShareSnapshot and
ShareUpdate records, replayed at start-up.

Why: a share partition's state must survive a restart and a SIGKILL — accepted records
never delivered again, records only acquired delivered again — and what is on disk must be
Kafka's records, so the records read back here are decoded by a decoder of this test's own,
written from Kafka's ShareSnapshotKey/Value and ShareUpdateKey/Value schemas
(share-coordinator/src/main/resources/common/message/), not by server/groups/share/records.py.
`share.coordinator.snapshot.update.records.per.snapshot`=2: a snapshot, two updates, a snapshot...
"""

from __future__ import annotations

import struct
import uuid

import pytest

from server.groups.share import records as rec
from tests.brokerproc import BrokerProcess
from tests.groups.share_wire import ShareClient, acquired, create_topic, offsets, produce

pytest.importorskip("confluent_kafka")

ACCEPT, RELEASE, REJECT = 1, 2, 3
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


@pytest.fixture
def broker(tmp_path):
    with BrokerProcess(tmp_path / "data", "--set", "share.coordinator.snapshot.update.records.per.snapshot=2",
                       "--set", "group.share.record.lock.duration.ms=30000") as b:
        yield b


# ---------------------------------------------------------------------- an independent decoder
def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _skip_tags(data: bytes, pos: int) -> int:
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        _tag, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        pos += size
    return pos


def decode_key(data: bytes) -> tuple[str, str, uuid.UUID, int]:
    """ShareSnapshotKey (version 0) / ShareUpdateKey (version 1): not flexible."""
    version, length = struct.unpack_from(">hh", data, 0)
    group = data[4:4 + length].decode()
    topic_id, partition = struct.unpack_from(">16si", data, 4 + length)
    assert 4 + length + 20 == len(data)
    return {0: "snapshot", 1: "update"}[version], group, uuid.UUID(bytes=topic_id), partition


def decode_value(kind: str, data: bytes) -> dict:
    """ShareSnapshotValue / ShareUpdateValue v0 (flexible): compact arrays, tagged fields."""
    (version,) = struct.unpack_from(">h", data, 0)
    assert version == 0
    if kind == "snapshot":
        epoch, state_epoch, leader_epoch, start = struct.unpack_from(">Hiiq", data, 2)
        pos = 2 + 18
        out = {"snapshot_epoch": epoch, "state_epoch": state_epoch, "leader_epoch": leader_epoch, "start": start}
    else:
        epoch, leader_epoch, start = struct.unpack_from(">Hiq", data, 2)
        pos = 2 + 14
        out = {"snapshot_epoch": epoch, "leader_epoch": leader_epoch, "start": start}
    count, pos = _uvarint(data, pos)
    batches = []
    for _ in range(count - 1):
        batches.append(struct.unpack_from(">qqbh", data, pos))
        pos = _skip_tags(data, pos + 19)
    pos = _skip_tags(data, pos)
    assert pos == len(data), "trailing bytes"
    out["batches"] = batches
    return out


def state_records(broker: BrokerProcess) -> list[tuple[str, str, uuid.UUID, int, dict | None]]:
    """Every record of __share_group_state, read by a plain consumer and decoded here."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(rec.STATE_TOPIC, 0, 0)])
        _low, high = consumer.get_watermark_offsets(TopicPartition(rec.STATE_TOPIC, 0), timeout=10)
        out = []
        while len(out) < high:
            msgs = consumer.consume(500, 5)
            assert msgs, f"read {len(out)} of {high}"
            for m in msgs:
                assert m.error() is None, m.error()
                out.append(m)
        decoded = []
        for m in out:
            if struct.unpack_from(">h", m.key(), 0)[0] == rec.CONFIG_KEY_VERSION:
                continue
            kind, group, topic_id, partition = decode_key(m.key())
            decoded.append((kind, group, topic_id, partition, None if m.value() is None else decode_value(kind, m.value())))
        return decoded
    finally:
        consumer.close()


# ---------------------------------------------------------------------- tests
def test_records_are_kafkas_snapshots_and_updates(broker):
    tid = create_topic(broker.bootstrap, "q")
    m = ShareClient(broker, "g")
    m.join("q")  # initialises the share partition: ShareSnapshot epoch 0, start 0, no batches
    produce(broker.bootstrap, "q", 10)
    assert acquired(m.fetch(tid, max_wait_ms=2000)) == [(0, 9, 1)]
    for first, last, kind in ((0, 1, ACCEPT), (4, 4, REJECT), (5, 5, RELEASE), (2, 3, ACCEPT)):
        r = m.acknowledge(tid, {0: [(first, last, [kind])]})
        assert r["responses"][0]["partitions"][0]["error_code"] == 0, r
    # Offset 5 (released) again, its second delivery; then offset 7 accepted.
    assert acquired(m.fetch(tid, max_wait_ms=2000)) == [(5, 5, 2)]
    r = m.acknowledge(tid, {0: [(7, 7, [ACCEPT])]})
    assert r["responses"][0]["partitions"][0]["error_code"] == 0, r
    records = state_records(broker)
    assert all((g, t, p) == ("g", tid, 0) for _k, g, t, p, _v in records)
    kinds = [k for k, *_ in records]
    assert kinds == ["snapshot", "update", "update", "snapshot", "update", "update"], kinds
    first, u1, u2, second, u3, u4 = (v for *_k, v in records)
    assert first == {"snapshot_epoch": 0, "state_epoch": 0, "leader_epoch": 0, "start": 0, "batches": []}
    # Updates carry what changed since their snapshot (cumulative) and the new start offset;
    # acquired records are written as AVAILABLE with their delivery count.
    assert u1 == {"snapshot_epoch": 0, "leader_epoch": 0, "start": 2, "batches": [(2, 9, AVAILABLE, 1)]}
    assert u2 == {"snapshot_epoch": 0, "leader_epoch": 0, "start": 2,
                  "batches": [(2, 3, AVAILABLE, 1), (4, 4, ARCHIVED, 1), (5, 9, AVAILABLE, 1)]}
    # The third change (the release of 5): a new snapshot, two updates per snapshot here,
    # holding the whole window from the start offset.
    assert second == {"snapshot_epoch": 1, "state_epoch": 0, "leader_epoch": 0, "start": 2,
                      "batches": [(2, 3, AVAILABLE, 1), (4, 4, ARCHIVED, 1), (5, 9, AVAILABLE, 1)]}
    # 2-3 accepted: 2-4 settled, the start moves to 5 and nothing else changed.
    assert u3 == {"snapshot_epoch": 1, "leader_epoch": 0, "start": 5, "batches": []}
    # Still cumulative: the new start and both changes since snapshot 1.
    assert u4 == {"snapshot_epoch": 1, "leader_epoch": 0, "start": 5,
                  "batches": [(5, 5, AVAILABLE, 2), (7, 7, ACKNOWLEDGED, 1)]}
    # Replay: the snapshot with its newest update applied, as the server's decoder reads them.
    state = rec.apply_update(rec.ShareSnapshot(1, 0, 2, second["batches"]), rec.ShareUpdate(1, 5, u4["batches"]))
    assert (state.start_offset, state.batches) == (5, [(5, 5, AVAILABLE, 2), (6, 6, AVAILABLE, 1),
                                                       (7, 7, ACKNOWLEDGED, 1), (8, 9, AVAILABLE, 1)])


@pytest.mark.parametrize("how", ["restart", "sigkill"])
def test_state_survives_restart_and_sigkill(broker, how):
    tid = create_topic(broker.bootstrap, "q")
    m = ShareClient(broker, "g")
    m.join("q")
    produce(broker.bootstrap, "q", 20)
    assert acquired(m.fetch(tid, max_wait_ms=2000)) == [(0, 19, 1)]
    # Five acknowledgements: snapshots and updates interleave (two updates per snapshot).
    for first, last, kind in ((0, 2, ACCEPT), (3, 3, REJECT), (6, 7, ACCEPT), (10, 10, ACCEPT), (12, 12, REJECT)):
        r = m.acknowledge(tid, {0: [(first, last, [kind])]})
        assert r["responses"][0]["partitions"][0]["error_code"] == 0, r
    if how == "sigkill":
        broker.kill()
        broker.start()
    else:
        broker.restart()
    m = ShareClient(broker, "g")
    m.join("q")
    r = m.fetch(tid, max_wait_ms=2000)
    # Acquired only before: delivered again (a second delivery); settled: never.
    assert offsets(r) == [4, 5, 8, 9, 11] + list(range(13, 20))
    assert {count for _f, _l, count in acquired(r)} == {2}
    assert m.acknowledge(tid, {0: [(4, 5, [ACCEPT]), (8, 9, [ACCEPT]), (11, 11, [ACCEPT]),
                                   (13, 19, [ACCEPT])]})["responses"][0]["partitions"][0]["error_code"] == 0
    broker.kill()
    broker.start()
    m = ShareClient(broker, "g")
    m.join("q")
    assert offsets(m.fetch(tid, max_wait_ms=500)) == []
    produce(broker.bootstrap, "q", 2)
    assert acquired(m.fetch(tid, max_wait_ms=2000)) == [(20, 21, 1)]
