"""Small file-system helpers: durable atomic replacement, directory fsync, checkpoint files,
and reserving disk blocks past a file's end.

A checkpoint file holds one offset in Kafka's checkpoint text layout reduced to one entry::

    0            version
    <offset>     the value

A data directory's `recovery-point-offset-checkpoint` holds one offset per partition in
Kafka's full layout (its OffsetCheckpointFile)::

    0                           version
    <count>                     number of entries
    <topic> <partition> <offset>   one line per entry

Checkpoints are always replaced atomically (write a temporary file, fsync it, rename it over the old
one, fsync the directory), so a crash leaves either the old or the new value, never a mix.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import logging
import os
from pathlib import Path

log = logging.getLogger("storage")

CHECKPOINT_VERSION = 0


class LazyPath:
    """A Path attribute kept as the str it was given and made a Path when first read.

    Why: opening a log builds a path for each file of each segment (.log, .index,
    .timeindex, .txnindex), and pathlib's parsing of them was the largest single cost of
    opening 100 000 logs at start-up (docs/design/performance.md#cheap-paths-and-small-files),
    while most are read only when the file
    is opened, written or reported. Reading the attribute always gives a Path.
    """

    __slots__ = ("slot",)

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_lazy_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj.__dict__[self.slot]
        if value.__class__ is str:
            value = obj.__dict__[self.slot] = Path(value)
        return value

    def __set__(self, obj, value: str | Path) -> None:
        obj.__dict__[self.slot] = value


def fsync_dir(path: str | Path) -> None:
    """Make renames, creations and unlinks inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_NAME_MAX = 255


def _tmp_path(path: Path) -> Path:
    """`<name>.tmp` beside `path`, or `<digest>.tmp` when that would pass NAME_MAX: a
    249-character topic (Kafka's longest) has a 254-character `<topic>.json`."""
    name = path.name + ".tmp"
    if len(os.fsencode(name)) > _NAME_MAX:
        name = hashlib.blake2b(os.fsencode(path.name), digest_size=16).hexdigest() + ".tmp"
    return path.with_name(name)


def atomic_write(path: str | Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that readers (and crashes) see old or new, whole."""
    path = Path(path)
    tmp = _tmp_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def read_small_file(path: str | Path) -> str:
    """The whole text of a small file (a checkpoint). Plain os calls rather than
    Path.read_text (an io stack, a decoder and Path objects per call): start-up reads a
    few of these for each of 100 000 partitions. FileNotFoundError if absent."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode()


def read_checkpoint(path: str | Path) -> int | None:
    """The offset stored in a checkpoint file, or None when absent or unreadable."""
    try:
        text = read_small_file(path)
    except FileNotFoundError:
        return None
    lines = text.split("\n")
    try:
        if int(lines[0]) != CHECKPOINT_VERSION:
            raise ValueError(f"version {lines[0]}")
        return int(lines[1])
    except (ValueError, IndexError) as exc:
        log.warning("ignoring unreadable checkpoint %s: %s", path, exc)
        return None


def write_checkpoint(path: str | Path, offset: int) -> None:
    """Replace a checkpoint atomically; on a full disk, overwrite it in place instead.

    The value is padded to a fixed width, so every version of the file has the same size
    and an in-place overwrite needs no new block: freeing space (retention, DeleteRecords)
    must keep working when the disk is full, and it checkpoints before deleting.
    """
    data = f"{CHECKPOINT_VERSION}\n{offset:<20}\n".encode()
    try:
        atomic_write(path, data)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        unlink_quietly(_tmp_path(Path(path)))
        try:
            fd = os.open(path, os.O_WRONLY)
        except FileNotFoundError:
            raise exc from None
        try:
            if os.fstat(fd).st_size != len(data):
                raise exc
            pwrite_all(fd, data, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        log.warning("disk full: checkpoint %s overwritten in place", path)


def read_checkpoint_entries(path: str | Path, fields: int, parse, *, what: str) -> dict | None:
    """The entries of a file in Kafka's OffsetCheckpointFile text layout (a version line, a
    count, one entry a line: a topic, a partition, then `fields` - 2 more numbers), each
    made by `parse(parts)`; None when the file is absent or does not parse (logged, with
    `what` an entry should look like: the caller falls back to what it does without one).
    `parse` raises ValueError to refuse an entry."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("ignoring unreadable checkpoint %s: %s", path, exc)
        return None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    try:
        if len(lines) < 2 or int(lines[0]) != CHECKPOINT_VERSION:
            raise ValueError(f"version line {lines[0]!r}" if lines else "empty file")
        count = int(lines[1])
        if count != len(lines) - 2:
            raise ValueError(f"{count} entries announced, {len(lines) - 2} present")
        entries = {}
        for n, line in enumerate(lines[2:], start=3):
            parts = line.split(" ")
            if len(parts) != fields or not parts[0]:
                raise ValueError(f"line {n}: {line!r} is not '{what}'")
            try:
                entries[(parts[0], int(parts[1]))] = parse(parts)
            except ValueError as exc:
                raise ValueError(f"line {n}: {line!r}: {exc}") from None
    except ValueError as exc:
        log.warning("ignoring unreadable checkpoint %s: %s", path, exc)
        return None
    return entries


def write_checkpoint_entries(path: str | Path, lines: list[str]) -> None:
    """Replace a file in Kafka's OffsetCheckpointFile text layout atomically (tmp, fsync,
    rename, fsync dir); `lines` are the entries, each "topic partition ..."."""
    atomic_write(path, ("\n".join([str(CHECKPOINT_VERSION), str(len(lines)), *lines]) + "\n").encode())


def read_offset_checkpoint(path: str | Path) -> dict[tuple[str, int], int] | None:
    """The entries of a Kafka offset checkpoint file (topic, partition) -> offset; None when
    the file is absent or does not parse (logged)."""
    return read_checkpoint_entries(path, 3, lambda parts: int(parts[2]), what="topic partition offset")


def unlink_quietly(path: str | Path) -> bool:
    """Remove a file if present; True when something was removed."""
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    """pwrite until every byte is written (regular files write short only on errors)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        if written <= 0:  # pragma: no cover - the kernel raises instead
            raise OSError("short write")
        view = view[written:]
        position += written


_FALLOC_FL_KEEP_SIZE = 0x01  # <linux/falloc.h>


def _libc_fallocate():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    fallocate = getattr(libc, "fallocate64", None) or getattr(libc, "fallocate", None)
    if fallocate is None:
        return None
    fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    fallocate.restype = ctypes.c_int
    return fallocate


_fallocate = _libc_fallocate()  # os has posix_fallocate only, which grows the file size


def reserve_blocks(fd: int, offset: int, length: int) -> None:
    """Allocate disk blocks for [offset, offset + length) without changing the file size
    (Linux fallocate with FALLOC_FL_KEEP_SIZE): appends into them skip the filesystem's
    per-page block reservation, and the size readers and recovery go by stays the data's.
    Raises OSError: ENOSPC / EDQUOT when the disk is full, EOPNOTSUPP where the platform or
    the filesystem cannot. `os.ftruncate(fd, size)` gives the blocks back."""
    if _fallocate is None:
        raise OSError(errno.EOPNOTSUPP, "fallocate is not available here")
    if _fallocate(fd, _FALLOC_FL_KEEP_SIZE, offset, length) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def blocks_past_end(fd: int) -> int:
    """Bytes of disk the file holds beyond its size rounded up to 4 KiB (reserved blocks)."""
    st = os.fstat(fd)
    return st.st_blocks * 512 - -(-st.st_size // 4096) * 4096
