"""The records of `__transaction_state`, in Kafka's formats, so a data directory's transaction
log reads the same to Kafka's tools and ours.

Key (TransactionLogKey v0): version int16 = 0 | transactional_id string (int16 length).
Value (TransactionLogValue): version int16, then
    producer_id int64 | producer_epoch int16 | transaction_timeout_ms int32 |
    transaction_status int8 | transaction_partitions nullable [topic string, partition_ids [int32]] |
    last_update_timestamp_ms int64 | start_timestamp_ms int64
Version 0 is what Kafka 3.9 writes and what we write; version 1 (flexible: compact strings
and arrays, tagged fields) is read too. A tombstone (null value) removes the id.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from server.coordinator_log import BadRecord

KEY_VERSION = 0
VALUE_VERSION = 0

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I8 = struct.Struct(">b")


@dataclass(slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: dict[str, list[int]] = field(default_factory=dict)
    last_update_ms: int = -1
    start_ms: int = -1


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode("utf-8")
    return _I16.pack(KEY_VERSION) + _I16.pack(len(raw)) + raw


def encode_value(value: TxnLogValue) -> bytes:
    out = bytearray()
    out += _I16.pack(VALUE_VERSION)
    out += _I64.pack(value.producer_id)
    out += _I16.pack(value.producer_epoch)
    out += _I32.pack(value.timeout_ms)
    out += _I8.pack(value.status)
    if not value.partitions:
        out += _I32.pack(-1)  # Kafka writes null partitions for a transaction with none
    else:
        out += _I32.pack(len(value.partitions))
        for topic, ids in sorted(value.partitions.items()):
            raw = topic.encode("utf-8")
            out += _I16.pack(len(raw)) + raw
            out += _I32.pack(len(ids))
            for i in sorted(ids):
                out += _I32.pack(i)
    out += _I64.pack(value.last_update_ms)
    out += _I64.pack(value.start_ms)
    return bytes(out)


class _Reader:
    def __init__(self, buf: bytes, flexible: bool = False) -> None:
        self.buf = buf
        self.pos = 0
        self.flexible = flexible

    def fixed(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.buf):
            raise BadRecord(f"truncated at byte {self.pos} of {len(self.buf)}")
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return v

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            if self.pos >= len(self.buf) or shift > 28:
                raise BadRecord("bad varint")
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def length(self) -> int:
        """An array or string length: -1 for null."""
        if self.flexible:
            return self.uvarint() - 1
        return self.fixed(_I32)

    def string(self) -> str:
        n = self.uvarint() - 1 if self.flexible else self.fixed(_I16)
        if n < 0 or self.pos + n > len(self.buf):
            raise BadRecord(f"bad string length {n} at byte {self.pos}")
        raw = self.buf[self.pos:self.pos + n]
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadRecord(f"string is not UTF-8: {exc}") from None

    def tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                size = self.uvarint()
                self.pos += size
                if self.pos > len(self.buf):
                    raise BadRecord("tagged field overruns the record")


def decode_key(raw: bytes) -> str:
    r = _Reader(raw)
    version = r.fixed(_I16)
    if version not in (0, 1):
        raise BadRecord(f"unknown transaction log key version {version}")
    r.flexible = version >= 1
    tid = r.string()
    r.tags()
    return tid


def decode_value(raw: bytes) -> TxnLogValue:
    r = _Reader(raw)
    version = r.fixed(_I16)
    if version not in (0, 1):
        raise BadRecord(f"unknown transaction log value version {version}")
    r.flexible = version >= 1
    producer_id = r.fixed(_I64)
    epoch = r.fixed(_I16)
    timeout = r.fixed(_I32)
    status = r.fixed(_I8)
    partitions: dict[str, list[int]] = {}
    count = r.length()
    for _ in range(max(count, 0)):
        topic = r.string()
        ids = [r.fixed(_I32) for _ in range(max(r.length(), 0))]
        r.tags()
        partitions.setdefault(topic, []).extend(ids)
    last_update = r.fixed(_I64)
    start = r.fixed(_I64)
    r.tags()
    return TxnLogValue(producer_id, epoch, timeout, status, partitions, last_update, start)
