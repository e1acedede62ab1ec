"""Shared helpers for the storage tests: real record batches from kafka-python's encoder,
and checks that decode what storage serves with kafka-python's reader."""

from __future__ import annotations

import struct

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from wire.records import Record, build_batch, build_txn_marker, control_type, iter_headers, iter_records

NO_PRODUCER = -1


def make_batch(
    records: list[tuple[bytes | None, bytes | None]] | int,
    *,
    timestamp: int = 1_700_000_000_000,
    compression: int = 0,
    producer_id: int = NO_PRODUCER,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    value_size: int = 10,
    timestamps: list[int] | None = None,
) -> bytearray:
    """One magic-2 batch as a kafka-python producer would send it (base offset 0)."""
    if isinstance(records, int):
        records = [(b"k%d" % i, bytes([65 + i % 26]) * value_size) for i in range(records)]
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=0,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i, (key, value) in enumerate(records):
        ts = timestamps[i] if timestamps is not None else timestamp + i
        builder.append(i, timestamp=ts, key=key, value=value, headers=[])
    return builder.build()


def batch_with_size(size: int, *, timestamp: int = 1_700_000_000_000) -> bytearray:
    """A one-record batch of exactly ``size`` bytes (size >= 80)."""
    overhead = len(make_batch([(b"k", b"")], timestamp=timestamp))
    value_len = size - overhead
    for _ in range(4):  # varint widths depend on the value length
        batch = make_batch([(b"k", b"x" * value_len)], timestamp=timestamp)
        if len(batch) == size:
            return batch
        value_len += size - len(batch)
    raise AssertionError(f"cannot make a batch of {size} bytes")


def decode(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of every record in concatenated batches, decoded by
    kafka-python with its CRC check: what a real consumer would see."""
    out = []
    pos = 0
    view = bytes(data)
    while pos < len(view):
        size = struct.unpack_from(">i", view, pos + 8)[0] + 12
        batch = DefaultRecordBatch(view[pos:pos + size])
        assert batch.validate_crc(), f"CRC of batch at byte {pos} is wrong"
        for record in batch:
            out.append((record.offset, record.timestamp, record.key, record.value))
        pos += size
    return out


def batch_offsets(data: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) of every batch in ``data``; checks CRCs."""
    return [(h.base_offset, h.last_offset) for _, h in iter_headers(data, check_crc=True)]


def read_all(plog, max_bytes: int = 1 << 20) -> bytes:
    """Everything from the log start offset to the end, via repeated reads."""
    out = bytearray()
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, max_bytes)
        if not data:
            break
        headers = [h for _, h in iter_headers(data, check_crc=True)]
        out += data
        offset = headers[-1].next_offset
    return bytes(out)


# -- transactions: batches built by wire.records (kafka-python's builder cannot make markers)

def txn_batch(producer_id: int, records: list[tuple[bytes | None, bytes | None]], *, producer_epoch: int = 0,
              base_sequence: int = 0, timestamp: int = 1_700_000_000_000) -> bytearray:
    """A transactional batch of ``producer_id`` (base offset 0, as a producer sends it)."""
    return build_batch([Record(i, timestamp, key, value) for i, (key, value) in enumerate(records)],
                       producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                       is_transactional=True)


def txn_marker(producer_id: int, commit: bool, *, producer_epoch: int = 0,
               timestamp: int = 1_700_000_000_000) -> bytearray:
    """A COMMIT or ABORT marker of ``producer_id``, as WriteTxnMarkers has it appended."""
    return build_txn_marker(commit, producer_id=producer_id, producer_epoch=producer_epoch, timestamp=timestamp)


def stored_records(data: bytes) -> list[tuple[int, bytes | None, bytes | None, str]]:
    """(offset, key, value, kind) of every record, kind being "data", "COMMIT" or "ABORT"."""
    out = []
    for pos, header in iter_headers(data, check_crc=True):
        for record in iter_records(bytes(data[pos:pos + header.size])):
            kind = control_type(record)
            out.append((record.offset, record.key, record.value, "data" if kind is None else kind.name))
    return out


def open_manager(data_dir, config):
    """A LogManager of `data_dir` under `config`, opened."""
    from storage import LogManager

    mgr = LogManager(data_dir, config)
    mgr.open()
    return mgr


def crash(mgr) -> None:
    """A SIGKILL as far as the directory can tell: no close(), no clean-shutdown marker, no
    final checkpoint (the descriptors are left to the garbage collector)."""
    mgr._release_lock()
