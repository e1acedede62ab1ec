"""PartitionLog: append, read, indexes, rolls, timestamps, truncation, DeleteRecords."""

from __future__ import annotations

import os
import threading
import time

import pytest

from storage import LogConfig, OffsetOutOfRange, PartitionLog, RecordTooLarge
from storage.errors import LogClosed
from storage_testkit import batch_offsets, batch_with_size, decode, make_batch, read_all
from wire.errors import CorruptRecords
from wire.records import iter_headers, parse_header

T0 = 1_700_000_000_000


def open_log(tmp_path, **config) -> PartitionLog:
    return PartitionLog.open(tmp_path / "t-0", LogConfig(**config), now_ms=T0)


def test_append_assigns_offsets_in_place_and_reads_back(tmp_path):
    plog = open_log(tmp_path)
    batch = make_batch(3)
    result = plog.append(batch, 3, now_ms=T0)
    assert result == (0, 2, -1, 0)  # base, last, LogAppendTime, log start
    second = make_batch(2)
    result = plog.append(second, now_ms=T0)
    assert result[:2] == (3, 4)
    assert parse_header(second).base_offset == 3  # patched in the caller's buffer
    assert parse_header(second).partition_leader_epoch == 0
    assert plog.log_end_offset == 5
    records = decode(read_all(plog))
    assert [r[0] for r in records] == [0, 1, 2, 3, 4]
    assert records[3][2:] == (b"k0", b"A" * 10)


def test_multi_batch_append(tmp_path):
    plog = open_log(tmp_path, index_interval_bytes=0)
    buf = make_batch(2) + make_batch(5) + make_batch(1)
    result = plog.append(buf, now_ms=T0)
    assert result[:2] == (0, 7)
    assert batch_offsets(plog.read(0, 1 << 20)) == [(0, 1), (2, 6), (7, 7)]
    assert batch_offsets(plog.read(4, 1 << 20)) == [(2, 6), (7, 7)]
    assert batch_offsets(plog.read(7, 1)) == [(7, 7)]


def test_read_semantics(tmp_path):
    plog = open_log(tmp_path, index_interval_bytes=100)
    sizes = [200, 300, 150, 1000, 120]
    for size in sizes:
        plog.append(batch_with_size(size), now_ms=T0)
    assert plog.read(5, 100) == b""  # at the log end offset
    with pytest.raises(OffsetOutOfRange):
        plog.read(6, 100)
    with pytest.raises(OffsetOutOfRange):
        plog.read(-1, 100)
    # Always at least one whole batch, even above max_bytes.
    assert len(plog.read(3, 10)) == 1000
    # Whole batches only, up to max_bytes.
    assert len(plog.read(0, 499)) == 200
    assert len(plog.read(0, 500)) == 500
    assert len(plog.read(0, 649)) == 500
    assert len(plog.read(0, 650)) == 650
    assert len(plog.read(1, 10_000)) == sum(sizes[1:])
    # read_location agrees with read, and its fd is usable with pread/sendfile.
    for offset in range(5):
        for max_bytes in (1, 300, 450, 5000):
            data = plog.read(offset, max_bytes)
            [(fd, pos, length)] = plog.read_location(offset, max_bytes)
            assert os.pread(fd, length, pos) == data
    assert plog.read_location(5, 100) == []


def test_sendfile_from_read_location(tmp_path):
    plog = open_log(tmp_path)
    for _ in range(3):
        plog.append(make_batch(4), now_ms=T0)
    expected = plog.read(0, 1 << 20)
    out_path = tmp_path / "out"
    with open(out_path, "wb") as out:
        for fd, pos, length in plog.read_location(0, 1 << 20):
            sent = 0
            while sent < length:
                sent += os.sendfile(out.fileno(), fd, pos + sent, length - sent)
    assert out_path.read_bytes() == expected


def test_segments_roll_at_segment_bytes_and_reads_cross_them(tmp_path):
    plog = open_log(tmp_path, segment_bytes=1000, index_interval_bytes=0)
    for i in range(20):
        plog.append(batch_with_size(300), now_ms=T0)
    assert len(plog.segments) == 7  # three 300-byte batches per 1000-byte segment
    assert [s.base_offset for s in plog.segments] == [0, 3, 6, 9, 12, 15, 18]
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir() if p.suffix == ".log")
    assert names[1] == "00000000000000000003.log"
    # A read stops at the end of a segment, as Kafka's does.
    assert batch_offsets(plog.read(4, 1 << 20)) == [(4, 4), (5, 5)]
    assert [r[0] for r in decode(read_all(plog))] == list(range(20))


def test_segment_ms_roll(tmp_path):
    plog = open_log(tmp_path, segment_ms=1000)
    plog.append(make_batch(1), now_ms=T0)
    plog.append(make_batch(1), now_ms=T0 + 1000)
    assert len(plog.segments) == 1
    plog.append(make_batch(1), now_ms=T0 + 1001)
    assert len(plog.segments) == 2
    assert plog.segments[-1].base_offset == 2


def test_full_offset_index_rolls(tmp_path):
    plog = open_log(tmp_path, segment_index_bytes=8 * 3, index_interval_bytes=0)
    for _ in range(10):
        plog.append(make_batch(1), now_ms=T0)
    assert len(plog.segments) > 1
    assert all(len(s.offset_index) <= 3 for s in plog.segments)
    assert [r[0] for r in decode(read_all(plog))] == list(range(10))


def test_sparse_index_entries(tmp_path):
    plog = open_log(tmp_path, index_interval_bytes=1000)
    for _ in range(10):
        plog.append(batch_with_size(400), now_ms=T0)
    index = plog.active.offset_index
    # Kafka's rule: an entry once more than index.interval.bytes went by since the last.
    assert list(index.values) == [1200, 2400, 3600]
    assert list(index.keys) == [3, 6, 9]
    plog.flush()
    raw = (tmp_path / "t-0" / "00000000000000000000.index").read_bytes()
    assert len(raw) == 24
    assert raw[:8] == (3).to_bytes(4, "big") + (1200).to_bytes(4, "big")


def test_log_append_time(tmp_path):
    plog = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    result = plog.append(make_batch(3, timestamp=5), now_ms=T0 + 42)
    assert result[2] == T0 + 42
    data = plog.read(0, 1 << 20)
    assert [r[1] for r in decode(data)] == [T0 + 42] * 3  # CRC still valid (decode checks)
    assert plog.offset_for_timestamp(T0) == (0, T0 + 42)
    assert plog.max_timestamp() == (0, T0 + 42)


def test_record_too_large_and_bad_input(tmp_path):
    plog = open_log(tmp_path, max_message_bytes=500)
    with pytest.raises(RecordTooLarge):
        plog.append(batch_with_size(600), now_ms=T0)
    with pytest.raises(RecordTooLarge):  # checked before anything is written
        plog.append(batch_with_size(100) + batch_with_size(600), now_ms=T0)
    assert plog.log_end_offset == 0 and plog.active.size == 0
    with pytest.raises(CorruptRecords):
        plog.append(make_batch(1)[:-1], now_ms=T0)
    with pytest.raises(CorruptRecords):
        plog.append(make_batch(1) + bytearray(10), now_ms=T0)


def test_offset_for_timestamp_and_max_timestamp(tmp_path):
    plog = open_log(tmp_path, segment_bytes=400, index_interval_bytes=0)
    # Timestamps inside batches are not sorted; Kafka answers the first record >= target.
    plog.append(make_batch(3, timestamps=[100, 300, 200]), now_ms=T0)
    plog.append(make_batch(2, timestamps=[150, 250]), now_ms=T0)
    plog.append(make_batch(2, timestamps=[400, 350]), now_ms=T0)
    plog.append(make_batch(1, timestamps=[50]), now_ms=T0)
    assert plog.offset_for_timestamp(0) == (0, 100)
    assert plog.offset_for_timestamp(100) == (0, 100)
    assert plog.offset_for_timestamp(101) == (1, 300)
    assert plog.offset_for_timestamp(301) == (5, 400)
    assert plog.offset_for_timestamp(400) == (5, 400)
    assert plog.offset_for_timestamp(401) is None
    assert plog.max_timestamp() == (5, 400)
    plog.delete_records_before(2)
    assert plog.offset_for_timestamp(101) == (2, 200)
    empty = PartitionLog.open(tmp_path / "e-0", LogConfig())
    assert empty.max_timestamp() == (-1, -1)
    assert empty.offset_for_timestamp(0) is None


def test_delete_records_before(tmp_path):
    plog = open_log(tmp_path, segment_bytes=300, index_interval_bytes=0)
    for _ in range(10):
        plog.append(batch_with_size(100), now_ms=T0)
    segments_before = len(plog.segments)
    assert plog.delete_records_before(4) == 4
    assert plog.log_start_offset == 4
    assert len(plog.segments) < segments_before
    assert plog.segments[0].base_offset <= 4
    with pytest.raises(OffsetOutOfRange):
        plog.read(3, 100)
    assert batch_offsets(plog.read(4, 1))[0] == (4, 4)
    assert plog.delete_records_before(2) == 4  # never moves back
    with pytest.raises(OffsetOutOfRange):
        plog.delete_records_before(11)
    assert plog.delete_records_before(-1) == 10  # -1: up to the high watermark
    assert plog.read(10, 100) == b""
    plog.close()
    reopened = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=300), clean=True)
    assert reopened.log_start_offset == 10 and reopened.log_end_offset == 10


def test_truncate_to(tmp_path):
    plog = open_log(tmp_path, segment_bytes=500, index_interval_bytes=0)
    for _ in range(6):
        plog.append(make_batch(3), now_ms=T0)  # batches [0-2] [3-5] ... [15-17]
    plog.truncate_to(10)  # inside batch [9-11]: the whole batch goes
    assert plog.log_end_offset == 9
    assert [r[0] for r in decode(read_all(plog))] == list(range(9))
    result = plog.append(make_batch(2), now_ms=T0)
    assert result[0] == 9
    plog.truncate_to(3)
    assert plog.log_end_offset == 3
    plog.close()
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=500), clean=False)
    assert plog.log_end_offset == 3
    assert [r[0] for r in decode(read_all(plog))] == [0, 1, 2]
    plog.truncate_to(0)
    assert plog.log_end_offset == 0 and plog.log_start_offset == 0
    assert plog.append(make_batch(1), now_ms=T0)[0] == 0


def test_iter_batches(tmp_path):
    plog = open_log(tmp_path, segment_bytes=400)
    for n in range(1, 8):
        plog.append(make_batch(n), now_ms=T0)
    seen = [(h.base_offset, h.record_count) for h, _ in plog.iter_batches()]
    assert seen == [(0, 1), (1, 2), (3, 3), (6, 4), (10, 5), (15, 6), (21, 7)]
    assert [h.base_offset for h, _ in plog.iter_batches(12)] == [10, 15, 21]
    for header, data in plog.iter_batches(0):
        assert len(data) == header.size
        assert decode(data)[0][0] == header.base_offset


def test_flush_policies(tmp_path):
    for policy in ("never", "interval", "always"):
        plog = PartitionLog.open(tmp_path / f"{policy}-0", LogConfig(flush_policy=policy, flush_interval_messages=3,
                                                                      flush_interval_ms=1000))
        for i in range(5):
            plog.append(make_batch(1), now_ms=T0 + i)
        if policy == "always":
            assert not plog.active.dirty
        elif policy == "interval":
            assert plog.statistics()["unflushed_messages"] == 2
            assert not plog.maybe_flush(T0 + 10)
            assert plog.maybe_flush(T0 + 5000)
            assert plog.statistics()["unflushed_messages"] == 0
        else:
            assert plog.active.dirty
        plog.close()


def test_closed_log_refuses(tmp_path):
    plog = open_log(tmp_path)
    plog.append(make_batch(1), now_ms=T0)
    plog.close()
    with pytest.raises(LogClosed):
        plog.append(make_batch(1), now_ms=T0)
    with pytest.raises(LogClosed):
        plog.read(0, 100)


def test_concurrent_reads_during_appends_and_retention(tmp_path):
    plog = open_log(tmp_path, segment_bytes=4000, index_interval_bytes=256, file_delete_delay_ms=0)
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader():
        try:
            while not stop.is_set():
                start, end = plog.log_start_offset, plog.log_end_offset
                if end == start:
                    continue
                offset = start + (end - start) // 2
                try:
                    data = plog.read(offset, 2000)
                except OffsetOutOfRange:
                    continue  # retention moved the start meanwhile
                headers = [h for _, h in iter_headers(data, check_crc=True)]
                assert headers and headers[0].base_offset <= offset <= headers[0].last_offset
                for a, b in zip(headers, headers[1:]):
                    assert b.base_offset == a.next_offset
                time.sleep(0)  # let the appender at the GIL
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for i in range(800):
            plog.append(make_batch(1 + i % 4), now_ms=T0)
            if i % 100 == 99:
                plog.delete_records_before(plog.log_end_offset - 50)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors, errors[0]
