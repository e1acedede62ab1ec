"""Disk full: the data dir on an 8 MiB tmpfs fills up while producing.

Produce must then answer an error code (Kafka's KAFKA_STORAGE_ERROR, 56) rather than
crash or hang; the broker stays up; fetches keep serving what was written, and the log
holds exactly the batches that were acknowledged (a failed write leaves no torn batch);
other requests that need disk (topic creation, offset commits) answer errors too. When
space is freed — the filler topic deleted, or its records deleted — produce works again,
and a restart finds everything in order.

Needs root to mount the tmpfs (CI runs as root); skipped with the reason otherwise. The
mount is removed in teardown.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest

from hardening_kit import (
    alive,
    api_versions_ok,
    create_topic,
    fetch,
    log_text,
    make_batch,
    produce,
    read_values,
    roundtrip,
    wait_until,
)
from tests.brokerproc import BrokerProcess
from tests.tmpfs import mounted_tmpfs
from wire import ApiKey
from wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(120)

DISK_MB = 8


@pytest.fixture
def small_disk(tmp_path):
    with mounted_tmpfs(tmp_path / "disk", f"{DISK_MB}m") as mount_point:
        yield mount_point


def _free_bytes(path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _fill(port: int, topic: str) -> tuple[int, list[int]]:
    """Produce ever smaller batches until even small ones fail; returns (the error code,
    records per acknowledged batch in order)."""
    acked: list[int] = []
    code = ErrorCode.NONE
    n = 0
    deadline = time.monotonic() + 60
    for value_size, records in ((32768, 2), (2048, 2), (100, 1)):
        for _ in range(2 * DISK_MB * 1024 * 1024 // (value_size * records) + 10):
            assert time.monotonic() < deadline, "filling the disk took too long"
            batch = make_batch([b"%08d" % n + b"f" * value_size for _ in range(records)])
            part = produce(port, topic, 0, bytes(batch))
            if part["error_code"] != ErrorCode.NONE:
                code = part["error_code"]
                break
            acked.append(records)
            n += 1
        else:
            raise AssertionError(f"{DISK_MB} MiB disk never filled with {value_size}-byte records")
    return code, acked


@pytest.mark.parametrize("free_by", [
    "delete-topic",
    "delete-records",
])
def test_disk_full(small_disk, free_by):
    # The log file goes beside the mount, not on it. Deleted segments are closed at once
    # (file.delete.delay.ms=0) and swept often, so freed space is free when the test looks.
    broker = BrokerProcess(small_disk, "--set", "log.retention.check.interval.ms=200")
    broker.start()
    try:
        port = broker.port
        create_topic(port, "victim")
        create_topic(port, "filler", configs={"segment.bytes": "1048576", "file.delete.delay.ms": "0"})
        victim_batches = [make_batch([b"victim-%d" % i]) for i in range(10)]
        for batch in victim_batches:
            assert produce(port, "victim", 0, bytes(batch))["error_code"] == ErrorCode.NONE

        code, acked = _fill(port, "filler")
        assert code == ErrorCode.KAFKA_STORAGE_ERROR, f"a full disk answered {code!r}"
        assert _free_bytes(small_disk) < 64 * 1024
        assert alive(broker) and api_versions_ok(port)

        # Fetches keep working, and the filler holds exactly the acknowledged batches.
        assert [v for _o, v in read_values(port, "victim", 0)] == [b"victim-%d" % i for i in range(10)]
        assert fetch(port, "filler", 0, 0)["high_watermark"] == sum(acked)
        filler = read_values(port, "filler", 0)
        assert len(filler) == sum(acked)

        # Everything else that needs the disk answers an error, not a crash or a hang.
        for _ in range(3):
            part = produce(port, "victim", 0, bytes(make_batch([b"v" * 20000])))
            assert part["error_code"] in (ErrorCode.NONE, ErrorCode.KAFKA_STORAGE_ERROR)
        created = roundtrip(port, ApiKey.CREATE_TOPICS, 5,
                            {"topics": [{"name": "new-while-full", "num_partitions": 4, "replication_factor": 1}],
                             "timeout_ms": 5000})["topics"][0]
        assert created["error_code"] in (ErrorCode.NONE, ErrorCode.KAFKA_STORAGE_ERROR), created
        commit = roundtrip(port, ApiKey.OFFSET_COMMIT, 2, {
            "group_id": "full-group", "generation_id_or_member_epoch": -1, "member_id": "",
            "retention_time_ms": -1,
            "topics": [{"name": "victim", "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                          "committed_metadata": "x" * 3000}]}]})
        assert "partitions" in commit["topics"][0]
        assert alive(broker) and api_versions_ok(port)

        # Free space, then produce resumes.
        if free_by == "delete-topic":
            deleted = roundtrip(port, ApiKey.DELETE_TOPICS, 4, {"topic_names": ["filler"], "timeout_ms": 5000})
            assert deleted["responses"][0]["error_code"] == ErrorCode.NONE, deleted
        else:
            result = roundtrip(port, ApiKey.DELETE_RECORDS, 2, {
                "topics": [{"name": "filler", "partitions": [{"partition_index": 0, "offset": -1}]}],
                "timeout_ms": 5000})
            part = result["topics"][0]["partitions"][0]
            if part["error_code"] != ErrorCode.NONE:
                # Refused: then nothing may have changed (no half-applied log start offset).
                assert part["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
                after = fetch(port, "filler", 0, 0)
                assert after["error_code"] == ErrorCode.NONE and after["log_start_offset"] == 0, after
            assert part["error_code"] == ErrorCode.NONE, f"DeleteRecords on a full disk: {part}"
        assert wait_until(lambda: _free_bytes(small_disk) > 4 * 1024 * 1024, 10), \
            f"only {_free_bytes(small_disk)} bytes free after {free_by}"
        for i in range(10, 20):
            part = produce(port, "victim", 0, bytes(make_batch([b"victim-%d" % i])))
            assert part["error_code"] == ErrorCode.NONE, part
        topic = f"after-{uuid.uuid4().hex[:6]}"
        create_topic(port, topic)
        assert produce(port, topic, 0, bytes(make_batch([b"x"])))["error_code"] == ErrorCode.NONE

        victim = [v for _o, v in read_values(port, "victim", 0)]
        assert victim[:10] == [b"victim-%d" % i for i in range(10)]
        assert victim[-10:] == [b"victim-%d" % i for i in range(10, 20)]

        # A restart finds the logs consistent.
        assert broker.stop() == 0
        broker.start()
        assert [v for _o, v in read_values(broker.port, "victim", 0)] == victim
        assert "Traceback" not in log_text(broker) or "handler failed" not in log_text(broker)
    finally:
        broker.kill()
