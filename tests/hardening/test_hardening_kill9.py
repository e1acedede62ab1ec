"""kill -9 under load: nothing acknowledged is lost, nothing is written twice.

Several idempotent confluent-kafka producers (acks=all) write keyed, numbered messages to
a broker running with trafka.fsync.policy=always, which is SIGKILLed at random moments
and restarted on the same port. After each restart every message acknowledged before the
kill is in the log exactly once, at the offset its delivery report gave; at the end every
acknowledged message is there exactly once, no message (acknowledged or not) is there
twice, each producer's messages are in order within a partition, and every producer kept
getting acknowledgements after every restart (idempotent producers resume).

Rounds: 3 by default, 15 with TRAFKA_LONG_TESTS=1.
"""

from __future__ import annotations

import pytest

import random
import threading
import time
from collections import Counter

from hardening_kit import LONG, alive, create_topic, log_text, read_values, scaled
from tests.brokerproc import BrokerProcess

pytestmark = pytest.mark.timeout(scaled(300, 900))

TOPIC = "kill9"
PARTITIONS = 3
PRODUCERS = 3
ROUNDS = scaled(3, 15)
RATE_PER_PRODUCER = 250.0  # messages per second


class NumberedProducer(threading.Thread):
    """One idempotent producer writing `<id>:<seq>` values, keys `<id>-<seq % 4>`."""

    def __init__(self, bootstrap: str, producer_index: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.index = producer_index
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked: dict[int, tuple[int, int]] = {}  # seq -> (partition, offset)
        self.failed: dict[int, str] = {}
        self.sent = 0
        self.fatal: str | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def _run(self) -> None:
        import confluent_kafka as ck

        producer = ck.Producer({
            "bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 2, "message.timeout.ms": 90000, "retry.backoff.ms": 50,
            "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 300, "log_level": 2,
            "error_cb": self._on_error,
        })

        def report(err, msg):
            seq = int(msg.value().split(b":")[1])
            with self.lock:
                if err is None:
                    self.acked[seq] = (msg.partition(), msg.offset())
                else:
                    self.failed[seq] = str(err)

        interval = 1.0 / RATE_PER_PRODUCER
        next_at = time.monotonic()
        seq = 0
        while not self.stop.is_set() and self.fatal is None:
            try:
                producer.produce(TOPIC, key=f"{self.index}-{seq % 4}".encode(), value=f"{self.index}:{seq}".encode(),
                                 on_delivery=report)
            except BufferError:
                producer.poll(0.05)
                continue
            seq += 1
            self.sent = seq
            next_at += interval
            producer.poll(max(0.0, next_at - time.monotonic()))
        left = producer.flush(120)
        if left:
            self.failed[-1] = f"{left} messages never reported"

    def _on_error(self, err) -> None:
        if err.fatal():
            self.fatal = str(err)

    def acked_snapshot(self) -> dict[int, tuple[int, int]]:
        with self.lock:
            return dict(self.acked)


def _read_log(port: int) -> dict[int, list[tuple[int, bytes]]]:
    return {p: read_values(port, TOPIC, p) for p in range(PARTITIONS)}


def _check(log: dict[int, list[tuple[int, bytes]]], acked: dict[int, dict[int, tuple[int, int]]],
           when: str) -> None:
    """Acked messages exactly once at their reported offset; nothing twice; order kept."""
    at: dict[tuple[int, int], bytes] = {}
    counts: Counter[bytes] = Counter()
    for partition, records in log.items():
        offsets = [o for o, _v in records]
        assert offsets == sorted(set(offsets)), f"{when}: partition {partition} offsets repeat or go back"
        for offset, value in records:
            at[(partition, offset)] = value
            counts[value] += 1
    twice = [v for v, n in counts.items() if n > 1]
    assert not twice, f"{when}: {len(twice)} messages stored twice, e.g. {twice[:5]}"
    for index, seqs in acked.items():
        missing = []
        for seq, (partition, offset) in seqs.items():
            value = f"{index}:{seq}".encode()
            if counts[value] != 1:
                missing.append(seq)
            else:
                assert at.get((partition, offset)) == value, \
                    f"{when}: {value!r} acked at {partition}/{offset} but that offset holds {at.get((partition, offset))!r}"
        assert not missing, f"{when}: producer {index} lost {len(missing)} acked messages, e.g. {sorted(missing)[:5]}"
    for partition, records in log.items():
        last: dict[int, int] = {}
        for _offset, value in records:
            index, seq = (int(x) for x in value.split(b":"))
            assert seq > last.get(index, -1), f"{when}: producer {index} out of order in partition {partition}"
            last[index] = seq


def test_kill9_under_load(tmp_path):
    rng = random.Random(None if LONG else 9)
    broker = BrokerProcess(tmp_path / "data", "--set", "trafka.fsync.policy=always")
    broker.start()
    producers: list[NumberedProducer] = []
    try:
        create_topic(broker.port, TOPIC, partitions=PARTITIONS)
        producers = [NumberedProducer(broker.bootstrap, i) for i in range(PRODUCERS)]
        for p in producers:
            p.start()
        progress_marks = []
        for round_no in range(ROUNDS):
            time.sleep(rng.uniform(0.8, 2.0))
            before_kill = {p.index: p.acked_snapshot() for p in producers}
            assert alive(broker), broker.log_tail()
            broker.kill()
            time.sleep(rng.uniform(0.05, 0.5))
            broker.start()
            _check(_read_log(broker.port), before_kill, f"after kill {round_no + 1}")
            progress_marks.append({p.index: len(before_kill[p.index]) for p in producers})
            for p in producers:
                assert p.fatal is None, f"producer {p.index} hit a fatal error: {p.fatal}"
        time.sleep(1.5)
    finally:
        for p in producers:
            p.stop.set()
        for p in producers:
            p.join(150)
    try:
        for p in producers:
            assert p.error is None, repr(p.error)
            assert p.fatal is None, f"producer {p.index} hit a fatal error: {p.fatal}"
        final = {p.index: p.acked_snapshot() for p in producers}
        _check(_read_log(broker.port), final, "at the end")
        # Every producer was acknowledged after every restart: idempotent producers resume.
        for mark in progress_marks:
            for p in producers:
                assert len(final[p.index]) > mark[p.index], f"producer {p.index} made no progress after a restart"
        failed = {p.index: p.failed for p in producers if p.failed}
        assert not failed, f"deliveries failed: { {i: list(f.items())[:3] for i, f in failed.items()} }"
        total = sum(len(a) for a in final.values())
        assert total >= ROUNDS * 100, f"only {total} messages acknowledged over {ROUNDS} rounds"
        assert "unclean" in log_text(broker)
    finally:
        broker.kill()
