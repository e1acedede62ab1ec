"""Making one test's log comparable between two brokers: each rule says what it replaces and why.

The answers of two brokers to the same scenario differ in things that are no behaviour of
theirs: names the test made unique with a random suffix, ids chosen at random, ports, the wall
clock, the order in which timing lets records of different partitions arrive. `normalise()`
turns a `recording.TestLog`'s streams into plain JSON values in which those are replaced by
placeholders (numbered in order of first appearance, so that "the same name again" still
shows), and counts how often each rule applied. Everything else is kept exactly: error
codes, offsets, keys, values, headers, timestamp types, group states, assignments, configs.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from typing import Any

from compat_tests.clients.base import (
    ClientError, ClusterMetadata, Delivery, GroupInfo, GroupMemberInfo, Message, Record,
    TopicDescription, TopicMetadata, ZERO_UUID)
from compat_tests.recording import Call

RULES: dict[str, str] = {
    "unique-names": "topic, group and transactional ids end in a random suffix "
                    "(helpers.unique_name): the suffix becomes <N>, numbered in order of first "
                    "appearance in the calls' arguments; in a name made from a cut copy of "
                    "another, the cut suffix's digits become <N…>",
    "foreign-names": "a shared broker also holds other tests' topics and groups and the internal "
                     "topics, whose presence depends on what ran before: listings (metadata of all "
                     "topics, list_groups) keep only the names this test used",
    "uuids": "member ids and other ids made from a random UUID (Java's UUID, Kafka's base64 Uuid): "
             "<uuid>, the text around it kept",
    "node-ids": "broker ids are configuration (node.id / broker.id): node#1.. by rank of the ids "
                "the test saw",
    "ports": "a broker's port is chosen per run: host:<port>, the host kept",
    "topic-ids": "topic ids are random (KIP-516): <topic-id#N> in order of first appearance; "
                 "the zero id (\"no id\") is kept",
    "wall-clock": "times a client or broker stamped are the run's wall clock: <wall-clock>, and "
                  "<log-append-time> for a LogAppendTime record; times the scenario chose are "
                  "kept relative to the first it chose (<t0+1000>); the timestamp type is kept",
    "random-bytes": "values of 256 bytes or more are compared by identity, not content "
                    "(scenarios fill large values with os.urandom): <bytes#N len=L>, the same "
                    "value seen again gets the same N",
    "error-text": "an error's message is free text worded by the broker and the library: the "
                  "exception's type and the Kafka error code are kept",
    "partition-interleaving": "Kafka orders records within a partition only; fetch timing "
                              "decides how partitions interleave: consumed records are grouped "
                              "per partition, in order",
    "unordered": "sets, dict keys, the members of a described group and listed names carry no "
                 "order: sorted after normalisation",
    "member-relative": "which member gets which partitions depends on member ids (random; the "
                       "assignors sort by them): one member's answers keep their sizes, and the "
                       "partitions are compared over all members together (the assignments a "
                       "poll ended on, unordered; the records all members read, pooled; a "
                       "described group's members, their partition counts and their "
                       "assignments, each unordered)",
}

UNIQUE_SUFFIX = re.compile(r"(?<=-)[0-9a-f]{10}(?![0-9a-zA-Z])")
UNIQUE_NAME = re.compile(r".{8,}-[0-9a-f]{10}")
UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
BASE64_UUID = re.compile(r"[A-Za-z0-9_-]{22}")
HOST_PORT = re.compile(r"\b((?:\d{1,3}\.){3}\d{1,3}|localhost|\[::1\]):\d{2,5}\b")
EPOCH_MS = (10**12, 10**13)  # 2001..2286 in ms: an offset or a count never gets there
LARGE_BYTES = 256


def _is_epoch_ms(value: Any) -> bool:
    return type(value) is int and EPOCH_MS[0] <= value < EPOCH_MS[1]


class Normaliser:
    """One test's normalisation state: the placeholders handed out so far."""

    def __init__(self) -> None:
        self.applied: Counter = Counter()
        self._names: dict[str, int] = {}
        self._full_names: list[str] = []
        self._times: list[int] = []
        self._time_set: set[int] = set()
        self._nodes: dict[int, str] = {}
        self._topic_ids: dict[str, str] = {}
        self._bytes: dict[bytes, int] = {}
        self._texts: dict[str, tuple[str, Counter]] = {}

    # ------------------------------------------------------------------ pre-pass
    def learn(self, streams: dict[str, list[Call]]) -> None:
        """Names and chosen times from the arguments (in call order: deterministic), node ids
        from every answer (ranked, so their order of appearance does not matter)."""
        nodes: set[int] = set()
        for calls in streams.values():
            for call in calls:
                self._learn_args((call.args, call.kwargs))
                if call.outcome[0] == "ok":
                    self._learn_nodes(call.outcome[1], nodes)
        for rank, node in enumerate(sorted(nodes), 1):
            self._nodes[node] = f"node#{rank}"

    def _learn_args(self, value: Any) -> None:
        if isinstance(value, str):
            if UNIQUE_NAME.fullmatch(value) and value not in self._full_names:
                self._full_names.append(value)
            for suffix in UNIQUE_SUFFIX.findall(UUID_TEXT.sub("", value)):
                self._names.setdefault(suffix, len(self._names) + 1)
        elif _is_epoch_ms(value):
            if value not in self._time_set:
                self._time_set.add(value)
                self._times.append(value)
        elif isinstance(value, dict):
            for k, v in value.items():
                self._learn_args(k)
                self._learn_args(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                self._learn_args(v)
        elif isinstance(value, Message):
            self._learn_args(value.timestamp)  # keys, values and headers name nothing

    def _learn_nodes(self, value: Any, nodes: set[int]) -> None:
        if isinstance(value, ClusterMetadata):
            nodes.update(value.brokers)
            for t in value.topics.values():
                nodes.update(n for n in t.partitions.values() if n >= 0)
        elif isinstance(value, TopicDescription):
            nodes.update(n for n in value.partitions.values() if n >= 0)

    # ------------------------------------------------------------------ values
    def _truncated(self, value: str) -> str:
        """A name made from a cut copy of another ("tx-" + topic[:40] + a suffix of its own)
        carries the first hex digits of that name's suffix: "<N…>" stands for them."""
        for full in self._full_names:
            stem = full[:-10]
            start = value.find(stem)
            if start < 0:
                continue
            rest = value[start + len(stem):]
            digits = re.match(r"[0-9a-f]{1,9}(?=-)", rest)
            if digits and full[-10:].startswith(digits.group(0)):
                self.applied["unique-names"] += 1
                n = self._names[full[-10:]]
                cut = start + len(stem)
                value = value[:cut] + f"<{n}…>" + value[cut + len(digits.group(0)):]
        return value

    def text(self, value: str) -> str:
        """A string with the test's name suffixes, uuids and ports replaced (memoised: a
        topic name comes back with every record)."""
        hit = self._texts.get(value)
        if hit is None:
            before = Counter(self.applied)
            out = self._text(value)
            hit = self._texts[value] = (out, self.applied - before)
            return out
        self.applied.update(hit[1])
        return hit[0]

    def _text(self, value: str) -> str:
        out = self._truncated(value) if self._full_names else value
        if UUID_TEXT.search(out):
            self.applied["uuids"] += 1
            out = UUID_TEXT.sub("<uuid>", out)

        def name(match: re.Match) -> str:
            self.applied["unique-names"] += 1
            n = self._names.get(match.group(0))
            return f"<{n}>" if n is not None else "<unknown-suffix>"

        out = UNIQUE_SUFFIX.sub(name, out)
        if HOST_PORT.search(out):
            self.applied["ports"] += 1
            out = HOST_PORT.sub(lambda m: f"{m.group(1)}:<port>", out)
        return out

    def own_name(self, name: str) -> bool:
        """Is this one of the names this test made (a suffix seen in its arguments)?"""
        return any(s in self._names for s in UNIQUE_SUFFIX.findall(name))

    def number(self, value: int) -> Any:
        if _is_epoch_ms(value):
            self.applied["wall-clock"] += 1
            if value in self._time_set:
                delta = value - self._times[0]
                return f"<t0{delta:+d}>" if delta else "<t0>"
            return "<wall-clock>"
        return value

    def raw_bytes(self, value: bytes) -> str:
        if len(value) >= LARGE_BYTES:
            self.applied["random-bytes"] += 1
            n = self._bytes.setdefault(bytes(value), len(self._bytes) + 1)
            return f"<bytes#{n} len={len(value)}>"
        return repr(bytes(value))

    def node(self, node: int) -> Any:
        if node in self._nodes:
            self.applied["node-ids"] += 1
            return self._nodes[node]
        return node  # -1: no leader

    def topic_id(self, topic_id: str) -> str:
        if topic_id == ZERO_UUID:
            return topic_id
        self.applied["topic-ids"] += 1
        return self._topic_ids.setdefault(topic_id, f"<topic-id#{len(self._topic_ids) + 1}>")

    def sorted_list(self, items: list) -> list:
        self.applied["unordered"] += 1
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))

    def value(self, value: Any) -> Any:
        """Any answer or argument, as a plain JSON value."""
        kind = type(value)
        if kind is bytes:  # the common cases first: 10 000 records are normalised in a blink
            return self.raw_bytes(value) if len(value) >= LARGE_BYTES else repr(value)
        if kind is Record:
            return self.record(value)
        if kind is Message:
            return {"value": self.value(value.value), "key": self.value(value.key),
                    "headers": [self.value(h) for h in value.headers] if value.headers else [],
                    "partition": value.partition, "timestamp": self.value(value.timestamp)}
        if kind is Delivery:
            return {"partition": value.partition, "offset": value.offset}
        if value is None or kind is bool or kind is float:
            return value
        return self._value(value)

    def _value(self, value: Any) -> Any:
        if value is None or isinstance(value, (bool, float)):
            return value
        if isinstance(value, int):
            return self.number(value)
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, (bytes, bytearray, memoryview)):
            return self.raw_bytes(bytes(value))
        if isinstance(value, BaseException):
            return self.error(value)
        if isinstance(value, Record):
            return self.record(value)
        if isinstance(value, Delivery):
            return {"partition": value.partition, "offset": value.offset}
        if isinstance(value, Message):
            return {"value": self.value(value.value), "key": self.value(value.key),
                    "headers": self.value(value.headers), "partition": value.partition,
                    "timestamp": self.value(value.timestamp)}
        if isinstance(value, ClusterMetadata):
            return self.cluster_metadata(value)
        if isinstance(value, TopicMetadata):
            return {"error_code": value.error_code,
                    "partitions": {str(p): self.node(n) for p, n in sorted(value.partitions.items())}}
        if isinstance(value, TopicDescription):
            return {"name": self.text(value.name), "topic_id": self.topic_id(value.topic_id),
                    "partitions": {str(p): self.node(n) for p, n in sorted(value.partitions.items())}}
        if isinstance(value, GroupInfo):
            # member-relative: which member holds which partitions is the member ids' doing
            self.applied["member-relative"] += 1
            return {"group_id": self.text(value.group_id), "state": value.state,
                    "protocol_type": value.protocol_type,
                    "members": self.sorted_list([self.value(m) for m in value.members]),
                    "partitions per member": sorted(len(m.assignment) for m in value.members),
                    "assignments (unordered)": self.sorted_list(
                        [self.value(m.assignment) for m in value.members])}
        if isinstance(value, GroupMemberInfo):
            member_id = value.member_id
            if BASE64_UUID.fullmatch(member_id):  # a KIP-848 member id: a Uuid the client made
                self.applied["uuids"] += 1
                member_id = "<uuid>"
            return {"member_id": self.text(member_id), "client_id": self.text(value.client_id)}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: self.value(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, dict):
            out = {}
            if len(value) > 1:
                self.applied["unordered"] += 1
            for k, v in value.items():
                key = self.value(k)
                out[key if isinstance(key, str) else json.dumps(key)] = self.value(v)
            return dict(sorted(out.items()))
        if isinstance(value, (set, frozenset)):
            return self.sorted_list([self.value(v) for v in value])
        if isinstance(value, (list, tuple)):
            if value and all(isinstance(v, Record) for v in value):
                return self.records(value)
            return [self.value(v) for v in value]
        return f"<{type(value).__name__}>"

    def record(self, r: Record) -> dict:
        if r.timestamp_type == "LogAppendTime":
            self.applied["wall-clock"] += 1
            timestamp: Any = "<log-append-time>"
        else:
            timestamp = self.number(r.timestamp)
        return {"offset": r.offset, "key": self.value(r.key), "value": self.value(r.value),
                "headers": [self.value(h) for h in r.headers] if r.headers else [],
                "timestamp": timestamp,
                "timestamp_type": r.timestamp_type}

    def records(self, records) -> dict[str, list]:
        """Consumed records per "topic/partition", in the order each partition gave them."""
        out: dict[str, list] = {}
        if len({(r.topic, r.partition) for r in records}) > 1:
            self.applied["partition-interleaving"] += 1
        for r in records:
            out.setdefault(f"{self.text(r.topic)}/{r.partition}", []).append(self.record(r))
        return dict(sorted(out.items()))

    def cluster_metadata(self, md: ClusterMetadata) -> dict:
        brokers = {}
        for node, (host, _port) in sorted(md.brokers.items()):
            self.applied["ports"] += 1
            brokers[str(self.node(node))] = f"{host}:<port>"
        topics = {}
        for name, t in md.topics.items():
            if not self.own_name(name):
                self.applied["foreign-names"] += 1
                continue
            topics[self.text(name)] = self.value(t)
        return {"brokers": brokers, "topics": dict(sorted(topics.items()))}

    def error(self, exc: BaseException) -> dict:
        out: dict[str, Any] = {"type": type(exc).__name__}
        if isinstance(exc, ClientError):
            out["code"] = exc.code
            out["error"] = exc.error_name
        if str(exc):
            self.applied["error-text"] += 1
        return out

    # ------------------------------------------------------------------ calls
    def answer(self, call: Call) -> Any:
        """A verb's answer, with the rules particular to the verb."""
        result = call.outcome[1]
        if call.verb == "list_groups" and isinstance(result, (list, tuple, set, frozenset)):
            mine = [g for g in result if isinstance(g, str) and self.own_name(g)]
            self.applied["foreign-names"] += len(result) - len(mine)
            return self.sorted_list([self.text(g) for g in mine])
        if call.obj.startswith("member#"):
            self.applied["member-relative"] += 1
            if call.verb == "assignment":
                return {"partitions": len(result)}
            if call.verb == "records":
                counts = Counter(r.partition for r in result)
                return {"records per partition": sorted(counts.values())}
            return self.value(result)
        if call.obj == "members":
            self.applied["member-relative"] += 1
            if call.verb == "assignments (unordered)":
                return self.sorted_list([self.value(a) for a in result])
            if call.verb == "records (pooled)":
                distinct = {(r.topic, r.partition, r.offset): r for r in result}
                return self.records([distinct[k] for k in sorted(distinct)])
        if isinstance(call.obj, str) and call.verb == "consume" and isinstance(result, list) \
                and not result:
            return {}
        return self.value(result)

    def call(self, call: Call) -> dict:
        args = list(call.args)
        if call.verb == "describe_topic_by_id" and args and isinstance(args[0], str):
            args[0] = self.topic_id(args[0])  # the id a describe answered, or a random one
        entry: dict[str, Any] = {"obj": call.obj, "verb": call.verb, "args": self.value(args)}
        if call.kwargs:
            entry["kwargs"] = self.value(dict(call.kwargs))
        if call.polled:
            entry["polled"] = True
        kind, result = call.outcome
        if kind == "raised":
            entry["raised"] = self.error(result)
        else:
            entry["ok"] = self.answer(call)
        return entry


def normalise(streams: dict[str, list[Call]]) -> tuple[dict[str, list[dict]], Counter]:
    """The streams as plain JSON values, and how often each rule applied."""
    n = Normaliser()
    n.learn(streams)
    out = {name: [n.call(c) for c in calls] for name, calls in streams.items()}
    return out, n.applied
