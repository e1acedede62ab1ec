"""Producer-state snapshots: Kafka's `<offset>.snapshot` files in a partition directory.

Why: idempotent (and later transactional) producers are deduplicated from per-producer
state that is otherwise rebuilt by reading every batch header of the log at start-up. A
snapshot taken at clean shutdown (named by the log end offset it covers, zero-padded to 20
digits like segments) lets start-up load that state and read only the batches after it.

File format (Kafka's ProducerStateManager, version 1), big-endian::

    version int16 | crc uint32 (CRC32C of everything after it) | count int32 |
    count x (producer_id int64, epoch int16, last_sequence int32, last_offset int64,
             offset_delta int32, timestamp int64, coordinator_epoch int32,
             current_txn_first_offset int64)

A snapshot with a bad CRC or length is ignored (and deleted): the log is then read instead.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import crc32c

from storage.files import atomic_write

SUFFIX = ".snapshot"
VERSION = 1
_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")


@dataclass(frozen=True, slots=True)
class SnapshotEntry:
    """One producer's last appended batch, as Kafka's snapshot keeps it."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SUFFIX}"


def encode(entries: list[SnapshotEntry]) -> bytes:
    body = bytearray(struct.pack(">i", len(entries)))
    for e in entries:
        body += _ENTRY.pack(e.producer_id, e.epoch, e.last_sequence, e.last_offset, e.offset_delta, e.timestamp,
                            e.coordinator_epoch, e.current_txn_first_offset)
    crc = crc32c.crc32c(bytes(body))
    return struct.pack(">hI", VERSION, crc) + bytes(body)


def decode(data: bytes) -> list[SnapshotEntry]:
    """Entries of a snapshot file; ValueError if it is not a whole, intact one."""
    if len(data) < _HEAD.size:
        raise ValueError(f"snapshot of {len(data)} bytes is shorter than its header")
    version, crc, count = _HEAD.unpack_from(data, 0)
    if version != VERSION:
        raise ValueError(f"snapshot version {version}")
    if crc32c.crc32c(data[6:]) != crc:
        raise ValueError("snapshot CRC mismatch")
    if count < 0 or len(data) != _HEAD.size + count * _ENTRY.size:
        raise ValueError(f"snapshot length {len(data)} does not hold {count} entries")
    return [SnapshotEntry(*_ENTRY.unpack_from(data, _HEAD.size + i * _ENTRY.size)) for i in range(count)]


def list_snapshots(directory: Path) -> list[int]:
    """Offsets of the snapshot files in `directory`, ascending."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return snapshot_offsets(names)


def snapshot_offsets(names: list[str]) -> list[int]:
    """Offsets of the snapshot files among a directory's `names`, ascending."""
    offsets = []
    for name in names:
        if name.endswith(SUFFIX) and name[:-len(SUFFIX)].isdigit():
            offsets.append(int(name[:-len(SUFFIX)]))
    return sorted(offsets)


def write_snapshot(directory: Path, offset: int, entries: list[SnapshotEntry]) -> Path:
    """Write (atomically) the snapshot covering the log up to `offset` (exclusive)."""
    path = snapshot_path(directory, offset)
    atomic_write(path, encode(entries))
    return path


def load_latest(directory: Path, upto: int, *,
                offsets: list[int] | tuple[int, ...] | None = None) -> tuple[int, list[SnapshotEntry]] | None:
    """The newest intact snapshot at or below `upto` (the log end offset): (offset, entries).

    Snapshots above `upto` describe data the log no longer has (a crash cut it): deleted.
    Unreadable ones are deleted too, and the next older one is tried. ``offsets``: the
    snapshot files' offsets, if the caller listed the directory already (start-up)."""
    for offset in reversed(list_snapshots(directory) if offsets is None else offsets):
        path = snapshot_path(directory, offset)
        if offset > upto:
            path.unlink(missing_ok=True)
            continue
        try:
            return offset, decode(path.read_bytes())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
    return None


def delete_snapshots(directory: Path, *, below: int | None = None) -> None:
    """Delete snapshot files (those below `below`, or all)."""
    for offset in list_snapshots(directory):
        if below is None or offset < below:
            snapshot_path(directory, offset).unlink(missing_ok=True)
