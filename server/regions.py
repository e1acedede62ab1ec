"""`FileRegion`: a span of a pinned log segment that goes out without being read into memory.

A Fetch handler puts a FileRegion where a partition's `records` go; the codec writes its
length prefix and leaves it as a part of the response (`wire.Region` is all the codec
knows of it); the network layer sends it with os.sendfile from the page cache when the
stream is a socket, or reads it with pread and sends the bytes otherwise (`read`).

Ownership: the segment is pinned when the region is made (`LogSegment.read_pinned`), so
its descriptor stays open through retention and topic deletion until `release` — which
whoever holds the region calls once it is sent or dropped. `release` is idempotent, so
"exactly once" holds even when an error path and a cleanup path both reach it.
"""

from __future__ import annotations

from typing import Any

from storage.segment import LogSegment, read_exact


class FileRegion:
    """`length` bytes at `position` of a pinned segment."""

    __slots__ = ("segment", "position", "length", "_pinned")

    def __init__(self, segment: LogSegment, position: int, length: int) -> None:
        self.segment = segment
        self.position = position
        self.length = length
        self._pinned = True

    @property
    def fd(self) -> int:
        return self.segment.fd

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"FileRegion({self.segment!r}, position={self.position}, length={self.length})"

    @property
    def released(self) -> bool:
        return not self._pinned

    def read(self) -> bytes:
        """The region's bytes (pread), for streams that cannot sendfile. Raises
        `SegmentShrank` if the segment was cut under us (a frame cannot be completed)."""
        data = read_exact(self.segment.fd, self.length, self.position)
        if len(data) != self.length:
            raise SegmentShrank(f"segment {self.segment!r} shrank under a fetch: {len(data)} of {self.length} bytes")
        return data

    def release(self) -> None:
        """Unpin the segment (once; later calls do nothing)."""
        if self._pinned:
            self._pinned = False
            self.segment.unpin()


class SegmentShrank(OSError):
    """A region's bytes are no longer all there (the log was truncated during a fetch)."""


def release_regions(value: Any) -> None:
    """Release every FileRegion inside a response body (dicts and lists, any depth).

    For the paths where a body with regions never became parts (its encoding failed):
    only then does nobody else hold them. Walks the whole body, so it is for error paths.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is FileRegion:
            item.release()
        elif kind is dict:
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)


def release_parts(parts: list) -> None:
    """Release the FileRegions among response parts (bytes are skipped)."""
    for part in parts:
        if type(part) is FileRegion:
            part.release()
