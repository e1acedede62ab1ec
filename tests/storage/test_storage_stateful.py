"""Hypothesis state machine: a PartitionLog against a list of batches.

Random appends (one or more batches, random sizes and timestamps), reads at random offsets
and sizes, rolls, clean and crash restarts, retention by size and time, DeleteRecords and
truncation; after every step the log must serve exactly what the model holds.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from storage import LogConfig, OffsetOutOfRange, PartitionLog
from storage.retention import apply_retention
from storage_testkit import make_batch
from wire.records import iter_headers, iter_records

T0 = 1_700_000_000_000
BASE_CONFIG = LogConfig(segment_bytes=1500, segment_ms=60_000, index_interval_bytes=200,
                        retention_ms=-1, retention_bytes=-1, file_delete_delay_ms=0)


@dataclass
class ModelBatch:
    base: int
    next: int
    data: bytes
    records: list[tuple[int, int]]  # (offset, timestamp)


batch_spec = st.tuples(
    st.integers(1, 5),  # records
    st.integers(0, 150),  # value size
    st.lists(st.integers(0, 5000), min_size=5, max_size=5),  # timestamp offsets
)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="storage-stateful-"))
        self.directory = self.tmp / "t-0"
        self.config = BASE_CONFIG
        self.now = T0
        self.plog = PartitionLog.open(self.directory, self.config, now_ms=self.now)
        self.batches: list[ModelBatch] = []
        self.lso = 0
        self.leo = 0

    def teardown(self) -> None:
        if not self.plog.closed:
            self.plog.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers -----------------------------------------------------------------------

    def visible(self) -> list[ModelBatch]:
        return [b for b in self.batches if b.next > self.lso]

    def drop_below_start(self) -> None:
        self.batches = [b for b in self.batches if b.next > self.lso]

    # -- rules -------------------------------------------------------------------------

    @rule(specs=st.lists(batch_spec, min_size=1, max_size=3))
    def append(self, specs):
        buf = bytearray()
        pieces = []
        for count, value_size, ts_offsets in specs:
            timestamps = [self.now - 2000 + t for t in ts_offsets[:count]]
            batch = make_batch(count, value_size=value_size, timestamps=timestamps)
            pieces.append((len(buf), len(batch), count, timestamps))
            buf += batch
        result = self.plog.append(buf, now_ms=self.now)
        assert result[0] == self.leo
        offset = self.leo
        for start, size, count, timestamps in pieces:
            self.batches.append(ModelBatch(offset, offset + count, bytes(buf[start:start + size]),
                                           [(offset + i, ts) for i, ts in enumerate(timestamps)]))
            offset += count
        assert result[1] == offset - 1
        self.leo = offset

    @rule(ms=st.integers(1, 40_000))
    def advance_time(self, ms):
        self.now += ms

    @rule()
    def roll(self):
        self.plog.roll(now_ms=self.now)

    @rule(data=st.data())
    def read(self, data):
        offset = data.draw(st.integers(self.lso, self.leo))
        max_bytes = data.draw(st.sampled_from([1, 100, 500, 2000, 1 << 20]))
        got = self.plog.read(offset, max_bytes)
        if offset == self.leo:
            assert got == b""
            return
        visible = self.visible()
        i = next(k for k, b in enumerate(visible) if b.next > offset)
        headers = [h for _, h in iter_headers(got, check_crc=True)]
        assert headers, "at least one batch"
        assert len(got) <= max(max_bytes, len(visible[i].data))
        served = visible[i:i + len(headers)]
        assert got == b"".join(b.data for b in served)
        # Maximal within the segment: the next batch did not fit or lives in the next one.
        after = i + len(headers)
        if after < len(visible):
            bases = [s.base_offset for s in self.plog.segments]
            seg_of = lambda off: max(k for k, base in enumerate(bases) if base <= off)  # noqa: E731
            fits = len(got) + len(visible[after].data) <= max(max_bytes, len(visible[i].data))
            assert not fits or seg_of(visible[after].base) != seg_of(visible[i].base)

    @rule(offset=st.integers(1, 10))
    def read_out_of_range(self, offset):
        for bad in (self.leo + offset, self.lso - offset):
            if bad < 0:
                continue
            try:
                self.plog.read(bad, 100)
            except OffsetOutOfRange:
                pass
            else:
                raise AssertionError(f"read({bad}) outside [{self.lso}, {self.leo}] did not raise")

    @rule(clean=st.booleans())
    def restart(self, clean):
        if clean:
            self.plog.close()
        else:
            # A crash: descriptors go away, nothing is flushed, pending index entries are lost.
            self.plog._closed = True
            for segment in self.plog.segments:
                segment.close_now_if_idle(force=True)
        self.plog = PartitionLog.open(self.directory, self.config, clean=clean, now_ms=self.now)

    @rule(limit=st.integers(0, 6000))
    def retention_by_size(self, limit):
        self.config = replace(BASE_CONFIG, retention_bytes=limit)
        self.plog.config = self.config
        before = self.plog.log_start_offset
        apply_retention(self.plog, self.now)
        segments = self.plog.segments
        assert self.plog.log_start_offset >= before
        if len(segments) > 1:
            total = sum(s.size for s in segments)
            assert total - segments[0].size < limit  # deleting one more would go below
        self.lso = self.plog.log_start_offset
        self.drop_below_start()

    @rule(age=st.integers(0, 200_000))
    def retention_by_time(self, age):
        self.config = replace(BASE_CONFIG, retention_ms=age)
        self.plog.config = self.config
        apply_retention(self.plog, self.now)
        segments = self.plog.segments
        if len(segments) > 1:
            assert self.now - segments[0].largest_timestamp() <= age
        self.lso = self.plog.log_start_offset
        self.drop_below_start()
        self.config = BASE_CONFIG
        self.plog.config = self.config

    @rule(data=st.data())
    def delete_records(self, data):
        offset = data.draw(st.integers(self.lso, self.leo))
        assert self.plog.delete_records_before(offset) == max(offset, self.lso)
        self.lso = max(offset, self.lso)
        self.drop_below_start()

    @precondition(lambda self: self.leo > 0)
    @rule(data=st.data())
    def truncate(self, data):
        offset = data.draw(st.integers(max(0, self.lso - 1), self.leo))
        self.plog.truncate_to(offset)
        if offset >= self.leo:
            return
        if offset <= self.lso:
            self.batches = []
            self.lso = self.leo = offset
            return
        cut = next(k for k, b in enumerate(self.batches) if b.next > offset)
        if self.batches[cut].base < self.lso:  # nothing readable survives
            self.batches = []
            self.leo = self.lso
            return
        self.leo = self.batches[cut].base
        self.batches = self.batches[:cut]

    @rule(data=st.data())
    def timestamps(self, data):
        target = data.draw(st.integers(self.now - 3000, self.now + 3000))
        records = [(o, t) for b in self.visible() for o, t in b.records if o >= self.lso]
        expected = next(((o, t) for o, t in records if t >= target), None)
        assert self.plog.offset_for_timestamp(target) == expected
        if records:
            top = max(t for _, t in records)
            first = next(o for o, t in records if t == top)
            assert self.plog.max_timestamp() == (first, top)
        else:
            assert self.plog.max_timestamp() == (-1, -1)

    # -- invariants --------------------------------------------------------------------

    @invariant()
    def offsets_agree(self):
        assert self.plog.log_end_offset == self.leo
        assert self.plog.log_start_offset == self.lso

    @invariant()
    def contents_agree(self):
        expected = b"".join(b.data for b in self.visible())
        out = bytearray()
        offset = self.lso
        while offset < self.leo:
            chunk = self.plog.read(offset, 1 << 20)
            assert chunk
            out += chunk
            offset = [h for _, h in iter_headers(chunk)][-1].next_offset
        assert bytes(out) == expected
        # iter_batches agrees too, and the records decode.
        batches = [bytes(d) for _, d in self.plog.iter_batches(self.lso)]
        assert b"".join(batches) == expected
        for data in batches[-2:]:
            assert len(list(iter_records(data))) >= 1


LogMachine.TestCase.settings = settings(
    max_examples=int(__import__("os").environ.get("STORAGE_STATEFUL_EXAMPLES", 35)),
    stateful_step_count=int(__import__("os").environ.get("STORAGE_STATEFUL_STEPS", 35)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_partition_log_matches_model = LogMachine.TestCase
