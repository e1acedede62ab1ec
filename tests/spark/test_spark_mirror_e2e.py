"""``python -m spark_jobs.mirror`` end to end between two Trafka brokers, with Spark's connector.

The job runs as its own process, as an operator runs it. It is SIGKILLed mid-run (Spark's
checkpoint then replays the batch in flight) and, in its second run, the target broker is
restarted under it; afterwards every source record is in the target exactly once, in its
partition, with key, value, headers and timestamp, and the offset syncs map the last source
offset of each partition to its target offset. Skipped without ``SPARK_KAFKA_JARS``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark not installed (extra 'spark')")

from spark_jobs.mirror import decode_sync  # noqa: E402
from tests.brokerproc import REPO, BrokerProcess, create_topic  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not os.environ.get("SPARK_KAFKA_JARS"),
                       reason="SPARK_KAFKA_JARS not set (Spark's Kafka connector is not on PyPI; see README)"),
    pytest.mark.timeout(600),
]

T0 = 1_740_830_400_000
TOPICS = {"m.clicks": 3, "m.orders": 1}


def _produce(bootstrap: str, start: int, count: int) -> list[tuple]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    sent = []
    for i in range(start, start + count):
        topic = "m.clicks" if i % 4 else "m.orders"
        partition = i % TOPICS[topic]
        key = None if i % 10 == 3 else b"user-%d" % (i % 17)
        value = None if i % 25 == 7 else b"event-%d" % i
        headers = [("seq", b"%d" % i), ("trace", None)] if i % 2 else []
        producer.produce(topic, value=value, key=key, partition=partition, timestamp=T0 + i * 1000,
                         headers=headers)
        sent.append((topic, partition, key, value, T0 + i * 1000, tuple(headers)))
    assert producer.flush(30) == 0
    return sent


def _read_all(bootstrap: str, topics: dict[str, int]) -> list[tuple]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    out = []
    try:
        for topic, partitions in topics.items():
            for p in range(partitions):
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                consumer.assign([TopicPartition(topic, p, 0)])
                got = 0
                deadline = time.monotonic() + 30
                while got < high and time.monotonic() < deadline:
                    msg = consumer.poll(1.0)
                    if msg is None or msg.error():
                        continue
                    got += 1
                    out.append((topic, p, msg.key(), msg.value(), msg.timestamp()[1],
                                tuple(msg.headers() or ()), msg.offset()))
    finally:
        consumer.close()
    return out


def _count(bootstrap: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "count"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)[1]
                   for t, n in TOPICS.items() for p in range(n))
    except Exception:
        return -1
    finally:
        consumer.close()


def _start_job(source, target, checkpoint: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "spark_jobs.mirror", "--source", source.bootstrap, "--target", target.bootstrap,
         "--topics-regex", r"m\..*", "--checkpoint", str(checkpoint), "--trigger", "1 second",
         "--max-offsets-per-trigger", "150", "--offsets-topic", "mm2-offset-syncs.target.internal"],
        cwd=REPO, stdout=open(log, "ab"), stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def _wait(predicate, timeout: float, what: str, job: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if job.poll() is not None:
            raise AssertionError(f"mirror exited {job.returncode} before {what}:\n{log.read_text()[-4000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-4000:]}")
        time.sleep(0.5)


def test_mirror_survives_job_kill_and_target_restart(tmp_path):
    log = tmp_path / "mirror.log"
    with BrokerProcess(tmp_path / "src") as source, BrokerProcess(tmp_path / "dst") as target:
        for topic, partitions in TOPICS.items():
            create_topic(source.port, topic, partitions)
        sent = _produce(source.bootstrap, 0, 1200)
        job = _start_job(source, target, tmp_path / "ckpt", log)
        try:
            _wait(lambda: _count(target.bootstrap) >= 300, 240, "the first batches", job, log)
            job.send_signal(signal.SIGKILL)  # mid-run: a batch may be half written
            job.wait(30)
            sent += _produce(source.bootstrap, 1200, 600)
            job = _start_job(source, target, tmp_path / "ckpt", log)
            _wait(lambda: _count(target.bootstrap) >= 1400, 240, "the second run's batches", job, log)
            target.stop()
            time.sleep(2)
            target.start()
            _wait(lambda: _count(target.bootstrap) >= len(sent), 240, "every record", job, log)
            time.sleep(3)  # a duplicate would land now
        finally:
            if job.poll() is None:
                job.send_signal(signal.SIGTERM)
                try:
                    job.wait(60)
                except subprocess.TimeoutExpired:
                    job.kill()
                    job.wait()

        got = _read_all(target.bootstrap, TOPICS)
        assert len(got) == len(sent)
        assert Counter(g[:6] for g in got) == Counter(sent)  # each once, in its partition, all kept
        # per partition, the source order is the target order (offsets are the source's here)
        for topic, partitions in TOPICS.items():
            for p in range(partitions):
                ours = [g[3] for g in sorted((g for g in got if g[:2] == (topic, p)), key=lambda g: g[6])]
                assert ours == [s[3] for s in sent if s[:2] == (topic, p)]
        syncs = {}
        for rec in _read_all(target.bootstrap, {"mm2-offset-syncs.target.internal": 1}):
            tp, offsets = decode_sync(rec[2], rec[3])
            syncs[tp] = offsets
        for topic, partitions in TOPICS.items():
            for p in range(partitions):
                n = sum(1 for s in sent if s[:2] == (topic, p))
                assert syncs[(topic, p)] == (n - 1, n - 1)
