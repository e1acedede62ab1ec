"""Normalising a decoded response before comparing it: what must differ between two brokers.

Each rule names the fields it touches and why (RULES, printed in the report). A rule only
replaces a value by a placeholder when the value is one the broker generated (its own
cluster id, topic ids, ports, member and producer ids, its clock); a value sent in the
request, or a constant, is compared as it is. Generated ids are named per broker by what
the run captured them as ("<member:pd-hb-v3>", "<producer-id:pd-txn-done>"): the
same member answered twice compares equal, and two different ones do not.

The result is plain JSON data (uuids and bytes as strings, record batches decoded), so
differences print and serialise as they are.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

from compat_tests.protocol_diff.model import Ctx
from compat_tests.protocol_diff.schema_info import map_keys
from wire.errors import CorruptRecords
from wire.records import iter_headers, iter_records, verify_crc

RULES: dict[str, str] = {
    "throttle_time_ms": "throttle_time_ms -> <throttle>: the time a broker asks a client to back off "
                        "depends on its quotas and load at that moment, not on the protocol.",
    "cluster-id": "the broker's own cluster id -> <cluster-id>: random per cluster (kafka-storage "
                  "format / Trafka's data dir).",
    "topic-id": "a topic id the broker gave a topic -> <topic-id:NAME> (<topic-id:no-topic> for one no "
                "existing topic has, as CreateTopics validate_only answers): topic ids are random per topic "
                "and broker; the name they stand for is compared. The ids the run sends stay as they are.",
    "wall-clock": "an int64 within the run's wall-clock window -> <wall-clock>: broker-stamped times "
                  "(log append times, commit and transaction start times) differ by milliseconds. "
                  "Record timestamps the run chose (an hour before it started) are compared as they are.",
    "port": "the broker's own listener ports -> <port> / <controller-port>: each broker listens on "
            "a free port of its own.",
    "member-id": "a generated member id (JoinGroup, ConsumerGroupHeartbeat v0; client id or "
                 "instance id + UUID, or a base64 UUID) -> <member:GROUP> when it is the member the run "
                 "made in GROUP and later requests quote, else <member>: random per member.",
    "producer-id": "a producer id above 0 -> <producer-id:KEY> when it is the producer the run "
                   "initialised as KEY and later requests quote, else <producer-id>: producer ids come "
                   "from a per-cluster counter (Kafka's controller hands them out in blocks). 0, -1 and "
                   "the ids the run sends itself stay as they are.",
    "fetch-session": "a non-zero fetch/share session id -> <session>: random per session.",
    "default-tags": "a tagged field written at its default value -> absent: KIP-482 defines a missing "
                    "tag as its default, so both are the same message.",
    "data-dir": "paths under the broker's data directory -> <data-dir>: each broker has its own.",
    "disk-bytes": "DescribeLogDirs total_bytes / usable_bytes -> <disk-bytes>: free space changes "
                  "while the run writes.",
    "map-order": "arrays of per-topic / per-partition / per-group results (the schemas' mapKey fields, "
                 "else a unique partition_index, name, topic, group_id... field) are matched by key, not "
                 "position: Kafka builds many from hash maps and answers the partitions it could not "
                 "serve after the rest, so their order carries no meaning.",
    "error-message": "a non-null error_message -> <message>: the text is for people; what it says is "
                     "compared through the error code (whether there is a message at all is still "
                     "compared).",
    "records": "record batches are decoded (offsets, epochs, attributes, producer ids, timestamps, "
               "keys, values, headers) so a difference names the field; CRCs are compared as "
               "'valid'.",
}

# Generated member ids: Kafka's classic `<client id>-<UUID>`, Kafka's KIP-848 base64url
# UUIDs (22 characters) and plain UUIDs.
_MEMBER_FIELDS = {"member_id", "leader", "member_id_", "group_leader"}
_UUID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_BASE64_UUID = re.compile(r"^[A-Za-z0-9_-]{22}$")
_PRODUCER_FIELDS = {"producer_id"}
_SESSION_FIELDS = {"session_id"}
WALL_CLOCK_SLACK_MS = 15 * 60 * 1000

# Producer ids the run itself puts in requests (hostile.UNKNOWN_PRODUCER_ID): kept as they are.
LITERAL_PRODUCER_IDS = {424242}
# Topic ids the run itself puts in requests (the zero id, hostile.UNKNOWN_TOPIC_ID,
# model.MISSING_TOPIC_ID): kept as they are.
SENT_TOPIC_IDS = {uuid.UUID(int=0), uuid.UUID("5eed0000-0000-4000-8000-00000000dead"),
                  uuid.UUID("0badc0de-0000-4000-8000-000000000001")}


class Normaliser:
    """One broker's normaliser: its context (ids, ports, what the run captured)."""

    def __init__(self, ctx: Ctx, run_started_ms: int) -> None:
        self.ctx = ctx
        self.window = (run_started_ms - WALL_CLOCK_SLACK_MS, None)
        self.used: set[str] = set()

    def _now_window(self) -> tuple[int, int]:
        return self.window[0], int(time.time() * 1000) + WALL_CLOCK_SLACK_MS

    def body(self, api_key: int, body: dict) -> Any:
        keys = map_keys(api_key, "response")
        return self._value(body, (), "", keys)

    def _mark(self, rule: str) -> None:
        self.used.add(rule)

    def _value(self, value: Any, path: tuple[str, ...], name: str, keys: dict) -> Any:
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if k == "_default_tags":
                    self._mark("default-tags")
                    continue
                if k == "_unknown_tags":
                    out[k] = {str(t): bytes(b).hex() for t, b in v.items()}
                    continue
                out[k] = self._value(v, path + (k,), k, keys)
            return out
        if isinstance(value, list):
            items = [self._value(v, path, name, keys) for v in value]
            if path in keys:
                self._mark("map-order")
                return {"__map__": list(keys[path]), "items": items}
            return items
        if isinstance(value, uuid.UUID):
            for topic, tid in self.ctx.topic_ids.items():
                if tid == value:
                    self._mark("topic-id")
                    return f"<topic-id:{topic}>"
            if value not in SENT_TOPIC_IDS:
                self._mark("topic-id")
                return "<topic-id:no-topic>"  # generated for no topic that exists (validate_only)
            return str(value)
        if isinstance(value, (bytes, bytearray, memoryview)):
            data = bytes(value)
            if name == "records":
                self._mark("records")
                return self._records(data)
            return {"bytes": data.hex()} if len(data) <= 256 else {"bytes": f"{len(data)} bytes"}
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int):
            return self._int(value, name)
        if isinstance(value, str):
            return self._str(value, name)
        return value

    def _int(self, value: int, name: str) -> Any:
        if name == "throttle_time_ms":
            self._mark("throttle_time_ms")
            return "<throttle>"
        if name == "port" and value == self.ctx.port:
            self._mark("port")
            return "<port>"
        if name == "port" and value in self.ctx.extra_ports:
            self._mark("port")
            return "<controller-port>"
        if name in _PRODUCER_FIELDS and value > 0 and value not in LITERAL_PRODUCER_IDS:
            self._mark("producer-id")
            return self._named("pid:", value, "producer-id")
        if name in _SESSION_FIELDS and value != 0:
            self._mark("fetch-session")
            return "<session>"
        if name in ("total_bytes", "usable_bytes") and value >= 0:
            self._mark("disk-bytes")
            return "<disk-bytes>"
        lo, hi = self._now_window()
        if lo <= value <= hi:
            self._mark("wall-clock")
            return "<wall-clock>"
        return value

    def _str(self, value: str, name: str) -> Any:
        if name.endswith("error_message"):
            self._mark("error-message")
            return "<message>"
        if name == "cluster_id" and value == self.ctx.cluster_id:
            self._mark("cluster-id")
            return "<cluster-id>"
        if name in _MEMBER_FIELDS and value and _generated_member(value):
            self._mark("member-id")
            return self._named("member:", value, "member")
        if self.ctx.data_dir and self.ctx.data_dir in value:
            self._mark("data-dir")
            return value.replace(self.ctx.data_dir, "<data-dir>")
        return value

    def _named(self, prefix: str, value: Any, kind: str) -> str:
        """<kind:KEY> for a value the run captured under PREFIX+KEY, else <kind>."""
        for key, captured in self.ctx.values.items():
            if key.startswith(prefix) and captured == value:
                return f"<{kind}:{key[len(prefix):]}>"
        return f"<{kind}>"

    def _records(self, data: bytes) -> Any:
        """Batches as dicts; the undecodable tail (a partial batch) as its length."""
        out: list[Any] = []
        pos = 0
        try:
            for header, start in _batches(data):
                batch = {
                    "base_offset": header.base_offset,
                    "partition_leader_epoch": header.partition_leader_epoch,
                    "magic": header.magic,
                    "attributes": header.attributes,
                    "last_offset_delta": header.last_offset_delta,
                    "base_timestamp": self._int(header.base_timestamp, "timestamp"),
                    "max_timestamp": self._int(header.max_timestamp, "timestamp"),
                    "producer_id": self._int(header.producer_id, "producer_id"),
                    "producer_epoch": header.producer_epoch,
                    "base_sequence": header.base_sequence,
                    "record_count": header.record_count,
                }
                chunk = data[start:start + header.size]
                try:
                    verify_crc(chunk, header)
                    batch["crc"] = "valid"
                except CorruptRecords:
                    batch["crc"] = "invalid"
                try:
                    batch["records"] = [
                        {"offset": r.offset, "timestamp": self._int(r.timestamp, "timestamp"),
                         "key": None if r.key is None else bytes(r.key).hex(),
                         "value": None if r.value is None else bytes(r.value).hex(),
                         "headers": [[k, None if v is None else bytes(v).hex()] for k, v in r.headers]}
                        for r in iter_records(chunk, check_crc=True)]
                except (CorruptRecords, ValueError) as exc:
                    batch["records"] = f"<undecodable: {exc}>"
                out.append(batch)
                pos = start + header.size
        except (CorruptRecords, ValueError):
            pass
        if pos < len(data):
            out.append({"partial_batch_bytes": len(data) - pos})
        return out


def _batches(data: bytes):
    """(header, start) of each whole batch."""
    for start, header in iter_headers(data, check_crc=False):
        yield header, start


def _generated_member(value: str) -> bool:
    """Kafka's `<client id or instance id>-<UUID>` and KIP-848 base64 UUIDs (22 characters);
    the member ids the run sends itself are neither."""
    return bool(_UUID_TEXT.search(value) or _BASE64_UUID.match(value))
