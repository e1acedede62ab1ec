"""MirrorMaker's job on Spark: copy topics from one cluster to another, exactly once.

    python -m spark_jobs.mirror --source 127.0.0.1:9092 --target 127.0.0.1:9093 \\
        --topics orders,payments --checkpoint /tmp/ckpt/mirror
    python -m spark_jobs.mirror --source ... --target ... --topics-regex 'orders\\..*' --checkpoint ...

How this works
--------------
A Structured Streaming query reads the source (``subscribe`` or ``subscribePattern``,
``includeHeaders``) and hands each micro-batch to ``foreachBatch``. Spark's Kafka sink is not
used: it is at-least-once (a batch replayed after a crash is written again) and it does not
write the ``timestamp`` column (Spark 4.0's ``KafkaRowWriter`` builds each ``ProducerRecord``
with a null timestamp, so the target would stamp its own time). The batch is written instead
by one confluent-kafka producer on the driver (idempotent, acks=all, one request in flight),
each record to the same partition number of a same-named topic (``--prefix`` to rename), with
its key, value, headers and CreateTime timestamp.

Target topics are created before the first write with the source topic's partition count
(topics that appear later under ``--topics-regex`` too); an existing target topic with fewer
partitions stops the job with both counts named.

Exactly once across restarts
----------------------------
After a batch's records are acknowledged, one *offset sync* per source partition goes to the
target's ``--offsets-topic`` (compacted): "source offset U is target offset D", U the batch's
last record. Spark commits the batch only after ``foreachBatch`` returns, so when a batch
is run (first time or replayed after a crash, with the same offset range, from the
checkpoint's offset log), for each source partition:

* the latest sync (U, D) covers every earlier batch (each batch writes its sync before it
  ends), and the only writer of the target partition is this job, so the target records
  after D are a *prefix* of the source records after U, in order (one producer, one request
  in flight, idempotent: no reordering and no gaps within a run);
* records of the batch with offset <= U are skipped (the sync was written, the commit was
  not); of the rest, the first ``end(target) - (D + 1)`` are skipped too (written before the
  crash, sync not yet written); the remainder is written.

The first time a source partition is seen, a *start marker* sync goes out before any of its
records: (first source offset - 1, target end - 1). Records another writer left in the
target topic are thereby never counted as ours, and a partition without any sync has
nothing of ours in the target.

Nothing is lost (a record is skipped only if the target holds it) and nothing is written
twice (a record is written only if the target does not hold it). A failed write inside a
batch (target restarting) is retried by running the same plan again from a fresh look at
the target's end offsets, with a new producer: the previous one was flushed, so nothing of
it is still in flight. Source offsets are counted in records, not offset arithmetic, so
gaps (compaction, transaction markers) do not matter.

Offset sync records: the format of MirrorMaker 2's ``OffsetSync`` (``mm2-offset-syncs.*``),
Kafka's ``Struct`` encoding, big-endian: key = topic (int16 length + UTF-8) + partition
(int32), value = upstreamOffset (int64) + downstreamOffset (int64). MM2 tools that translate
offsets (RemoteClusterUtils) read the same shape. The key names the *source* topic.
"""

from __future__ import annotations

import argparse
import logging
import re
import struct
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from spark_jobs.kafka_io import interval, positive_int, topic_name

log = logging.getLogger("spark_jobs.mirror")

DEFAULT_OFFSETS_TOPIC = "mm2-offset-syncs.target.internal"
# MirrorMaker 2's DefaultTopicFilter.TOPICS_EXCLUDE_DEFAULT: internal and replica topics.
EXCLUDED = r"__.*|.*[-.]internal|.*\.replica"  # internal topics, left out as MirrorMaker 2 does
EXCLUDED_TOPICS = re.compile(f"^({EXCLUDED})$")


# --------------------------------------------------------------------------- topic selection


def select_topics(available: Iterable[str], topics: Sequence[str] | None, pattern: str | None,
                  offsets_topic: str = DEFAULT_OFFSETS_TOPIC) -> list[str]:
    """Source topics to mirror: the named ones (each must exist), or those matching ``pattern``
    whole (Spark's subscribePattern is a Java regex matched whole), never internal topics."""
    available = set(available)
    if topics:
        missing = sorted(set(topics) - available)
        if missing:
            raise ValueError(f"source has no topic {', '.join(missing)}")
        return sorted(set(topics))
    assert pattern is not None
    regex = re.compile(pattern)
    return sorted(
        t for t in available
        if regex.fullmatch(t) and not EXCLUDED_TOPICS.match(t) and t != offsets_topic
    )


def plan_topics(source_partitions: dict[str, int], target_partitions: dict[str, int],
                prefix: str = "") -> dict[str, int]:
    """Target topics to create (name → partition count). A target topic with fewer
    partitions than its source cannot keep partitions: ``ValueError`` naming both."""
    create = {}
    for topic, count in sorted(source_partitions.items()):
        target = prefix + topic
        have = target_partitions.get(target)
        if have is None:
            create[target] = count
        elif have < count:
            raise ValueError(
                f"target topic {target} has {have} partitions, source topic {topic} has {count}: "
                "partitions cannot be kept (add partitions on the target first)"
            )
    return create


# --------------------------------------------------------------------------- offset syncs


_STR_LEN = struct.Struct(">h")
_PARTITION = struct.Struct(">i")
_OFFSETS = struct.Struct(">qq")


def encode_sync_key(topic: str, partition: int) -> bytes:
    """MM2 OffsetSync key: topic STRING (int16 length + UTF-8), partition INT32."""
    name = topic.encode()
    return _STR_LEN.pack(len(name)) + name + _PARTITION.pack(partition)


def encode_sync_value(upstream: int, downstream: int) -> bytes:
    """MM2 OffsetSync value: upstreamOffset INT64, downstreamOffset INT64."""
    return _OFFSETS.pack(upstream, downstream)


def decode_sync(key: bytes, value: bytes) -> tuple[tuple[str, int], tuple[int, int]]:
    """((topic, partition), (upstream, downstream)) of an offset sync record."""
    if len(key) < 2:
        raise ValueError(f"offset sync key of {len(key)} bytes")
    (n,) = _STR_LEN.unpack_from(key)
    if n < 0 or len(key) != 2 + n + 4 or len(value) != 16:
        raise ValueError(f"offset sync key/value of {len(key)}/{len(value)} bytes is not MM2's OffsetSync")
    topic = key[2:2 + n].decode()
    (partition,) = _PARTITION.unpack_from(key, 2 + n)
    return (topic, partition), _OFFSETS.unpack(value)


# --------------------------------------------------------------------------- dedupe planning


class MirrorStateError(RuntimeError):
    """The target does not look like this job's copy: retrying would not help."""


@dataclass(frozen=True)
class Record:
    """One source record as the mirror needs it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes | None], ...] = ()


def group_records(records: Iterable[Record]) -> dict[tuple[str, int], list[Record]]:
    """Records per source partition, in offset order (Spark's collect() order is not)."""
    groups: dict[tuple[str, int], list[Record]] = {}
    for r in records:
        groups.setdefault((r.topic, r.partition), []).append(r)
    for rows in groups.values():
        rows.sort(key=lambda r: r.offset)
    return groups


def pending(rows: Sequence[Record], sync: tuple[int, int] | None, target_end: int) -> list[Record]:
    """Records of one source partition's batch that the target does not hold yet.

    ``sync`` is the latest (upstream, downstream) for the partition (None: nothing synced yet,
    the target partition was empty when mirroring began), ``target_end`` the target
    partition's log end offset. See the module docstring for why this is exact.
    """
    upstream, downstream = sync if sync is not None else (-1, -1)
    after = [r for r in rows if r.offset > upstream]
    written = target_end - (downstream + 1)
    if written < 0:
        raise MirrorStateError(
            f"target partition ends at {target_end}, before the synced offset {downstream}: "
            "the target lost records (or was recreated); refusing to guess"
        )
    if written > len(after):
        raise MirrorStateError(
            f"target partition holds {written} records past its last sync but this batch has only "
            f"{len(after)}: another producer writes to it"
        )
    return after[written:]


# --------------------------------------------------------------------------- the writer


class MirrorWriter:
    """The ``foreachBatch`` function: writes a batch to the target exactly once (see above)."""

    def __init__(self, source: str, target: str, offsets_topic: str, prefix: str = "",
                 producer_conf: dict[str, Any] | None = None, retry_for: float = 120.0) -> None:
        self.source = source
        self.target = target
        self.offsets_topic = offsets_topic
        self.prefix = prefix
        self.producer_conf = producer_conf or {}
        self.retry_for = retry_for
        self.syncs: dict[tuple[str, int], tuple[int, int]] | None = None  # read lazily
        self.known_targets: set[str] = set()

    # -- admin

    def _admin(self, bootstrap: str):
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": bootstrap})

    def partition_counts(self, bootstrap: str) -> dict[str, int]:
        md = self._admin(bootstrap).list_topics(timeout=30)
        return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}

    def ensure_topics(self, source_topics: Iterable[str]) -> None:
        """Create missing target topics with their source's partition count (and the offset
        syncs topic, compacted as MM2's is)."""
        wanted = set(source_topics) - {t[len(self.prefix):] for t in self.known_targets}
        if not wanted and self.offsets_topic in self.known_targets:
            return
        from confluent_kafka.admin import NewTopic

        src = {t: c for t, c in self.partition_counts(self.source).items() if t in wanted}
        have = self.partition_counts(self.target)
        create = plan_topics(src, have, self.prefix)
        new = [NewTopic(t, n, 1) for t, n in create.items()]
        if self.offsets_topic not in have:
            new.append(NewTopic(self.offsets_topic, 1, 1, config={"cleanup.policy": "compact"}))
        if new:
            admin = self._admin(self.target)  # kept referenced: a collected client fails its futures
            for name, future in admin.create_topics(new, operation_timeout=30).items():
                try:
                    future.result()
                    log.info("created target topic %s", name)
                except Exception as exc:
                    if "TOPIC_ALREADY_EXISTS" not in str(exc):
                        raise
        self.known_targets |= {self.prefix + t for t in src} | {self.offsets_topic}

    # -- state

    def read_syncs(self) -> dict[tuple[str, int], tuple[int, int]]:
        """The latest offset sync per source partition, read from the offsets topic's start."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.target, "group.id": "spark-mirror-syncs",
                             "enable.auto.commit": False, "enable.partition.eof": True})
        syncs: dict[tuple[str, int], tuple[int, int]] = {}
        try:
            parts = consumer.list_topics(self.offsets_topic, timeout=30).topics[self.offsets_topic].partitions
            for p in parts:
                low, high = consumer.get_watermark_offsets(TopicPartition(self.offsets_topic, p), timeout=30)
                if high <= low:
                    continue
                consumer.assign([TopicPartition(self.offsets_topic, p, low)])
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    msg = consumer.poll(1.0)
                    if msg is None:
                        continue
                    if msg.error():
                        if msg.error().code() == KafkaError._PARTITION_EOF:
                            break
                        raise RuntimeError(f"reading {self.offsets_topic}: {msg.error()}")
                    tp, offsets = decode_sync(msg.key(), msg.value())
                    syncs[tp] = offsets
                    if msg.offset() >= high - 1:
                        break
                else:
                    raise RuntimeError(f"{self.offsets_topic}[{p}] not read to {high} within 60 s")
        finally:
            consumer.close()
        return syncs

    def target_ends(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.target, "group.id": "spark-mirror-ends"})
        try:
            return {
                (t, p): consumer.get_watermark_offsets(TopicPartition(self.prefix + t, p), timeout=30)[1]
                for t, p in partitions
            }
        finally:
            consumer.close()

    # -- writing

    def _produce(self, records: list[tuple[str, int, bytes | None, bytes | None, int | None, list]]) -> list[str]:
        """Produce and flush with a fresh idempotent producer; the delivery errors."""
        from confluent_kafka import Producer

        producer = Producer({
            "bootstrap.servers": self.target, "enable.idempotence": True, "acks": "all",
            "max.in.flight.requests.per.connection": 1, "linger.ms": 5, "message.timeout.ms": 30000,
            **self.producer_conf,
        })
        errors: list[str] = []

        def report(err, msg):
            if err is not None:
                errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")

        for topic, partition, key, value, ts, headers in records:
            while True:
                try:
                    producer.produce(topic, value=value, key=key, partition=partition, timestamp=ts or 0,
                                     headers=headers or None, on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.1)
        # Until every record is settled (acknowledged or failed by message.timeout.ms): a retry
        # of the batch must not start while one of these could still land on the target.
        deadline = time.monotonic() + 600
        while (left := producer.flush(60)) and time.monotonic() < deadline:
            pass
        if left:
            errors.append(f"{left} records not settled within 600 s")
        return errors

    def _write_syncs(self, syncs: dict[tuple[str, int], tuple[int, int]]) -> None:
        errors = self._produce([
            (self.offsets_topic, 0, encode_sync_key(t, p), encode_sync_value(u, d), None, [])
            for (t, p), (u, d) in syncs.items()
        ])
        if errors:
            raise RuntimeError("offset syncs: " + "; ".join(errors[:5]))
        assert self.syncs is not None
        self.syncs.update(syncs)

    def write_batch(self, groups: dict[tuple[str, int], list[Record]], batch_id: int = -1) -> int:
        """Write what the target lacks of ``groups``, then the offset syncs; retried as a whole
        until ``retry_for`` seconds pass. Returns how many records this call wrote."""
        if not groups:
            return 0
        deadline = time.monotonic() + self.retry_for
        written = 0
        while True:
            try:
                self.ensure_topics({t for t, _ in groups})
                if self.syncs is None:
                    self.syncs = self.read_syncs()
                ends = self.target_ends(groups)
                # A partition seen for the first time gets a start marker before any record:
                # "just before this batch's first source record is the target's current end".
                # Records already in the target topic (another writer's) are then never
                # mistaken for ours, and no sync at all means nothing of ours was written.
                markers = {tp: (rows[0].offset - 1, ends[tp] - 1) for tp, rows in groups.items()
                           if tp not in self.syncs}
                if markers:
                    self._write_syncs(markers)
                todo = {tp: pending(rows, self.syncs.get(tp), ends[tp]) for tp, rows in groups.items()}
                out = [
                    (self.prefix + r.topic, r.partition, r.key, r.value, r.timestamp_ms, list(r.headers))
                    for rows in todo.values() for r in rows
                ]
                errors = self._produce(out)
                if errors:
                    raise RuntimeError("; ".join(errors[:5]))
                written += len(out)
                ends = self.target_ends(groups)
                self._write_syncs({tp: (rows[-1].offset, ends[tp] - 1) for tp, rows in groups.items()})
                log.info("batch %d: %d records written, %d already on the target", batch_id, len(out),
                         sum(len(rows) for rows in groups.values()) - len(out))
                return written
            except Exception as exc:
                if time.monotonic() > deadline or isinstance(exc, (ValueError, MirrorStateError)):
                    raise
                log.warning("batch %d: %s; retrying from the target's end offsets", batch_id, exc)
                self.syncs = None  # re-read: a sync may have landed without its acknowledgement
                time.sleep(1.0)

    def __call__(self, df: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        # Epoch ms computed by Spark: collect() turns timestamps into naive datetimes in the
        # Python process's local zone, which would shift them on a machine not on UTC.
        rows = df.select("topic", "partition", "offset", "key", "value",
                         F.unix_millis("timestamp").alias("ts"), "headers").collect()
        records = [
            Record(r.topic, r.partition, r.offset, _bytes(r.key), _bytes(r.value), r.ts,
                   tuple((h.key, _bytes(h.value)) for h in (r.headers or ())))
            for r in rows
        ]
        self.write_batch(group_records(records), batch_id)


def _bytes(value: Any) -> bytes | None:
    """Spark's BinaryType arrives as bytearray; the producer takes bytes."""
    return None if value is None else bytes(value)


# --------------------------------------------------------------------------- the job


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.mirror",
        description="Copy topics from one Kafka cluster to another with Spark, exactly once "
        "(keys, headers, timestamps and partitions kept; MM2-format offset syncs).",
        epilog="example: python -m spark_jobs.mirror --source 127.0.0.1:9092 --target 127.0.0.1:9093 "
        "--topics orders,payments --checkpoint /tmp/ckpt/mirror --trigger '5 seconds'",
    )
    parser.add_argument("--source", required=True, help="source bootstrap servers")
    parser.add_argument("--target", required=True, help="target bootstrap servers")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--topics", type=lambda s: [topic_name(t) for t in s.split(",") if t],
                       help="comma-separated source topics")
    which.add_argument("--topics-regex", help="Java/Python regex matched against whole topic names "
                       "(internal topics excluded as MM2 does)")
    parser.add_argument("--checkpoint", required=True, help="Structured Streaming checkpoint folder")
    parser.add_argument("--offsets-topic", type=topic_name, default=DEFAULT_OFFSETS_TOPIC,
                        help="target topic for MM2-format offset syncs (default %(default)s)")
    parser.add_argument("--prefix", default="", help="prepended to target topic names (default: none)")
    parser.add_argument("--starting-offsets", default="earliest", choices=["earliest", "latest"])
    parser.add_argument("--max-offsets-per-trigger", type=positive_int, default=100_000,
                        help="records per micro-batch (they pass through the driver)")
    parser.add_argument("--trigger", type=interval, default="5 seconds", help="micro-batch interval")
    parser.add_argument("--available-now", action="store_true", help="copy what is there, then stop")
    parser.add_argument("--run-for", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--packages", action="store_true", help="download the connector from Maven Central")
    parser.add_argument("--master", default="local[2]")
    return parser


def source_options(args: argparse.Namespace) -> dict[str, str]:
    opts = {
        "kafka.bootstrap.servers": args.source,
        "includeHeaders": "true",
        "startingOffsets": args.starting_offsets,
        "maxOffsetsPerTrigger": str(args.max_offsets_per_trigger),
        "failOnDataLoss": "true",
    }
    if args.topics:
        opts["subscribe"] = ",".join(args.topics)
    else:
        # Spark matches the pattern against every topic; keep internal ones out as MM2 does.
        # (and the job's own offset-sync topic, as select_topics does)
        opts["subscribePattern"] = f"(?!({EXCLUDED}|{re.escape(args.offsets_topic)})$)(?:{args.topics_regex})"
    return opts


def main(argv: list[str] | None = None) -> int:
    from spark_jobs.kafka_io import await_queries, load_kafka, session_from_args

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    writer = MirrorWriter(args.source, args.target, args.offsets_topic, args.prefix)
    try:
        topics = select_topics(writer.partition_counts(args.source), args.topics, args.topics_regex,
                               args.offsets_topic)
        writer.ensure_topics(topics)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    log.info("mirroring %s from %s to %s", ", ".join(topics) or "(none yet)", args.source, args.target)
    spark = session_from_args(args, "trafka-mirror")
    stream = load_kafka(spark, source_options(args), streaming=True)
    query = (
        stream.writeStream.queryName("mirror").foreachBatch(writer)
        .option("checkpointLocation", args.checkpoint)
        .trigger(**({"availableNow": True} if args.available_now else {"processingTime": args.trigger}))
        .start()
    )
    await_queries([query], args.run_for)
    return 0


if __name__ == "__main__":
    sys.exit(main())
