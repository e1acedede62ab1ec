"""DescribeLogDirs (35): the data directory and the size of each partition in it.

Implements v0-4 (v0 is v1's layout). One log dir (the data dir, as an absolute path). topics null means
every partition; otherwise only the requested partitions that exist are listed (Kafka
leaves unknown ones out rather than failing). In a cluster every replica this broker
hosts is listed, followers as well as leaders (kafka-log-dirs and kafka-reassign-partitions
ask each broker for the log dirs of its replicas). partition_size is the bytes of the
partition's segments (Kafka's `UnifiedLog.size`, indexes not counted); offset_lag is 0
and is_future_key false (no replica movement between dirs). v3+ top-level error_code
is NONE; v4 total_bytes/usable_bytes come from statvfs of the data dir (-1 if that
fails). Not implemented: more than one log dir.
"""

from __future__ import annotations

import logging
import os

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.DESCRIBE_LOG_DIRS
MAY_BLOCK = False

log = logging.getLogger("trafka.admin")


def _disk_space(path: str) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding `path`; usable is what a
    non-root writer may still use, as Java's FileStore.getUsableSpace."""
    try:
        st = os.statvfs(path)
    except OSError as exc:
        log.warning("statvfs %s: %s", path, exc)
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def _wanted(broker, request_topics: list[dict] | None) -> dict[str, list[int]]:
    topics = broker.topics
    if request_topics is None:
        return {name: list(range(meta.partitions)) for name, meta in sorted(topics.items())}
    wanted: dict[str, list[int]] = {}
    for item in request_topics:
        meta = topics.get(item["topic"])
        if meta is None:
            continue
        partitions = wanted.setdefault(item["topic"], [])
        for index in item["partitions"]:
            if 0 <= index < meta.partitions and index not in partitions:
                partitions.append(index)
    return {name: parts for name, parts in wanted.items() if parts}


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    broker = ctx.broker
    data_dir = str(broker.data_dir.resolve())
    topics = []
    for name, partitions in _wanted(broker, request.get("topics")).items():
        entries = []
        for index in partitions:
            try:
                size = broker.partition(name, index, leader_only=False).log.size_bytes
            except Exception as exc:  # deleted meanwhile, or closed: leave it out
                log.info("DescribeLogDirs %s-%d: %s", name, index, exc)
                continue
            entries.append({"partition_index": index, "partition_size": size, "offset_lag": 0,
                            "is_future_key": False})
        if entries:
            topics.append({"name": name, "partitions": entries})
    total, usable = _disk_space(data_dir) if ctx.api_version >= 4 else (-1, -1)
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "results": [{"error_code": ErrorCode.NONE, "log_dir": data_dir, "topics": topics, "total_bytes": total,
                     "usable_bytes": usable}],
    }
