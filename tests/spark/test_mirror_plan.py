"""spark_jobs.mirror without Spark: topic selection, MM2 offset-sync records, the dedupe plan,
and MirrorWriter (the foreachBatch function) between two real Trafka brokers, replaying
batches as Spark does after a crash and with the target restarted mid-batch."""

from __future__ import annotations

import threading
import time

import pytest

from spark_jobs.mirror import (
    MirrorStateError,
    MirrorWriter,
    Record,
    decode_sync,
    encode_sync_key,
    encode_sync_value,
    group_records,
    pending,
    plan_topics,
    select_topics,
)
from tests.brokerproc import BrokerProcess, create_topic

# Recent (hour-aligned, two hours ago): a broker deletes segments older than retention.ms
# (7 days) from its first retention check, 30 s after start-up, as Kafka does.
T0 = (int(time.time() * 1000) // 3_600_000 - 2) * 3_600_000


def test_select_topics():
    available = ["orders", "orders.eu", "payments", "__consumer_offsets", "mm2-offset-syncs.target.internal",
                 "orders.replica", "orders-internal"]
    assert select_topics(available, ["payments", "orders"], None) == ["orders", "payments"]
    with pytest.raises(ValueError, match="no topic nope"):
        select_topics(available, ["orders", "nope"], None)
    assert select_topics(available, None, "orders.*") == ["orders", "orders.eu"]
    assert select_topics(available, None, ".*") == ["orders", "orders.eu", "payments"]
    assert select_topics(available, None, "order") == []  # whole-name match, as Spark's subscribePattern


def test_plan_topics_keeps_partition_counts():
    assert plan_topics({"a": 3, "b": 1}, {"b": 2}) == {"a": 3}
    assert plan_topics({"a": 3}, {}, prefix="src.") == {"src.a": 3}
    with pytest.raises(ValueError, match="target topic a has 2 partitions, source topic a has 3"):
        plan_topics({"a": 3}, {"a": 2})


def test_offset_sync_is_mm2_struct_encoding():
    key = encode_sync_key("orders", 2)
    value = encode_sync_value(41, 7)
    assert key == b"\x00\x06orders\x00\x00\x00\x02"
    assert value == (41).to_bytes(8, "big") + (7).to_bytes(8, "big")
    assert decode_sync(key, value) == (("orders", 2), (41, 7))
    with pytest.raises(ValueError):
        decode_sync(key[:-1], value)


def _rows(offsets, topic="t", partition=0):
    return [Record(topic, partition, o, b"k%d" % o, b"v%d" % o, T0 + o, (("h", b"%d" % o),)) for o in offsets]


def test_pending_skips_exactly_what_the_target_holds():
    rows = _rows([10, 11, 13, 14, 20])  # gaps: compaction, transaction markers
    assert pending(rows, None, 0) == rows  # first run, empty target
    assert pending(rows, None, 2) == rows[2:]  # crashed after 2 records, before any sync
    assert pending(rows, (11, 1), 2) == rows[2:]  # sync written for the previous batch
    assert pending(rows, (11, 1), 4) == rows[4:]  # 2 written after the sync
    assert pending(rows, (20, 4), 5) == []  # sync of this batch written, commit lost
    with pytest.raises(MirrorStateError, match="lost records"):
        pending(rows, (20, 4), 3)
    with pytest.raises(MirrorStateError, match="another producer"):
        pending(rows, None, 6)


def test_group_records_orders_by_offset():
    rows = _rows([3, 1, 2]) + _rows([0], partition=1)
    groups = group_records(rows)
    assert [r.offset for r in groups[("t", 0)]] == [1, 2, 3]
    assert list(groups) == [("t", 0), ("t", 1)]


# --------------------------------------------------------------------------- two brokers


@pytest.fixture
def brokers(tmp_path):
    with BrokerProcess(tmp_path / "src") as source, BrokerProcess(tmp_path / "dst") as target:
        yield source, target


def _target_records(bootstrap: str, topic: str, partitions: int) -> list[tuple]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    out = []
    try:
        consumer.list_topics(topic, timeout=10)  # metadata first, or the watermark call may say unknown partition
        for p in range(partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if not high:
                continue
            consumer.assign([TopicPartition(topic, p, 0)])
            got = 0
            deadline = time.monotonic() + 30
            while got < high and time.monotonic() < deadline:
                msg = consumer.poll(1.0)
                if msg is None or msg.error():
                    continue
                got += 1
                out.append((msg.partition(), msg.key(), msg.value(), msg.timestamp()[1], tuple(msg.headers() or ())))
    finally:
        consumer.close()
    return out


def _expected(rows):
    return sorted((r.partition, r.key, r.value, r.timestamp_ms, r.headers) for r in rows)


def test_replayed_batches_are_written_once(brokers):
    source, target = brokers
    create_topic(source.port, "orders", 2)
    batch1 = _rows(range(0, 6)) + _rows(range(0, 4), topic="orders", partition=1)
    batch1 = [Record("orders", r.partition, r.offset, r.key, r.value, r.timestamp_ms, r.headers) for r in batch1]
    batch2 = [Record("orders", 0, o, b"k", None, T0, ()) for o in range(6, 9)]  # tombstones, no headers

    writer = MirrorWriter(source.bootstrap, target.bootstrap, "syncs.internal")
    assert writer.write_batch(group_records(batch1), 0) == 10
    # Spark replays batch 0 (its commit was lost): a fresh driver writes nothing
    assert MirrorWriter(source.bootstrap, target.bootstrap, "syncs.internal").write_batch(group_records(batch1)) == 0
    # batch 1 crashed after its first record reached the target, before its sync
    writer._produce([("orders", 0, b"k", None, T0, [])])
    fresh = MirrorWriter(source.bootstrap, target.bootstrap, "syncs.internal")
    assert fresh.write_batch(group_records(batch2), 1) == 2
    assert fresh.read_syncs() == {("orders", 0): (8, 8), ("orders", 1): (3, 3)}
    assert sorted(_target_records(target.bootstrap, "orders", 2)) == _expected(batch1 + batch2)


def test_records_already_in_the_target_topic_are_not_ours(brokers):
    source, target = brokers
    create_topic(source.port, "t", 1)
    create_topic(target.port, "t", 1)
    other = [Record("t", 0, o, b"other", b"x", T0, ()) for o in range(3)]
    MirrorWriter(source.bootstrap, target.bootstrap, "syncs.internal")._produce(
        [("t", 0, r.key, r.value, r.timestamp_ms, []) for r in other])
    rows = _rows(range(5))
    assert MirrorWriter(source.bootstrap, target.bootstrap, "syncs.internal").write_batch(group_records(rows)) == 5
    assert MirrorWriter(source.bootstrap, target.bootstrap, "syncs.internal").write_batch(group_records(rows)) == 0
    assert sorted(_target_records(target.bootstrap, "t", 1)) == _expected(other + rows)


def test_target_restart_mid_batch(brokers):
    source, target = brokers
    create_topic(source.port, "t", 1)
    rows = _rows(range(3000))
    writer = MirrorWriter(source.bootstrap, target.bootstrap, "syncs.internal")
    assert writer.write_batch(group_records(rows[:1000]), 0) == 1000

    def bounce():
        time.sleep(2)
        target.start()

    target.stop()  # down when the batch starts, back 2 s later
    bouncer = threading.Thread(target=bounce)
    bouncer.start()
    try:
        writer.write_batch(group_records(rows[1000:]), 1)
    finally:
        bouncer.join()
    assert sorted(_target_records(target.bootstrap, "t", 1)) == _expected(rows)


def test_command_line_refusals_name_the_problem(brokers, capsys):
    from spark_jobs.mirror import main, source_options, build_parser

    source, target = brokers
    create_topic(source.port, "a", 3)
    create_topic(target.port, "a", 2)
    base = ["--source", source.bootstrap, "--target", target.bootstrap, "--checkpoint", "/nonexistent"]
    assert main(base + ["--topics", "a,nope"]) == 2
    assert "source has no topic nope" in capsys.readouterr().err
    assert main(base + ["--topics", "a"]) == 2
    assert "target topic a has 2 partitions, source topic a has 3" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(base + ["--topics", "a", "--topics-regex", "a.*"])  # one or the other
    opts = source_options(build_parser().parse_args(base + ["--topics-regex", "orders\\..*"]))
    assert opts["includeHeaders"] == "true" and opts["subscribePattern"].endswith("(?:orders\\..*)")
