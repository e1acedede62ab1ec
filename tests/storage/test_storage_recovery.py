"""Crash tests: cut and corrupt the files of a partition, reopen, and check that every
batch before the damage is served intact and nothing after it."""

from __future__ import annotations

import logging
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import LogConfig, PartitionLog
from storage_testkit import decode, make_batch, read_all
from wire.records import iter_headers

T0 = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=2_000, index_interval_bytes=300)


@dataclass
class Stored:
    segment: str  # file name of the .log
    position: int
    data: bytes
    base_offset: int
    next_offset: int


def build_log(directory: Path, seed: int = 7, batches: int = 60) -> list[Stored]:
    """A log of varied batches over several segments, cleanly closed; returns what is where."""
    rng = random.Random(seed)
    plog = PartitionLog.open(directory, CONFIG, now_ms=T0)
    for i in range(batches):
        n = rng.randint(1, 8)
        plog.append(make_batch(n, value_size=rng.randint(1, 60), timestamp=T0 + i * 10), now_ms=T0)
    stored = layout(plog)
    plog.close()
    assert len({s.segment for s in stored}) >= 4
    return stored


def layout(plog: PartitionLog) -> list[Stored]:
    out = []
    for segment in plog.segments:
        data = os.pread(segment.fd, segment.size, 0)
        for pos, header in iter_headers(data):
            out.append(Stored(segment.log_path.name, pos, data[pos:pos + header.size],
                              header.base_offset, header.next_offset))
    return out


def crash_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def check_prefix(directory: Path, stored: list[Stored], survivors: int, *, clean: bool = False) -> PartitionLog:
    """Reopen and check the log serves exactly the first ``survivors`` batches."""
    plog = PartitionLog.open(directory, CONFIG, clean=clean, now_ms=T0)
    expected = b"".join(s.data for s in stored[:survivors])
    assert plog.log_end_offset == (stored[survivors - 1].next_offset if survivors else 0)
    assert read_all(plog) == expected
    assert read_all(plog, max_bytes=1) == expected
    # Every surviving offset is readable on its own, through the (rebuilt) indexes.
    for s in stored[:survivors]:
        for offset in range(s.base_offset, s.next_offset):
            assert plog.read(offset, 1)[:len(s.data)] == s.data
    # The log takes appends after recovery, at the right offset.
    result = plog.append(make_batch(2), now_ms=T0)
    base_offset = result[0]
    assert base_offset == plog.log_end_offset - 2
    assert decode(plog.read(base_offset, 1 << 20))[0][0] == base_offset
    return plog


def damaged_index(stored: list[Stored], segment: str, position: int) -> int:
    """How many batches survive damage at ``position`` of ``segment``."""
    for i, s in enumerate(stored):
        if s.segment == segment and s.position + len(s.data) > position:
            return i
    # Past the last batch of that segment: everything up to its end survives, but nothing
    # later may (the next segment no longer follows on... unless nothing was lost).
    last = max(i for i, s in enumerate(stored) if s.segment == segment)
    return last + 1


class Pristine(tuple):
    def __repr__(self) -> str:  # keep hypothesis' falsifying-example output short
        return f"<pristine log at {self[0]}>"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pristine") / "t-0"
    stored = build_log(directory)
    return Pristine((directory, stored))


def segment_names(stored: list[Stored]) -> list[str]:
    return sorted({s.segment for s in stored})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_cut_at_random_position(pristine, tmp_path_factory, data):
    src, stored = pristine
    directory = crash_copy(src, tmp_path_factory.mktemp("cut") / "t-0")
    names = segment_names(stored)
    name = data.draw(st.sampled_from(names))
    size = os.path.getsize(directory / name)
    position = data.draw(st.integers(0, size))
    os.truncate(directory / name, position)
    survivors = damaged_index(stored, name, position)
    if position == size:
        survivors = len(stored)
    plog = check_prefix(directory, stored, survivors)
    plog.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_flipped_bytes(pristine, tmp_path_factory, data):
    src, stored = pristine
    directory = crash_copy(src, tmp_path_factory.mktemp("flip") / "t-0")
    names = segment_names(stored)
    spots = set()
    for _ in range(data.draw(st.integers(1, 3))):
        name = data.draw(st.sampled_from(names))
        size = os.path.getsize(directory / name)
        spots.add((name, data.draw(st.integers(0, size - 1))))
    for name, position in spots:
        flip = data.draw(st.integers(1, 255))
        with open(directory / name, "r+b") as f:
            f.seek(position)
            byte = f.read(1)[0]
            f.seek(position)
            f.write(bytes([byte ^ flip]))
    survivors = min(damaged_index(stored, name, pos) for name, pos in spots)
    plog = check_prefix(directory, stored, survivors)
    plog.close()


def test_torn_tail_is_logged(pristine, tmp_path, caplog):
    src, stored = pristine
    directory = crash_copy(src, tmp_path / "t-0")
    last = segment_names(stored)[-1]
    size = os.path.getsize(directory / last)
    with open(directory / last, "ab") as f:
        f.write(stored[0].data[:40])  # half a header: a write the crash interrupted
    with caplog.at_level(logging.WARNING, logger="storage"):
        plog = check_prefix(directory, stored, len(stored))
    assert any("cut at position %d" % size in r.getMessage() for r in caplog.records)
    plog.close()


def test_damage_in_middle_segment_drops_later_segments(pristine, tmp_path, caplog):
    src, stored = pristine
    directory = crash_copy(src, tmp_path / "t-0")
    names = segment_names(stored)
    victim = names[1]
    first = next(i for i, s in enumerate(stored) if s.segment == victim)
    target = stored[first + 1]
    with open(directory / victim, "r+b") as f:
        f.seek(target.position + 70)
        byte = f.read(1)[0]
        f.seek(target.position + 70)
        f.write(bytes([byte ^ 0xFF]))
    with caplog.at_level(logging.WARNING, logger="storage"):
        plog = check_prefix(directory, stored, first + 1)
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "CRC32C mismatch" in messages
    assert "follows damaged data" in messages
    assert not (directory / names[-1]).exists()
    plog.close()


@pytest.mark.parametrize("clean", [False, True])
def test_missing_and_corrupt_indexes_are_rebuilt(pristine, tmp_path, clean):
    src, stored = pristine
    directory = crash_copy(src, tmp_path / "t-0")
    names = segment_names(stored)
    (directory / names[0].replace(".log", ".index")).unlink()
    (directory / names[1].replace(".log", ".timeindex")).unlink()
    with open(directory / names[2].replace(".log", ".index"), "ab") as f:
        f.write(b"\x01\x02\x03")  # ragged size
    index3 = directory / names[3].replace(".log", ".index")
    raw = bytearray(index3.read_bytes())
    assert len(raw) >= 8
    raw[4:8] = (7).to_bytes(4, "big")  # first entry points inside a batch
    index3.write_bytes(bytes(raw))
    plog = check_prefix(directory, stored, len(stored), clean=clean)
    assert plog.offset_for_timestamp(T0 + 300) is not None
    plog.close()


def test_plausible_but_wrong_index_entry_is_caught_at_read(pristine, tmp_path):
    """After a clean shutdown closed segments' indexes are trusted if they look sane; an entry
    that is monotonic but points at the wrong batch is caught when a read uses it."""
    src, stored = pristine
    directory = crash_copy(src, tmp_path / "t-0")
    name = segment_names(stored)[0]
    path = directory / name.replace(".log", ".index")
    raw = bytearray(path.read_bytes())
    entries = len(raw) // 8
    assert entries >= 2
    # Make the first entry point at the second entry's batch (still increasing).
    second_pos = int.from_bytes(raw[12:16], "big")
    raw[4:8] = (second_pos - 1).to_bytes(4, "big")
    path.write_bytes(bytes(raw))
    plog = PartitionLog.open(directory, CONFIG, clean=True, now_ms=T0)
    assert read_all(plog, max_bytes=1) == b"".join(s.data for s in stored)
    for s in stored:
        assert plog.read(s.base_offset, 1)[:len(s.data)] == s.data
    plog.close()


def test_interrupted_compaction_swap_is_finished_or_undone(pristine, tmp_path):
    src, stored = pristine
    names = segment_names(stored)
    # Undo: the cleaned file is still there, so the swap never started.
    directory = crash_copy(src, tmp_path / "a" / "t-0")
    base = names[0][:20]
    (directory / f"{base}.log.cleaned").write_bytes(b"garbage")
    (directory / f"{base}.swap").write_text('{"replaced": [%d, %d]}' % (int(names[0][:20]), int(names[1][:20])))
    check_prefix(directory, stored, len(stored)).close()
    assert not list(directory.glob("*.cleaned")) and not list(directory.glob("*.swap"))
    # Finish: the cleaned file was renamed into place; the other replaced segment goes.
    directory = crash_copy(src, tmp_path / "b" / "t-0")
    first_two = [s for s in stored if s.segment in names[:2]]
    (directory / names[0]).write_bytes(b"".join(s.data for s in first_two))
    (directory / f"{base}.swap").write_text('{"replaced": [%d, %d]}' % (int(names[0][:20]), int(names[1][:20])))
    (directory / names[0].replace(".log", ".index")).unlink()
    plog = PartitionLog.open(directory, CONFIG, clean=False, now_ms=T0)
    assert not (directory / names[1]).exists()
    assert read_all(plog) == b"".join(s.data for s in stored)
    plog.close()


def test_leftover_files_are_cleared(pristine, tmp_path):
    src, stored = pristine
    directory = crash_copy(src, tmp_path / "t-0")
    (directory / "log-start-offset-checkpoint.tmp").write_text("junk")
    (directory / "00000000000000099999.index").write_bytes(b"\x00" * 8)  # no .log
    check_prefix(directory, stored, len(stored)).close()
    assert not (directory / "log-start-offset-checkpoint.tmp").exists()
    assert not (directory / "00000000000000099999.index").exists()


def test_everything_lost_restarts_at_log_start_checkpoint(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", CONFIG, now_ms=T0)
    for _ in range(30):
        plog.append(make_batch(3, value_size=50), now_ms=T0)
    plog.delete_records_before(40)
    plog.close()
    for path in (tmp_path / "t-0").glob("*.log"):
        os.truncate(path, 0)
    plog = PartitionLog.open(tmp_path / "t-0", CONFIG, now_ms=T0)
    # The first segment survives (empty); the later ones follow damaged data and go.
    assert plog.log_end_offset == plog.segments[0].base_offset
    assert plog.log_start_offset == plog.log_end_offset
    plog.close()
