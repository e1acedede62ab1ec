"""The transaction index: Kafka's .txnindex bytes, lazy files, lookups across segments,
truncation, recovery and deletion with the segments."""

from __future__ import annotations

import logging
import os
import random

import pytest

from storage import AbortedTxn, LogConfig, LogManager, PartitionLog, TransactionIndex
from storage_testkit import make_batch, txn_batch, txn_marker

T0 = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=1_000, index_interval_bytes=200, file_delete_delay_ms=0)


def txnindex_files(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".txnindex"))


def abort_txn(plog: PartitionLog, pid: int, records: int = 3, *, lso: int | None = None) -> AbortedTxn:
    """A transaction of ``pid``: one data batch, then its ABORT marker, recorded as the
    server does right after appending the marker."""
    first = plog.append(txn_batch(pid, [(b"k%d" % i, b"aborted") for i in range(records)]), now_ms=T0)[0]
    marker = plog.append(txn_marker(pid, commit=False), now_ms=T0)[0]
    txn = AbortedTxn(pid, first, marker, marker + 1 if lso is None else lso)
    plog.append_aborted_txn(txn)
    return txn


def test_entry_bytes_are_kafkas(tmp_path):
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    assert not index.exists and not (tmp_path / "00000000000000000000.txnindex").exists()
    index.append(AbortedTxn(producer_id=7, first_offset=100, last_offset=150, last_stable_offset=120))
    index.append(AbortedTxn(producer_id=-2, first_offset=151, last_offset=1 << 40, last_stable_offset=1 << 40))
    # version int16, producerId int64, firstOffset int64, lastOffset int64, lastStableOffset int64
    first = (b"\x00\x00" + b"\x00" * 7 + b"\x07" + b"\x00" * 7 + b"\x64" + b"\x00" * 7 + b"\x96"
             + b"\x00" * 7 + b"\x78")
    second = (b"\x00\x00" + b"\xff" * 7 + b"\xfe" + b"\x00" * 7 + b"\x97" + b"\x00\x00\x01" + b"\x00" * 5
              + b"\x00\x00\x01" + b"\x00" * 5)
    assert len(first) == len(second) == 34
    assert (tmp_path / "00000000000000000000.txnindex").read_bytes() == first + second
    # A fresh index reads them back.
    again = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0, exists=True)
    assert again.entries == [AbortedTxn(7, 100, 150, 120), AbortedTxn(-2, 151, 1 << 40, 1 << 40)]


def test_append_order_collect_truncate(tmp_path):
    index = TransactionIndex(tmp_path / "00000000000000000010.txnindex", 10)
    for pid, first, last in ((1, 10, 20), (2, 15, 30), (3, 31, 40)):
        index.append(AbortedTxn(pid, first, last, last + 1))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(4, 35, 40, 41))  # lastOffset must increase
    assert [t.producer_id for t in index.collect(0, 100)] == [1, 2, 3]
    assert [t.producer_id for t in index.collect(21, 31)] == [2]  # lastOffset >= 21, firstOffset < 31
    assert [t.producer_id for t in index.collect(21, 32)] == [2, 3]
    assert index.collect(41, 100) == []
    assert index.truncate_to(30) == 2  # lastOffset >= 30 goes
    assert [t.producer_id for t in index.entries] == [1]
    assert os.path.getsize(index.path) == 34
    index.append(AbortedTxn(5, 25, 26, 27))
    assert index.truncate_to(0) == 2
    assert not index.exists and not index.path.exists()


def test_ragged_file_is_cut_to_whole_entries(tmp_path, caplog):
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path, 0)
    index.append(AbortedTxn(1, 0, 5, 6))
    index.append(AbortedTxn(1, 7, 9, 10))
    with open(path, "ab") as f:
        f.write(b"\x00" * 20)  # a torn third entry
    with caplog.at_level(logging.WARNING, logger="storage"):
        again = TransactionIndex(path, 0, exists=True)
        assert again.entries == [AbortedTxn(1, 0, 5, 6), AbortedTxn(1, 7, 9, 10)]
    assert "cut to 2 entries" in caplog.text
    assert os.path.getsize(path) == 68
    again.append(AbortedTxn(1, 11, 12, 13))  # appends land after the whole entries
    assert TransactionIndex(path, 0, exists=True).entries[-1] == AbortedTxn(1, 11, 12, 13)


def test_the_file_appears_with_the_first_abort_beside_its_segment(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", CONFIG, now_ms=T0)
    for _ in range(12):
        plog.append(make_batch(3, value_size=40), now_ms=T0)
    # A committed transaction writes no entry.
    plog.append(txn_batch(9, [(b"a", b"1")]), now_ms=T0)
    plog.append(txn_marker(9, commit=True), now_ms=T0)
    assert len(plog.segments) > 2
    assert txnindex_files(plog.directory) == []
    assert plog.collect_aborted_txns(0, plog.log_end_offset) == []
    txn = abort_txn(plog, 5)
    active = plog.active.base_offset
    assert txnindex_files(plog.directory) == [f"{active:020d}.txnindex"]
    assert plog.collect_aborted_txns(0, plog.log_end_offset) == [txn]
    # The marker's segment holds the entry even when later segments exist.
    plog.roll(now_ms=T0)
    plog.append(make_batch(1), now_ms=T0)
    assert plog.collect_aborted_txns(txn.last_offset, plog.log_end_offset) == [txn]
    assert plog.collect_aborted_txns(txn.last_offset + 1, plog.log_end_offset) == []
    with pytest.raises(ValueError):
        plog.append_aborted_txn(AbortedTxn(5, 0, plog.log_end_offset, plog.log_end_offset + 1))  # not in the log
    plog.close()


def build_txn_log(directory, seed: int = 3):
    """A log over many segments with interleaved transactions, some aborted; returns the
    log and the aborted transactions recorded."""
    rng = random.Random(seed)
    plog = PartitionLog.open(directory, CONFIG, now_ms=T0)
    open_txns: dict[int, int] = {}  # pid -> first offset
    aborted = []
    for _ in range(150):
        pid = rng.randrange(4)
        if pid in open_txns and rng.random() < 0.4:
            commit = rng.random() < 0.5
            marker = plog.append(txn_marker(pid, commit), now_ms=T0)[0]
            first = open_txns.pop(pid)
            if not commit:
                lso = min(list(open_txns.values()) + [marker + 1])
                txn = AbortedTxn(pid, first, marker, lso)
                plog.append_aborted_txn(txn)
                aborted.append(txn)
        else:
            result = plog.append(txn_batch(pid, [(b"k", b"v" * rng.randrange(1, 60))]), now_ms=T0)
            open_txns.setdefault(pid, result[0])
    return plog, aborted


def test_collect_across_segments_matches_a_scan_of_every_entry(tmp_path):
    plog, aborted = build_txn_log(tmp_path / "t-0")
    assert len(plog.segments) >= 5 and len(aborted) >= 5
    assert len(txnindex_files(plog.directory)) >= 3
    end = plog.log_end_offset
    for clean in (None, True, False):
        if clean is not None:  # again after a restart, loading the files lazily
            plog.close()
            plog = PartitionLog.open(tmp_path / "t-0", CONFIG, clean=clean, now_ms=T0)
            if clean:  # trusted segments are not scanned, so their entries wait to be asked for
                assert all(s.txn_index._entries is None for s in plog.segments[:-1] if s.txn_index.exists)
        rng = random.Random(5)
        for _ in range(200):
            start = rng.randrange(end + 1)
            upper = rng.randrange(start, end + 2)
            expected = [t for t in aborted if t.last_offset >= start and t.first_offset < upper]
            assert plog.collect_aborted_txns(start, upper) == expected, (start, upper)
    plog.close()


def test_no_aborted_transaction_means_no_index_work(tmp_path, monkeypatch):
    plog = PartitionLog.open(tmp_path / "t-0", CONFIG, now_ms=T0)
    for _ in range(20):
        plog.append(make_batch(3, value_size=40), now_ms=T0)
    plog.close()
    plog = PartitionLog.open(tmp_path / "t-0", CONFIG, clean=True, now_ms=T0)

    def no_io(*_args, **_kwargs):
        raise AssertionError("the transaction index was read")

    monkeypatch.setattr(TransactionIndex, "_load", no_io)
    assert plog.collect_aborted_txns(0, plog.log_end_offset) == []
    plog.truncate_aborted_txns(0)
    plog.close()


def test_truncate_aborted_txns_then_replay(tmp_path):
    plog, aborted = build_txn_log(tmp_path / "t-0", seed=11)
    cut = aborted[len(aborted) // 2].last_offset
    plog.truncate_aborted_txns(cut)
    kept = [t for t in aborted if t.last_offset < cut]
    assert plog.collect_aborted_txns(0, plog.log_end_offset) == kept
    # Segments whose entries all went have no file any more.
    with_entries = {f"{s.base_offset:020d}.txnindex" for s in plog.segments if s.txn_index.entries}
    assert txnindex_files(plog.directory) == sorted(with_entries)
    # The server's replay re-adds them in order.
    for txn in aborted[len(aborted) // 2:]:
        plog.append_aborted_txn(txn)
    assert plog.collect_aborted_txns(0, plog.log_end_offset) == aborted
    plog.truncate_aborted_txns(0)
    assert plog.collect_aborted_txns(0, plog.log_end_offset) == []
    assert txnindex_files(plog.directory) == []
    plog.close()


def test_log_truncation_cuts_the_entries(tmp_path):
    plog, aborted = build_txn_log(tmp_path / "t-0", seed=4)
    cut = aborted[-2].last_offset  # the marker of the second-to-last abort goes
    plog.truncate_to(cut)
    assert plog.log_end_offset <= cut
    survivors = [t for t in aborted if t.last_offset < plog.log_end_offset]
    assert plog.collect_aborted_txns(0, 1 << 62) == survivors
    plog.close()
    plog = PartitionLog.open(tmp_path / "t-0", CONFIG, clean=True, now_ms=T0)
    assert plog.collect_aborted_txns(0, 1 << 62) == survivors
    plog.truncate_to(0)
    assert txnindex_files(plog.directory) == []
    plog.close()


@pytest.mark.parametrize("clean", [True, False])
def test_recovery_cuts_entries_past_the_recovered_end(tmp_path, clean):
    plog = PartitionLog.open(tmp_path / "t-0", CONFIG, now_ms=T0)
    plog.append(make_batch(2), now_ms=T0)
    first = abort_txn(plog, 1)
    second = abort_txn(plog, 2)
    active = plog.active
    assert second.last_offset >= active.base_offset
    marker_position = active.size - len(txn_marker(2, commit=False))
    log_path = active.log_path
    plog.close()
    # A crash wrote the .txnindex entry but tore the marker it points at.
    os.truncate(log_path, marker_position + 30)
    plog = PartitionLog.open(tmp_path / "t-0", CONFIG, clean=clean, now_ms=T0)
    assert plog.log_end_offset == second.last_offset
    assert plog.collect_aborted_txns(0, 1 << 62) == [first]
    plog.close()


def test_orphan_txnindex_is_removed_at_open(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", CONFIG, now_ms=T0)
    plog.append(make_batch(2), now_ms=T0)
    plog.close()
    orphan = tmp_path / "t-0" / f"{500:020d}.txnindex"
    orphan.write_bytes(AbortedTxn(1, 500, 501, 502).to_bytes())
    plog = PartitionLog.open(tmp_path / "t-0", CONFIG, now_ms=T0)
    assert not orphan.exists()
    assert plog.collect_aborted_txns(0, 1 << 62) == []
    plog.close()


def test_retention_deletes_the_txnindex_with_its_segment(tmp_path):
    mgr = LogManager(tmp_path / "data", LogConfig())
    mgr.open()
    config = LogConfig.from_kafka({"retention.ms": "3600000", "segment.bytes": "1000", "file.delete.delay.ms": "0"},
                                  mgr.defaults)
    (plog,) = mgr.create_logs("t", [0], config, now_ms=T0)
    old = T0 - 10 * 3600 * 1000
    plog.append(txn_batch(1, [(b"k", b"x" * 300)], timestamp=old), now_ms=T0)
    plog.append(txn_marker(1, commit=False, timestamp=old), now_ms=T0)
    plog.append_aborted_txn(AbortedTxn(1, 0, 1, 2))
    doomed = plog.active.txn_index.path
    plog.roll(now_ms=T0)
    plog.append(make_batch(1, timestamp=T0), now_ms=T0)
    assert doomed.exists()
    assert mgr.run_retention(now_ms=T0) == 1
    assert not doomed.exists()
    assert plog.collect_aborted_txns(0, 1 << 62) == []
    assert not plog._has_aborted_txns
    mgr.close()
