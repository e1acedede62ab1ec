"""Torn and corrupted segment files between runs: cut at recovery, reported, the rest served.

The broker writes a topic of known batches over several small segments, a group consumer
commits offsets, and the broker stops (SIGTERM or SIGKILL). The test then damages the
files the way a crash or a bad disk does — a tail cut at a random byte, garbage appended,
a byte flipped inside an older segment — and restarts. Recovery must cut the log at the
first damaged batch and say so in the log, serve every batch before it unchanged (and
nothing after it), continue appending at the cut, keep other topics whole, and keep the
committed group offsets.

Damage positions come from a seeded generator; TRAFKA_LONG_TESTS=1 runs each scenario
with several random seeds.
"""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

import pytest

from hardening_kit import (
    LONG,
    create_topic,
    fetch,
    log_text,
    make_batch,
    produce,
    read_values,
    segment_batches,
)
from server.handlers import HANDLERS
from tests.brokerproc import BrokerProcess
from wire import ApiKey
from wire.records import CRC_START

pytestmark = pytest.mark.timeout(120)

TOPIC = "torn"
INTACT = "intact"
GROUP = "torn-group"
BATCHES = 120
RECORDS_PER_BATCH = 4
SEEDS = list(range(5)) if LONG else [1]

groups_ready = pytest.mark.skipif(
    ApiKey.OFFSET_COMMIT not in HANDLERS or ApiKey.OFFSET_FETCH not in HANDLERS,
    reason="OffsetCommit/OffsetFetch handlers are not in server/handlers yet",
)


def _value(batch: int, record: int) -> bytes:
    return b"batch%04d-record%d-" % (batch, record) + b"x" * 60


def _fill(broker: BrokerProcess) -> None:
    create_topic(broker.port, TOPIC, configs={"segment.bytes": "8192"})
    create_topic(broker.port, INTACT, configs={"segment.bytes": "8192"})
    for b in range(BATCHES):
        for topic in (TOPIC, INTACT):
            part = produce(broker.port, topic, 0, bytes(make_batch([_value(b, r) for r in range(RECORDS_PER_BATCH)])))
            assert part["error_code"] == 0 and part["base_offset"] == b * RECORDS_PER_BATCH


COMMITS = {(TOPIC, 0): 37, (INTACT, 0): 401}


def _commit_offsets(broker: BrokerProcess) -> None:
    """A real group member (subscribe, assignment, poll) commits COMMITS synchronously."""
    import confluent_kafka as ck

    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                            "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "log_level": 3})
    try:
        consumer.subscribe([TOPIC, INTACT])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment(), "the group consumer got no assignment"
        offsets = [ck.TopicPartition(t, p, o) for (t, p), o in COMMITS.items()]
        committed = consumer.commit(offsets=offsets, asynchronous=False)
        assert all(tp.error is None for tp in committed), committed
    finally:
        consumer.close()


def _committed(broker: BrokerProcess) -> dict[tuple[str, int], int]:
    import confluent_kafka as ck

    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                            "log_level": 3})
    try:
        result = consumer.committed([ck.TopicPartition(t, p) for (t, p) in COMMITS], timeout=20)
        return {(tp.topic, tp.partition): tp.offset for tp in result}
    finally:
        consumer.close()


def _segments(data_dir: Path, topic: str) -> list[Path]:
    return sorted((data_dir / f"{topic}-0").glob("*.log"))


def _expected_values(layout: dict[Path, list[tuple[int, int, int]]], damaged: Path, keep_until: int) -> list[bytes]:
    """Values of every batch before the damage: earlier segments whole, then the damaged
    one up to `keep_until` (a batch boundary). `layout` maps each segment (in order) to
    its batches as they were before the damage."""
    out = []
    for path, batches in layout.items():
        for pos, size, base in batches:
            if path == damaged and pos + size > keep_until:
                return out
            b = base // RECORDS_PER_BATCH
            out.extend(_value(b, r) for r in range(RECORDS_PER_BATCH))
        if path == damaged:
            return out
    return out


def _scenario_cut_tail(data_dir: Path, rng: random.Random) -> tuple[Path, int, int]:
    """Cut the active segment at a random byte inside one of its last batches."""
    last = _segments(data_dir, TOPIC)[-1]
    batches = segment_batches(last)
    pos, size, _base = batches[rng.randrange(max(0, len(batches) - 3), len(batches))]
    cut = rng.randrange(pos + 1, pos + size)  # never on a boundary: a real tear
    with open(last, "r+b") as f:
        f.truncate(cut)
    return last, pos, cut


def _scenario_garbage_tail(data_dir: Path, rng: random.Random) -> tuple[Path, int, int]:
    """Append what a torn write leaves: a zero-filled block, or random bytes."""
    last = _segments(data_dir, TOPIC)[-1]
    size = last.stat().st_size
    junk = b"\x00" * rng.randrange(1, 4096) if rng.random() < 0.5 else rng.randbytes(rng.randrange(1, 4096))
    with open(last, "ab") as f:
        f.write(junk)
    return last, size, size


def _scenario_flip_in_older_segment(data_dir: Path, rng: random.Random) -> tuple[Path, int, int]:
    """Flip one bit inside a batch (under its CRC) of a segment that is not the last."""
    segments = _segments(data_dir, TOPIC)
    assert len(segments) >= 3, f"expected several segments, got {len(segments)}"
    victim = segments[rng.randrange(0, len(segments) - 1)]
    pos, size, _base = rng.choice(segment_batches(victim))
    at = rng.randrange(pos + CRC_START, pos + size)
    data = bytearray(victim.read_bytes())
    data[at] ^= 1 << rng.randrange(8)
    victim.write_bytes(bytes(data))
    return victim, pos, at


SCENARIOS = {
    # name: (how the broker stops, damage)
    "cut-tail-after-clean-stop": ("stop", _scenario_cut_tail),
    "cut-tail-after-kill": ("kill", _scenario_cut_tail),
    "garbage-tail-after-kill": ("kill", _scenario_garbage_tail),
    "bit-flip-in-older-segment-after-kill": ("kill", _scenario_flip_in_older_segment),
}


@groups_ready
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_torn_segment_recovery(tmp_path, scenario, seed):
    how, damage = SCENARIOS[scenario]
    rng = random.Random(f"{scenario}-{seed}")
    data_dir = tmp_path / "data"
    broker = BrokerProcess(data_dir).start()
    try:
        _fill(broker)
        _commit_offsets(broker)
        assert _committed(broker) == COMMITS
        if how == "stop":
            assert broker.stop() == 0
        else:
            broker.kill()

        segments_before = _segments(data_dir, TOPIC)
        layout = {path: segment_batches(path) for path in segments_before}
        damaged, keep_until, _damage_at = damage(data_dir, rng)
        expected = _expected_values(layout, damaged, keep_until)
        later = segments_before[segments_before.index(damaged) + 1:]
        log_before = len(log_text(broker))

        broker.start()
        # Reported: which segment, where, and what was dropped. After a crash the log is
        # recovered before the broker listens; after a clean stop it is opened (and the
        # damage found) by the warm-up right after, or by its first use.
        pattern = (rf"{TOPIC}-0: segment {damaged.name} cut at position (\d+) \(offset (\d+)\), "
                   rf"(\d+) bytes dropped")
        deadline = time.monotonic() + (0 if how == "kill" else 20)
        while True:
            log = log_text(broker)[log_before:]
            match = re.search(pattern, log)
            if match or time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        assert match, f"no recovery report for {damaged.name} in the broker log:\n{log[-3000:]}"
        assert int(match.group(1)) == keep_until
        assert int(match.group(2)) == len(expected)
        for path in later:
            assert f"segment {path.name}" in log and "deleted: it follows damaged data" in log
            assert not path.exists()

        # Everything before the damage is served unchanged, nothing after it.
        values = [v for _o, v in read_values(broker.port, TOPIC, 0)]
        assert values == expected
        assert fetch(broker.port, TOPIC, 0, 0)["high_watermark"] == len(expected)
        # The other topic is whole.
        intact = [v for _o, v in read_values(broker.port, INTACT, 0)]
        assert len(intact) == BATCHES * RECORDS_PER_BATCH
        # Appends continue right at the cut.
        part = produce(broker.port, TOPIC, 0, bytes(make_batch([b"after-recovery"])))
        assert part["error_code"] == 0 and part["base_offset"] == len(expected)
        assert read_values(broker.port, TOPIC, 0)[-1] == (len(expected), b"after-recovery")
        # Committed offsets survive the crash and the recovery.
        assert _committed(broker) == COMMITS
    finally:
        broker.kill()


@groups_ready
def test_committed_offsets_survive_repeated_kills(tmp_path):
    """Offsets committed, then kill -9 three times, with a torn data tail each time."""
    rng = random.Random(3)
    data_dir = tmp_path / "data"
    broker = BrokerProcess(data_dir).start()
    try:
        _fill(broker)
        _commit_offsets(broker)
        for _ in range(3):
            broker.kill()
            _scenario_cut_tail(data_dir, rng)
            broker.start()
            assert _committed(broker) == COMMITS
    finally:
        broker.kill()


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_damaged_indexes_are_rebuilt(tmp_path, how):
    """Garbage in .index/.timeindex files loses nothing: indexes are derived data."""
    rng = random.Random(how)
    data_dir = tmp_path / "data"
    broker = BrokerProcess(data_dir).start()
    try:
        _fill(broker)
        if how == "stop":
            assert broker.stop() == 0
        else:
            broker.kill()
        partition_dir = data_dir / f"{TOPIC}-0"
        indexes = sorted(partition_dir.glob("*.index")) + sorted(partition_dir.glob("*.timeindex"))
        assert indexes
        for path in indexes:
            choice = rng.randrange(3)
            if choice == 0:
                path.write_bytes(rng.randbytes(rng.randrange(1, 200)))
            elif choice == 1:
                path.write_bytes(b"")
            else:
                with open(path, "ab") as f:
                    f.write(rng.randbytes(7))  # not a whole entry
        broker.start()
        values = [v for _o, v in read_values(broker.port, TOPIC, 0)]
        assert values == [_value(b, r) for b in range(BATCHES) for r in range(RECORDS_PER_BATCH)]
        # Reads from the middle use the index: every batch start is found.
        for offset in range(0, BATCHES * RECORDS_PER_BATCH, 37):
            first = read_values(broker.port, TOPIC, 0, start=offset)[0]
            assert first[0] == offset
    finally:
        broker.kill()
