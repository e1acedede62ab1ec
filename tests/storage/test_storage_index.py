"""The sparse indexes' two halves: merged array columns and the list tail new entries go to
first. Every query answers as if there were one sorted list, before and after merges and
truncations, also while another thread appends; the file holds exactly the entries."""

from __future__ import annotations

import random
import sys
import threading
from bisect import bisect_right

import pytest

from storage.index import FLUSH_PENDING_AT, OffsetIndex, TimeIndex


def expected_lookup(entries, offset):
    i = bisect_right([k for k, _ in entries], offset) - 1
    return entries[i] if i >= 0 else (-1, 0)


def expected_at_or_before(entries, position):
    i = bisect_right([v for _, v in entries], position) - 1
    return entries[i] if i >= 0 else (-1, 0)


def file_entries(index) -> list[tuple[int, int]]:
    return index.read_file() or []


@pytest.mark.parametrize("seed", range(6))
def test_offset_index_answers_as_one_list(tmp_path, seed):
    rng = random.Random(seed)
    base = rng.choice([0, 1000, 2**40])
    index = OffsetIndex(tmp_path / "x.index", base)
    entries: list[tuple[int, int]] = []
    key, position = base + rng.randrange(3), rng.randrange(200)
    for step in range(3000):
        action = rng.random()
        if action < 0.8:
            index.append(key, position)
            entries.append((key, position))
            key += rng.randrange(1, 50)
            position += rng.randrange(1, 5000)
        elif action < 0.85:
            index.flush_pending()
            assert file_entries(index) == entries
        elif action < 0.87 and entries:
            cut = entries[rng.randrange(len(entries))][1] + rng.choice([0, 1])
            index.truncate_to_position(cut)
            entries = [e for e in entries if e[1] < cut]
            assert file_entries(index) == entries
            if entries:
                key, position = entries[-1][0] + 1, entries[-1][1] + 1
        high_key = key + 10
        for q in (rng.randrange(base - 2, high_key), key - 1):
            assert index.lookup(q) == expected_lookup(entries, q), (step, q)
        p = rng.randrange(-1, position + 10)
        assert index.entry_at_or_before_position(p) == expected_at_or_before(entries, p), (step, p)
        assert index.last_entry == (entries[-1] if entries else None)
        assert len(index) == len(entries)
        if step % 97 == 0:
            assert list(zip(index.keys, index.values)) == entries
    index.flush_pending()
    assert file_entries(index) == entries
    assert len(index._tail[0]) == 0  # flushed: everything merged


def test_tail_is_merged_and_written_every_flush_pending_at(tmp_path):
    index = OffsetIndex(tmp_path / "x.index", 0)
    for i in range(FLUSH_PENDING_AT - 1):
        index.append(i, i * 100)
    assert file_entries(index) == [] and len(index._tail[0]) == FLUSH_PENDING_AT - 1
    index.append(FLUSH_PENDING_AT - 1, (FLUSH_PENDING_AT - 1) * 100)
    assert len(index._tail[0]) == 0
    assert file_entries(index) == [(i, i * 100) for i in range(FLUSH_PENDING_AT)]


def test_time_index_answers_as_one_list(tmp_path):
    rng = random.Random(3)
    index = TimeIndex(tmp_path / "x.timeindex", 500)
    entries = []
    ts, offset = 1_700_000_000_000, 500
    for step in range(2 * FLUSH_PENDING_AT + 100):
        candidate = ts + rng.randrange(-20, 40)
        before = index.last_entry
        index.maybe_append(candidate, offset)
        if before is None or (candidate > before[0] and offset >= before[1]):
            entries.append((candidate, offset))
            ts = candidate
        offset += rng.randrange(1, 10)
        assert index.last_entry == (entries[-1] if entries else None)
        q = rng.randrange(1_700_000_000_000 - 10, ts + 50)
        i = bisect_right([t for t, _ in entries], q) - 1
        assert index.lookup(q) == (entries[i][1] if i >= 0 else 500), (step, q)
        if rng.random() < 0.02:
            cut = offset - rng.randrange(0, 30)
            index.truncate_to_offset(cut)
            entries = [e for e in entries if e[1] < cut]
            ts = entries[-1][0] if entries else ts
    index.flush_pending()
    assert file_entries(index) == entries


def test_readers_on_another_thread_never_miss_an_entry(tmp_path):
    """Values are 3 x keys: a reader that paired a key with the wrong value, or missed an
    entry appended before its lookup started, fails."""
    index = OffsetIndex(tmp_path / "x.index", 0)
    total = 20 * FLUSH_PENDING_AT
    published = [0]  # keys < published[0] (step 2) are in the index
    errors: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        rng = random.Random(1)
        while not stop.is_set():
            known = published[0]
            if not known:
                continue
            q = rng.randrange(0, known * 2)
            key, value = index.lookup(q)
            best = min(q, known - 1) // 2 * 2  # keys are even
            if value != 3 * key or key < best or key > q:
                errors.append(f"lookup({q}) = {(key, value)} with keys below {known} published")
            key, value = index.entry_at_or_before_position(3 * q)
            if value != 3 * key or key < best or value > 3 * q:
                errors.append(f"entry_at_or_before_position({3 * q}) = {(key, value)}")

    thread = threading.Thread(target=reader)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as CPython allows: races show
    thread.start()
    try:
        for i in range(total):
            index.append(2 * i, 6 * i)
            published[0] = 2 * i + 1
            if i % 1000 == 999:
                index.truncate_to_position(10**12)  # a no-op cut: merges, keeps everything
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(switch)
    assert not errors, errors[:5]
    index.flush_pending()
    assert file_entries(index) == [(2 * i, 6 * i) for i in range(total)]
