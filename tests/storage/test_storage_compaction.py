"""The cleaner, on batches built by kafka-python's encoder and checked with its decoder."""

from __future__ import annotations

import os
import random
import threading

import pytest

from storage import AbortedTxn, LogConfig, PartitionLog
from storage.compaction import clean_log
from storage_testkit import decode, make_batch, read_all, stored_records, txn_batch, txn_marker
from wire.records import DELETE_HORIZON_MASK, iter_headers, parse_header

T0 = 1_700_000_000_000
DAY = 24 * 3600 * 1000


def compact_config(**kw) -> LogConfig:
    base = dict(cleanup_policy=frozenset({"compact"}), segment_bytes=1200, index_interval_bytes=100,
                min_cleanable_dirty_ratio=0.0, delete_retention_ms=DAY, file_delete_delay_ms=0)
    base.update(kw)
    return LogConfig(**base)


def expected_after_clean(history: list[tuple[int, bytes, bytes | None]], first_uncleanable: int):
    """Records a correct cleaner keeps: the latest per key below first_uncleanable, and
    everything at or above it."""
    latest: dict[bytes, int] = {}
    for offset, key, _ in history:
        if offset < first_uncleanable:
            latest[key] = offset
    return [(o, k, v) for o, k, v in history if o >= first_uncleanable or latest[k] == o]


def write_history(plog: PartitionLog, rng: random.Random, batches: int, keys: int, *, compression: int = 0,
                  tombstone_rate: float = 0.0, now_ms: int = T0):
    history = []
    for _ in range(batches):
        records = []
        for _ in range(rng.randint(1, 5)):
            key = b"key-%d" % rng.randrange(keys)
            value = None if rng.random() < tombstone_rate else b"value-%d" % rng.randrange(10**6)
            records.append((key, value))
        result = plog.append(make_batch(records, compression=compression, timestamp=now_ms), now_ms=now_ms)
        for i, (key, value) in enumerate(records):
            history.append((result[0] + i, key, value))
    return history


@pytest.mark.parametrize("compression", [0, 1, 3])  # none, gzip, lz4 (kafka-python codecs)
def test_keeps_latest_per_key_and_preserves_offsets(tmp_path, compression):
    rng = random.Random(compression)
    plog = PartitionLog.open(tmp_path / "c-0", compact_config(), now_ms=T0)
    history = write_history(plog, rng, 80, 12, compression=compression)
    segments_before = len(plog.segments)
    codecs = {h.base_offset: h.compression for _, h in iter_headers(read_all(plog))}
    assert compression == 0 or any(codecs.values())
    first_uncleanable = plog.active.base_offset
    before_end = plog.log_end_offset
    stats = clean_log(plog, T0)
    assert stats is not None and stats.records_removed > 0
    kept = [(o, k, v) for o, _ts, k, v in decode(read_all(plog))]
    assert kept == expected_after_clean(history, first_uncleanable)
    assert plog.log_end_offset == before_end and plog.log_start_offset == 0
    assert len(plog.segments) < segments_before  # small cleaned segments were merged
    # Rewritten batches keep their codec and their offset range.
    for _, header in iter_headers(read_all(plog)):
        assert header.compression == codecs[header.base_offset]
    # Reading at an offset whose record was removed gives the next batch holding a later one.
    gone = sorted(set(o for o, _, _ in history) - set(o for o, _, _ in kept))
    for offset in gone[:20]:
        data = plog.read(offset, 1)
        header = parse_header(data)
        assert header.last_offset >= offset
    # A restart (clean or crashed) serves the same: gaps below the cleaner checkpoint are legal.
    content = read_all(plog)
    plog.close()
    for clean in (True, False):
        plog = PartitionLog.open(tmp_path / "c-0", compact_config(), clean=clean, now_ms=T0)
        assert read_all(plog) == content
        assert plog.log_end_offset == before_end
        result = plog.append(make_batch(1), now_ms=T0)
        assert result[0] == before_end
        plog.truncate_to(before_end)
        plog.close()


def test_second_pass_only_when_dirty_enough(tmp_path):
    rng = random.Random(1)
    plog = PartitionLog.open(tmp_path / "c-0", compact_config(min_cleanable_dirty_ratio=0.5), now_ms=T0)
    write_history(plog, rng, 60, 5)
    assert clean_log(plog, T0) is not None
    assert clean_log(plog, T0) is None  # nothing new in closed segments
    history = write_history(plog, rng, 60, 5)
    assert history
    assert clean_log(plog, T0) is not None


def test_max_compaction_lag_overrides_the_dirty_ratio(tmp_path):
    config = compact_config(min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=60_000)
    plog = PartitionLog.open(tmp_path / "c-0", config, now_ms=T0)
    for i in range(3):
        plog.append(make_batch([(b"k", b"%d" % i)], timestamp=T0), now_ms=T0)
    plog.roll(now_ms=T0)
    plog.append(make_batch([(b"k", b"3")], timestamp=T0), now_ms=T0)
    plog.roll(now_ms=T0)
    plog.append(make_batch(1), now_ms=T0)
    plog.write_cleaned_offset(3)  # the first segment counts as clean: the ratio is below 1.0
    assert clean_log(plog, T0 + 1000) is None
    assert clean_log(plog, T0 + 60_001) is not None
    assert [o for o, *_ in decode(read_all(plog))] == [3, 4]


def test_tombstones_get_a_delete_horizon_then_go(tmp_path):
    config = compact_config(delete_retention_ms=1000)
    plog = PartitionLog.open(tmp_path / "c-0", config, now_ms=T0)
    plog.append(make_batch([(b"a", b"1"), (b"b", b"1")]), now_ms=T0)
    plog.append(make_batch([(b"a", None)]), now_ms=T0)  # tombstone for a
    plog.roll(now_ms=T0)
    plog.append(make_batch([(b"c", b"1")]), now_ms=T0)
    clean_log(plog, T0 + 10)
    records = decode(read_all(plog))
    assert [(o, k, v) for o, _, k, v in records] == [(1, b"b", b"1"), (2, b"a", None), (3, b"c", b"1")]
    headers = [h for _, h in iter_headers(read_all(plog))]
    tomb = next(h for h in headers if h.base_offset == 2)
    assert tomb.attributes & DELETE_HORIZON_MASK and tomb.base_timestamp == T0 + 10 + 1000
    assert records[1][1] == T0  # the record keeps its own timestamp (delta from the horizon)
    # Before the horizon nothing changes; after it, the tombstone goes.
    assert plog.next_delete_horizon_ms == T0 + 1010
    clean_log(plog, T0 + 500)
    assert [o for o, *_ in decode(read_all(plog))] == [1, 2, 3]
    stats = clean_log(plog, T0 + 1011)
    assert stats is not None and stats.tombstones_removed == 1
    assert [(o, k) for o, _, k, _ in decode(read_all(plog))] == [(1, b"b"), (3, b"c")]


def test_last_batch_of_a_producer_is_kept_empty(tmp_path):
    plog = PartitionLog.open(tmp_path / "c-0", compact_config(), now_ms=T0)
    plog.append(make_batch([(b"x", b"1")], producer_id=7, producer_epoch=0, base_sequence=0), now_ms=T0)
    plog.append(make_batch([(b"y", b"1"), (b"z", b"1")], producer_id=7, producer_epoch=0, base_sequence=1), now_ms=T0)
    plog.append(make_batch([(b"y", b"2"), (b"z", b"2"), (b"x", b"2")]), now_ms=T0)  # no producer id
    plog.roll(now_ms=T0)
    plog.append(make_batch(1), now_ms=T0)
    clean_log(plog, T0)
    headers = [h for _, h in iter_headers(read_all(plog))]
    # Producer 7's first batch is gone; its last survives empty with its sequence state.
    assert [(h.base_offset, h.record_count, h.producer_id) for h in headers[:2]] == [(1, 0, 7), (3, 3, -1)]
    empty = headers[0]
    assert (empty.last_offset_delta, empty.base_sequence, empty.last_sequence) == (1, 1, 2)
    # kafka-python reads the empty batch without complaint.
    assert [o for o, *_ in decode(read_all(plog))] == [3, 4, 5, 6]


def test_min_compaction_lag(tmp_path):
    plog = PartitionLog.open(tmp_path / "c-0", compact_config(min_compaction_lag_ms=60_000), now_ms=T0)
    for ts in (T0, T0 + 100_000):
        plog.append(make_batch([(b"k", b"1")], timestamp=ts), now_ms=ts)
        plog.append(make_batch([(b"k", b"2")], timestamp=ts), now_ms=ts)
        plog.roll(now_ms=ts)
    plog.append(make_batch(1), now_ms=T0 + 100_000)
    clean_log(plog, T0 + 100_000)
    # Only the first segment was old enough: it lost offset 0; offsets 2, 3 (young) stay.
    assert [o for o, *_ in decode(read_all(plog))] == [1, 2, 3, 4]


def test_reads_during_compaction_never_fail(tmp_path):
    rng = random.Random(3)
    plog = PartitionLog.open(tmp_path / "c-0", compact_config(segment_bytes=3000), now_ms=T0)
    write_history(plog, rng, 200, 8)
    stop = threading.Event()
    errors = []

    def reader():
        try:
            while not stop.is_set():
                offset = rng.randrange(plog.log_end_offset)
                data = plog.read(offset, 500)
                headers = [h for _, h in iter_headers(data, check_crc=True)]
                assert headers[0].last_offset >= offset
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(5):
            write_history(plog, rng, 40, 8)
            clean_log(plog, T0, force=True)
    finally:
        stop.set()
        thread.join()
    assert not errors, errors[0]


def test_delete_policy_topics_are_not_compacted(tmp_path):
    plog = PartitionLog.open(tmp_path / "d-0", LogConfig(segment_bytes=200), now_ms=T0)
    for _ in range(5):
        plog.append(make_batch([(b"k", b"v")]), now_ms=T0)
    assert clean_log(plog, T0, force=True) is None


# -- transactions (Kafka's CleanedTransactionMetadata) ---------------------------------------

def txnindex_files(plog: PartitionLog) -> list[str]:
    return sorted(p.name for p in plog.directory.iterdir() if p.name.endswith(".txnindex"))


def build_transactions(plog: PartitionLog) -> tuple[AbortedTxn, AbortedTxn]:
    """Offsets: 0 a=v1 (plain) | 1-2 P1 a,b aborted | roll | 3 ABORT P1 | 4-5 P2 c=1,c=2 |
    6 COMMIT P2 | 7 P3 e aborted | 8 ABORT P3 | roll | 9 P1 d | 10 COMMIT P1 | 11 P2 f | 12 COMMIT P2.
    P3 never writes again: its aborted batch is its last data batch."""
    def append(batch) -> int:
        return plog.append(batch, now_ms=T0)[0]

    append(make_batch([(b"a", b"v1")], timestamp=T0))
    append(txn_batch(1, [(b"a", b"aborted"), (b"b", b"aborted")], timestamp=T0))
    plog.roll(now_ms=T0)
    marker = append(txn_marker(1, commit=False, timestamp=T0))
    first = AbortedTxn(1, 1, marker, marker + 1)
    plog.append_aborted_txn(first)
    append(txn_batch(2, [(b"c", b"1"), (b"c", b"2")], timestamp=T0))
    append(txn_marker(2, commit=True, timestamp=T0))
    append(txn_batch(3, [(b"e", b"aborted")], timestamp=T0))
    marker = append(txn_marker(3, commit=False, timestamp=T0))
    second = AbortedTxn(3, 7, marker, marker + 1)
    plog.append_aborted_txn(second)
    plog.roll(now_ms=T0)
    append(txn_batch(1, [(b"d", b"x")], base_sequence=2, timestamp=T0))
    append(txn_marker(1, commit=True, timestamp=T0))
    append(txn_batch(2, [(b"f", b"y")], base_sequence=2, timestamp=T0))
    append(txn_marker(2, commit=True, timestamp=T0))
    assert plog.log_end_offset == 13
    return first, second


ACTIVE_TAIL = [(9, b"d", b"x", "data"), (10, None, None, "COMMIT"), (11, b"f", b"y", "data"), (12, None, None, "COMMIT")]


def plain(records):
    """Control records' keys and values are the marker's, not ours: compare kinds only."""
    return [(o, k, v, kind) if kind == "data" else (o, None, None, kind) for o, k, v, kind in records]


def test_aborted_data_goes_markers_stay_while_their_data_does(tmp_path):
    config = compact_config(delete_retention_ms=DAY)
    plog = PartitionLog.open(tmp_path / "c-0", config, now_ms=T0)
    first, second = build_transactions(plog)

    stats = clean_log(plog, T0, force=True)
    assert stats is not None and stats.aborted_batches_removed == 2
    # Pass 1: the aborted a=aborted never shadowed the committed a=v1; P1's aborted batch
    # is gone, P3's (its last data batch) stays empty; committed transactional data is
    # compacted like any data (c=1 went); markers whose data was here stay, and so do the
    # index entries of the ABORT ones (now in the cleaned segment at 0).
    assert plain(stored_records(read_all(plog))) == [
        (0, b"a", b"v1", "data"), (3, None, None, "ABORT"), (5, b"c", b"2", "data"), (6, None, None, "COMMIT"),
        (8, None, None, "ABORT"), *ACTIVE_TAIL]
    headers = {h.base_offset: h for _, h in iter_headers(read_all(plog))}
    assert headers[7].record_count == 0 and headers[7].producer_id == 3
    assert plog.collect_aborted_txns(0, 13) == [first, second]
    assert txnindex_files(plog) == [f"{0:020d}.txnindex"]
    assert not any(h.attributes & DELETE_HORIZON_MASK for h in headers.values())

    # Pass 2: P1's ABORT marker has no data left: it becomes a tombstone (delete horizon)
    # and its entry goes; P3's empty batch still holds its marker and entry; P2's COMMIT
    # marker stays while c=2 does.
    clean_log(plog, T0, force=True)
    headers = {h.base_offset: h for _, h in iter_headers(read_all(plog))}
    assert headers[3].attributes & DELETE_HORIZON_MASK and headers[3].base_timestamp == T0 + DAY
    assert not headers[6].attributes & DELETE_HORIZON_MASK
    assert plog.collect_aborted_txns(0, 13) == [second]
    assert plog.next_delete_horizon_ms == T0 + DAY

    # Before the horizon nothing changes; after it (no force needed) the marker goes.
    clean_log(plog, T0 + DAY - 1, force=True)
    assert 3 in {h.base_offset for _, h in iter_headers(read_all(plog))}
    stats = clean_log(plog, T0 + DAY)
    assert stats is not None and stats.markers_removed == 1
    assert plain(stored_records(read_all(plog))) == [
        (0, b"a", b"v1", "data"), (5, b"c", b"2", "data"), (6, None, None, "COMMIT"), (8, None, None, "ABORT"),
        *ACTIVE_TAIL]
    assert plog.collect_aborted_txns(0, 13) == [second]

    # A restart (clean or crashed) serves the same and knows the same aborted transaction.
    content = read_all(plog)
    plog.close()
    for clean in (True, False):
        plog = PartitionLog.open(tmp_path / "c-0", config, clean=clean, now_ms=T0)
        assert read_all(plog) == content
        assert plog.collect_aborted_txns(0, 13) == [second]
        plog.close()


def test_marker_of_a_producer_whose_last_batch_it_is_stays_empty(tmp_path):
    config = compact_config(delete_retention_ms=1000)
    plog = PartitionLog.open(tmp_path / "c-0", config, now_ms=T0)
    plog.append(txn_batch(4, [(b"k", b"aborted")], timestamp=T0), now_ms=T0)
    plog.append(make_batch([(b"k", b"plain")], timestamp=T0), now_ms=T0)
    plog.roll(now_ms=T0)
    marker = plog.append(txn_marker(4, commit=False, timestamp=T0), now_ms=T0)[0]
    plog.append_aborted_txn(AbortedTxn(4, 0, marker, marker + 1))
    plog.append(txn_batch(5, [(b"z", b"1")], timestamp=T0), now_ms=T0)  # keeps the marker's segment closed
    plog.append(txn_marker(5, commit=True, timestamp=T0), now_ms=T0)
    plog.roll(now_ms=T0)
    plog.append(make_batch(1), now_ms=T0)
    for now in (T0, T0, T0 + 2000):  # data kept empty each time, so the marker stays
        clean_log(plog, now, force=True)
    headers = {h.base_offset: h for _, h in iter_headers(read_all(plog))}
    # Producer 4's aborted batch is its last data batch: kept empty (its sequence), so the
    # ABORT marker stays too, as in Kafka; the plain record is not shadowed.
    assert headers[0].record_count == 0 and headers[marker].record_count == 1
    assert [(o, k, v) for o, k, v, kind in stored_records(read_all(plog)) if kind == "data"][0] == (1, b"k", b"plain")
    assert plog.collect_aborted_txns(0, plog.log_end_offset) == [AbortedTxn(4, 0, marker, marker + 1)]


def test_nothing_at_or_past_the_first_unstable_offset_is_cleaned(tmp_path):
    plog = PartitionLog.open(tmp_path / "c-0", compact_config(), now_ms=T0)
    plog.append(make_batch([(b"a", b"1"), (b"a", b"2")], timestamp=T0), now_ms=T0)
    plog.roll(now_ms=T0)
    ongoing = plog.append(txn_batch(1, [(b"a", b"ongoing")], timestamp=T0), now_ms=T0)[0]
    plog.append(make_batch([(b"b", b"1"), (b"b", b"2")], timestamp=T0), now_ms=T0)
    plog.roll(now_ms=T0)
    plog.append(make_batch([(b"b", b"3")], timestamp=T0), now_ms=T0)
    plog.roll(now_ms=T0)
    plog.append(make_batch(1), now_ms=T0)
    plog.first_unstable_offset = ongoing  # the server: producer 1's transaction is open
    unstable = [s for s in plog.segments if s.base_offset >= ongoing]
    before = {s.log_path.name: s.log_path.read_bytes() for s in unstable}
    clean_log(plog, T0, force=True)
    # Only the segment wholly below the transaction was cleaned; the rest is byte for byte
    # what it was, and the open transaction's a=ongoing shadowed nothing.
    assert {name: (plog.directory / name).read_bytes() for name in before} == before
    assert [(o, k, v) for o, k, v, _ in stored_records(read_all(plog))][:4] == [
        (1, b"a", b"2"), (2, b"a", b"ongoing"), (3, b"b", b"1"), (4, b"b", b"2")]
    # Once it commits (the server clears the offset), everything closed is cleanable.
    plog.append(txn_marker(1, commit=True, timestamp=T0), now_ms=T0)
    plog.roll(now_ms=T0)
    plog.append(make_batch(1), now_ms=T0)
    plog.first_unstable_offset = None
    clean_log(plog, T0, force=True)
    assert [(o, k, v) for o, k, v, kind in stored_records(read_all(plog)) if kind == "data"][:2] == [
        (2, b"a", b"ongoing"), (5, b"b", b"3")]


@pytest.mark.parametrize("crash_at", [1, 2, 3, 4])
def test_a_crash_during_a_swap_never_exposes_aborted_data(tmp_path, monkeypatch, crash_at):
    """Each rename of a swap may be the last before a crash: after recovery every aborted
    record still in the log is covered by an entry (the .txnindex is renamed before the
    .log, the point of no return)."""
    import storage.compaction as compaction

    plog = PartitionLog.open(tmp_path / "c-0", compact_config(), now_ms=T0)
    first, second = build_transactions(plog)
    before = read_all(plog)
    real_replace = os.replace
    calls = []

    def replace(src, dst):
        if str(src).endswith(".cleaned"):  # the swap's renames (not checkpoints' .tmp files)
            calls.append(dst)
            if len(calls) == crash_at:
                raise OSError("crash")
        real_replace(src, dst)

    monkeypatch.setattr(compaction.os, "replace", replace)
    with pytest.raises(OSError):
        clean_log(plog, T0, force=True)
    monkeypatch.undo()
    plog = PartitionLog.open(tmp_path / "c-0", compact_config(), clean=False, now_ms=T0)
    after = read_all(plog)
    assert plog.log_end_offset == 13
    # Undone or finished: every committed record the cleaner keeps is there either way.
    committed = {(0, b"a", b"v1", "data"), (5, b"c", b"2", "data"), (9, b"d", b"x", "data"), (11, b"f", b"y", "data")}
    assert committed <= set(stored_records(after)) <= set(stored_records(before))

    def check_covered():
        for _pos, header in iter_headers(read_all(plog)):
            for txn in (first, second):
                if header.producer_id == txn.producer_id and txn.first_offset <= header.base_offset < txn.last_offset:
                    assert txn in plog.collect_aborted_txns(header.base_offset, header.last_offset + 1), (crash_at, txn)

    check_covered()
    # A later pass removes the aborted data whichever way the swap went.
    clean_log(plog, T0, force=True)
    assert not [r for r in stored_records(read_all(plog)) if r[2] == b"aborted"]
    check_covered()
    assert second in plog.collect_aborted_txns(0, 13)  # P3's empty batch keeps it
    plog.close()


def read_committed(plog: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """What a read_committed consumer is given: data records, less those of the aborted
    transactions the log reports."""
    aborted = plog.collect_aborted_txns(plog.log_start_offset, plog.log_end_offset)
    out = []
    data = read_all(plog)
    for pos, header in iter_headers(data):
        if header.attributes & 0x20:
            continue
        for offset, key, value, _kind in stored_records(data[pos:pos + header.size]):
            if header.attributes & 0x10 and any(
                    t.producer_id == header.producer_id and t.first_offset <= offset <= t.last_offset for t in aborted):
                continue
            out.append((offset, key, value))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_transactional_history_cleans_to_the_latest_committed_record_per_key(tmp_path, seed):
    """Interleaved transactions of four producers (some left open) with plain records,
    spanning many segments and cleaner groups: the read_committed view after cleaning is
    the latest committed record per key below the first uncleanable offset, and every
    record at or past it (Kafka's cleaner keeps exactly these)."""
    rng = random.Random(seed)
    plog = PartitionLog.open(tmp_path / "c-0", compact_config(segment_bytes=rng.choice([600, 1200, 3000])), now_ms=T0)
    open_txns: dict[int, tuple[int, list]] = {}  # pid -> (first offset, records)
    committed: list[tuple[int, bytes, bytes]] = []
    for _ in range(250):
        pid = rng.randrange(5)
        if pid == 4:  # no producer: plain records
            records = [(b"k%d" % rng.randrange(8), b"plain-%d" % rng.randrange(1000)) for _ in range(rng.randint(1, 3))]
            base = plog.append(make_batch(records, timestamp=T0), now_ms=T0)[0]
            committed += [(base + i, k, v) for i, (k, v) in enumerate(records)]
        elif pid in open_txns and rng.random() < 0.35:
            commit = rng.random() < 0.5
            first, records = open_txns.pop(pid)
            marker = plog.append(txn_marker(pid, commit, timestamp=T0), now_ms=T0)[0]
            if commit:
                committed += records
            else:
                lso = min([f for f, _ in open_txns.values()] + [marker + 1])
                plog.append_aborted_txn(AbortedTxn(pid, first, marker, lso))
        else:
            records = [(b"k%d" % rng.randrange(8), b"txn-%d-%d" % (pid, rng.randrange(1000)))
                       for _ in range(rng.randint(1, 3))]
            base = plog.append(txn_batch(pid, records, timestamp=T0), now_ms=T0)[0]
            entry = open_txns.setdefault(pid, (base, []))
            entry[1].extend((base + i, k, v) for i, (k, v) in enumerate(records))
    unstable = min((first for first, _ in open_txns.values()), default=None)
    plog.first_unstable_offset = unstable
    plog.roll(now_ms=T0)
    plog.append(make_batch(1), now_ms=T0)
    segments = plog.segments
    first_uncleanable = next(segments[i].base_offset for i in range(len(segments))
                             if i == len(segments) - 1 or (unstable is not None and segments[i + 1].base_offset > unstable))
    before = [r for r in read_committed(plog) if r[0] >= first_uncleanable]

    latest: dict[bytes, int] = {}
    committed.sort()  # transactions' records joined it when they committed
    for offset, key, _ in committed:
        if offset < first_uncleanable:
            latest[key] = offset
    expected = [r for r in committed if r[0] < first_uncleanable and latest[r[1]] == r[0]] + before
    def markers_below() -> int:
        return sum(1 for r in stored_records(read_all(plog)) if r[0] < first_uncleanable and r[3] != "data")

    markers_before = markers_below()
    for now in (T0, T0 + 2 * DAY, T0 + 4 * DAY):  # markers are stamped, then go
        clean_log(plog, now, force=True)
        assert read_committed(plog) == expected, now
        # Nothing of an aborted transaction is left below the first uncleanable offset.
        gone = [r for r in stored_records(read_all(plog)) if r[0] < first_uncleanable and r[3] == "data"
                and r not in [(o, k, v, "data") for o, k, v in expected]]
        assert gone == []
    # Markers of transactions with no data left went (those of a producer's last batch stay).
    assert markers_below() < markers_before / 2
    plog.close()
