"""Drive one differential run: the fixture, then every case of every (API, version) both
brokers serve, each sent to both brokers at once and compared.

The two brokers get their requests in the same order, one case at a time (sent to both,
then both answers read), so side effects stay in step; where Kafka finishes something after
answering (topic creation and deletion, transaction markers) the run waits until both have
settled before the next case.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable
import re

from compat_tests.protocol_diff import cases as case_lists
from compat_tests.protocol_diff import fixture, hostile
from compat_tests.protocol_diff.client import Outcome, WireClient
from compat_tests.protocol_diff.compare import compare
from compat_tests.protocol_diff.model import Case, Ctx, Difference, Pair
from compat_tests.protocol_diff.normalise import Normaliser
from wire.definitions import MESSAGES
from wire.errors import EncodeError
from wire.registry import ApiKey, api_name

log = logging.getLogger(__name__)

SETTLE_TIMEOUT_S = 20.0
WARMUP_TIMEOUT_S = 90.0
WARMUP_IDS = 400
# How long an auto-creation Kafka may or may not do is waited for.
MAYBE_WAIT_S = 2.0
UNANSWERED_AGAIN_S = 1.5
# APIs after whose requests (valid or hostile) topics may have appeared or gone.
TOPIC_CHANGING = {ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS, ApiKey.METADATA,
                  ApiKey.PRODUCE}


@dataclass
class Side:
    """One broker in the run."""

    ctx: Ctx
    client: WireClient
    normaliser: Normaliser
    versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    alive: Callable[[], bool] = lambda: True
    log_tail: Callable[[], str] = lambda: ""


class BrokerDied(RuntimeError):
    """A broker process exited during the run: the run stops, with its log."""


@dataclass
class RunResult:
    pairs: list[Pair]
    versions: dict[int, tuple[int, int]]  # the compared (api -> (lo, hi)) intersection
    kafka_versions: dict[int, tuple[int, int]]
    trafka_versions: dict[int, tuple[int, int]]
    not_sent: list[tuple[int, int, str, str]]  # (api, version, variant, why): bodies that would not encode
    seconds: float
    rules_used: set[str]


def schema_range(api_key: int) -> tuple[int, int] | None:
    msg = MESSAGES.get((api_key, "request"))
    if msg is None or (api_key, "response") not in MESSAGES:
        return None
    lo, hi = msg["valid"]
    return lo, hi if hi is not None else lo


def intersection(a: dict[int, tuple[int, int]], b: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """What both advertise and our schemas describe, per API."""
    out = {}
    for key in sorted(set(a) & set(b)):
        schema = schema_range(key)
        if schema is None:
            continue
        lo = max(a[key][0], b[key][0], schema[0])
        hi = min(a[key][1], b[key][1], schema[1])
        if lo <= hi:
            out[key] = (lo, hi)
    return out


class Run:
    def __init__(self, kafka: Side, trafka: Side, apis: set[int] | None = None,
                 skip: dict[str, str] | None = None) -> None:
        """`skip`: hostile labels (regular expressions) not sent to this reference, each with
        the reason (a reference broker that cannot survive them)."""
        self.skip = skip or {}
        self.kafka = kafka
        self.trafka = trafka
        self.sides = (kafka, trafka)
        self.apis = apis
        self.pairs: list[Pair] = []
        self.not_sent: list[tuple[int, int, str, str]] = []
        self.settle_seconds = 0.0
        # (api, hostile label) a broker left unanswered at one version: at the next versions
        # it is waited for only UNANSWERED_AGAIN_S (Kafka never answers some of them at all).
        self.unanswered: set[tuple[int, str]] = set()
        self.last_bodies: list = []
        self.last_outcomes: list[Outcome] = []

    # ------------------------------------------------------------------ setup

    def advertised(self, side: Side) -> dict[int, tuple[int, int]]:
        out = side.client.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "pd-client",
                                                          "client_software_version": "1.0.0"})
        if out.kind != "response" or out.body["error_code"] != 0:
            raise RuntimeError(f"{side.ctx.name}: ApiVersions failed: {out}")
        side.versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in out.body["api_keys"]}
        return side.versions

    def warm_up(self) -> None:
        """Wait until each broker serves a group and a transaction coordinator (Kafka creates
        __consumer_offsets and __transaction_state on first use) and knows its cluster id."""
        for side in self.sides:
            deadline = time.monotonic() + WARMUP_TIMEOUT_S
            for key, key_type in ((fixture.GROUP, 0), (fixture.TXN_DONE, 1)):
                while True:
                    out = side.client.request(ApiKey.FIND_COORDINATOR, 1, {"key": key, "key_type": key_type})
                    if out.kind == "response" and out.body["error_code"] == 0:
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{side.ctx.name}: no coordinator for {key}: {out}")
                    time.sleep(0.2)
            # Every coordinator partition loaded: ids that hash to all of them (Kafka has 50 of
            # each), until none answers COORDINATOR_LOAD_IN_PROGRESS / NOT_AVAILABLE.
            names = [f"pd-warm-{i}" for i in range(WARMUP_IDS)]
            while True:
                groups = side.client.request(ApiKey.DESCRIBE_GROUPS, 0, {"groups": names})
                txns = side.client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": names})
                codes = set()
                if groups.kind == "response":
                    codes |= {g["error_code"] for g in groups.body["groups"]}
                if txns.kind == "response":
                    codes |= {t["error_code"] for t in txns.body["transaction_states"]}
                if groups.kind == txns.kind == "response" and not codes & {14, 15}:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{side.ctx.name}: coordinators still loading: {codes}")
                time.sleep(0.2)
            # Kafka's transaction coordinator also needs its first block of producer ids from
            # the controller: until then InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS.
            while True:
                out = side.client.request(ApiKey.INIT_PRODUCER_ID, 4, {
                    "transactional_id": None, "transaction_timeout_ms": 60_000, "producer_id": -1,
                    "producer_epoch": -1})
                if out.kind == "response" and out.body["error_code"] == 0:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{side.ctx.name}: no producer id: {out}")
                time.sleep(0.2)
            meta = side.client.request(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
            side.ctx.cluster_id = meta.body["cluster_id"]

    def settle(self, expect: list[dict] | None = None) -> None:
        """Wait until each broker's Metadata shows what its last answer promised (`expect`, per
        side: topics "present" with their partition counts, "absent", or "maybe" — an
        auto-creation that may or may not happen) with every partition led and its log
        serving; topic ids are taken from it."""
        for i, side in enumerate(self.sides):
            want = (expect or [{}, {}])[i]
            present: dict[str, int | None] = want.get("present", {})
            absent: set[str] = want.get("absent", set())
            maybe: set[str] = want.get("maybe", set())
            started = time.monotonic()
            deadline = started + SETTLE_TIMEOUT_S
            while True:
                out = side.client.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
                if out.kind == "response":
                    topics = {t["name"]: t for t in out.body["topics"]}
                    for t in out.body["topics"]:
                        if t["topic_id"] != uuid.UUID(int=0):
                            side.ctx.topic_ids[t["name"]] = t["topic_id"]
                    waiting = [n for n in present if n not in topics
                               or (present[n] is not None and len(topics[n]["partitions"]) != present[n])]
                    waiting += [n for n in absent if n in topics]
                    if time.monotonic() - started < MAYBE_WAIT_S:
                        waiting += [n for n in maybe if n not in topics]
                    check = [topics[n] for n in list(present) + list(maybe) if n in topics]
                    led = all(t["error_code"] == 0 and all(p["error_code"] == 0 and p["leader_id"] >= 0
                                                           for p in t["partitions"]) for t in check)
                    if not waiting and led and self._replicas_ready(side, check):
                        break
                if time.monotonic() > deadline:
                    log.warning("%s: metadata did not settle: %s", side.ctx.name, out.kind)
                    break
                time.sleep(0.05)

    @staticmethod
    def _replicas_ready(side: Side, topics: list[dict]) -> bool:
        """Every partition of these topics answers ListOffsets: Kafka lists a topic in
        Metadata a moment before its broker has created the partition's log."""
        wanted = [{"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "timestamp": -1} for p in t["partitions"]]}
            for t in topics]
        if not wanted:
            return True
        out = side.client.request(ApiKey.LIST_OFFSETS, 1, {"replica_id": -1, "topics": wanted})
        return out.kind == "response" and all(p["error_code"] == 0 for t in out.body["topics"]
                                              for p in t["partitions"])

    def expectations(self, side: Side, api_key: int, version: int, body: dict, out: Outcome) -> dict:
        """What a topic-changing request promised on this broker (see `settle`)."""
        present: dict[str, int | None] = {}
        absent: set[str] = set()
        maybe: set[str] = set()
        if out.kind != "response" or not isinstance(body, dict):
            return {}
        resp = out.body
        try:
            if api_key == ApiKey.CREATE_TOPICS and not body.get("validate_only"):
                for t in resp["topics"]:
                    if t["error_code"] == 0 and t["name"]:
                        present[t["name"]] = t.get("num_partitions") if version >= 5 else None
            elif api_key == ApiKey.DELETE_TOPICS:
                names = {v: k for k, v in side.ctx.topic_ids.items()}
                for t in resp["responses"]:
                    name = t.get("name") or names.get(t.get("topic_id"))
                    if t["error_code"] == 0 and name:
                        absent.add(name)
            elif api_key == ApiKey.CREATE_PARTITIONS and not body.get("validate_only"):
                counts = {t["name"]: t["count"] for t in body["topics"] if isinstance(t, dict)}
                for t in resp["results"]:
                    if t["error_code"] == 0 and t["name"] in counts:
                        present[t["name"]] = counts[t["name"]]
            elif api_key == ApiKey.METADATA:
                for t in resp["topics"]:
                    if t.get("name") and t["error_code"] in (0, 3, 5):
                        maybe.add(t["name"])
            elif api_key == ApiKey.PRODUCE:
                for t in resp["responses"]:
                    if any(p["error_code"] == 0 for p in t["partition_responses"]) and t["name"]:
                        present.setdefault(t["name"], None)
        except (KeyError, TypeError):
            pass
        return {"present": present, "absent": absent, "maybe": maybe}

    def settle_txn(self, txn: str) -> None:
        for side in self.sides:
            deadline = time.monotonic() + SETTLE_TIMEOUT_S
            while time.monotonic() < deadline:
                out = side.client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn]})
                if out.kind != "response":
                    break
                states = [t["transaction_state"] for t in out.body["transaction_states"]]
                if not any(s.startswith("Prepare") for s in states):
                    break
                time.sleep(0.05)

    # ------------------------------------------------------------------ cases

    def send(self, case: Case, mutation: hostile.Mutation | None = None, variant: str | None = None,
             isolate: tuple[str, str] | None = None) -> Pair | None:
        variant = variant or case.variant
        encode_version = case.version
        frames = []
        self.last_bodies = []
        self.last_outcomes = []
        try:
            for side in self.sides:
                body = case.body(side.ctx)
                if mutation is not None:
                    original = body
                    body = mutation.apply(body)
                    if isolate is not None and body.get(isolate[0]) == original.get(isolate[0]):
                        body[isolate[0]] = f"{body[isolate[0]]}-{isolate[1]}"
                self.last_bodies.append(body)
                frames.append(side.client.encode(case.api_key, encode_version, body, header_version=case.header_version))
        except EncodeError as exc:
            self.not_sent.append((case.api_key, case.version, variant, str(exc)))
            return None
        header_version = case.header_version if case.header_version is not None else case.version
        for side in self.sides:
            if not side.alive():
                raise BrokerDied(f"{side.ctx.name} exited during the run (before {api_name(case.api_key)} "
                                 f"v{case.version} {variant}):\n{side.log_tail()}")
        started = time.monotonic()
        cids = []
        for side, frame in zip(self.sides, frames):
            try:
                cids.append(side.client.send(frame))
            except OSError as exc:
                side.client.close()
                cids.append(exc)
        outcomes: list[Outcome] = []
        for side, cid in zip(self.sides, cids):
            if isinstance(cid, Exception):
                outcomes.append(Outcome("closed", detail=f"send: {cid}"))
                continue
            decode_version = self._decode_version(case.api_key, header_version, case.version)
            if case.no_response:
                outcomes.append(self._probe(side, case.api_key, decode_version, cid, case.timeout_s))
            else:
                outcomes.append(self._receive(side, case.api_key, decode_version, cid, case.timeout_s))
        self.last_outcomes = outcomes
        if mutation is None and case.capture is not None:
            for side, out in zip(self.sides, outcomes):
                if out.kind == "response":
                    case.capture(side.ctx, out.body)
        pair = Pair(case.api_key, case.version if case.header_version is None else case.header_version,
                    variant, outcomes[0], outcomes[1], [])
        pair.seconds = time.monotonic() - started
        self.pairs.append(pair)
        self._settle_after(case)
        # Compared after settling: ids of topics the request created are known by then.
        self._compare(pair)
        return pair

    @staticmethod
    def _decode_version(api_key: int, header_version: int, body_version: int) -> int | None:
        if api_key == ApiKey.API_VERSIONS and header_version != body_version:
            return 0  # KIP-511: an unsupported ApiVersions version is answered in v0
        rng = schema_range(api_key)
        if rng and rng[0] <= header_version <= rng[1]:
            return header_version
        return None

    def _receive(self, side: Side, api_key: int, version: int | None, cid: int, timeout: float) -> Outcome:
        if version is None:
            out = side.client.receive(api_key, schema_range(api_key)[1], cid, timeout=timeout)
            if out.kind == "undecodable" or out.kind == "response":
                return Outcome("response-to-unknown-version", detail=f"{len(out.raw)} bytes")
            return out
        out = side.client.receive(api_key, version, cid, timeout=timeout)
        if out.kind == "undecodable" and api_key == ApiKey.API_VERSIONS and version != 0 and out.raw:
            # An ApiVersions error answer is a v0 body whatever the version (KIP-511).
            from wire import decode_response
            try:
                _cid, body = decode_response(api_key, 0, out.raw)
                return Outcome("response", body=body, raw=out.raw, detail="decoded as v0")
            except Exception:
                pass
        return out

    def _probe(self, side: Side, api_key: int, version: int, cid: int, timeout: float) -> Outcome:
        """acks=0: an ApiVersions request right behind; its answer first means no answer."""
        probe = side.client.encode(ApiKey.API_VERSIONS, 0, {})
        try:
            probe_cid = side.client.send(probe)
        except OSError as exc:
            side.client.close()
            return Outcome("closed", detail=f"probe: {exc}")
        first = side.client.receive(ApiKey.API_VERSIONS, 0, probe_cid, timeout=timeout)
        if first.kind == "response":
            return Outcome("none", detail="no answer (acks=0)")
        return first

    def _compare(self, pair: Pair) -> None:
        k, t = pair.kafka, pair.trafka
        if k.kind != t.kind:
            pair.differences = [Difference("<outcome>", _describe(k), _describe(t))]
        elif k.kind == "response":
            k.normalised = self.kafka.normaliser.body(pair.api_key, k.body)
            t.normalised = self.trafka.normaliser.body(pair.api_key, t.body)
            pair.differences = compare(k.normalised, t.normalised)

    def run_case(self, case: Case, tag: str) -> None:
        hostiles: list[hostile.Mutation] = []
        if case.primary and not case.prep:
            try:
                hostiles = hostile.mutations(case.api_key, case.version, case.body(self.kafka.ctx), tag)
            except Exception as exc:  # a generator bug must not end the run silently
                self.not_sent.append((case.api_key, case.version, "hostile:*", f"generator: {exc!r}"))
        if case.hostile_first:
            self._hostiles(case, hostiles)
        self.send(case)
        if not case.hostile_first:
            self._hostiles(case, hostiles)

    def _hostiles(self, case: Case, hostiles: list[hostile.Mutation]) -> None:
        for i, m in enumerate(hostiles):
            reason = next((why for pattern, why in self.skip.items() if re.fullmatch(pattern, m.label)), None)
            if reason is not None:
                self.not_sent.append((case.api_key, case.version, f"hostile:{m.label}", reason))
                continue
            timeout = next((t for suffix, t in case.hostile_timeouts.items() if m.label.endswith(suffix)),
                           case.timeout_s)
            key = (case.api_key, m.label)
            if key in self.unanswered:
                timeout = min(timeout, UNANSWERED_AGAIN_S)
            hostile_case = Case(case.api_key, case.version, f"hostile:{m.label}", case.body,
                                no_response=case.no_response, timeout_s=timeout, settle=case.settle,
                                txn_settle=case.txn_settle)
            pair = self.send(hostile_case, m, hostile_case.variant,
                             isolate=(case.isolate, f"h{i}") if case.isolate else None)
            if pair is not None and "timeout" in (pair.kafka.kind, pair.trafka.kind):
                self.unanswered.add(key)

    def _settle_after(self, case: Case) -> None:
        started = time.monotonic()
        try:
            self._settle_for(case)
        finally:
            self.settle_seconds += time.monotonic() - started

    def _settle_for(self, case: Case) -> None:
        if (case.settle or case.api_key in TOPIC_CHANGING) and len(self.last_outcomes) == 2:
            self.settle([self.expectations(side, case.api_key, case.version, body, out)
                         for side, body, out in zip(self.sides, self.last_bodies, self.last_outcomes)])
        if case.txn_settle:
            self.settle_txn(case.txn_settle)

    def unsupported_versions(self, api_key: int) -> None:
        """One request a version above, and one below, what either broker advertises."""
        k_lo, k_hi = self.kafka.versions[api_key]
        t_lo, t_hi = self.trafka.versions[api_key]
        lo, hi = self.common[api_key]
        primary = next((c for c in case_lists.API_CASES[api_key](hi) if c.primary), None)
        if primary is None:
            return
        too_new = max(k_hi, t_hi) + 1
        self.send(Case(api_key, hi, "too-new-version", primary.body, header_version=too_new,
                       no_response=primary.no_response))
        too_old = min(k_lo, t_lo) - 1
        if too_old >= 0:
            rng = schema_range(api_key)
            body_version = too_old if rng and rng[0] <= too_old else lo
            old_primary = next((c for c in case_lists.API_CASES[api_key](lo) if c.primary), primary)
            self.send(Case(api_key, body_version, "too-old-version", old_primary.body, header_version=too_old,
                           no_response=old_primary.no_response))

    def run(self) -> None:
        k = self.advertised(self.kafka)
        t = self.advertised(self.trafka)
        self.common = intersection(k, t)
        self.warm_up()
        for case in fixture.cases():
            self.send(case)
        self.settle()
        for api_key, (lo, hi) in self.common.items():
            if self.apis is not None and api_key not in self.apis:
                continue
            builder = case_lists.API_CASES.get(api_key)
            if builder is None:
                log.warning("no cases for %s", api_name(api_key))
                continue
            for version in range(lo, hi + 1):
                for case in builder(version):
                    self.run_case(case, f"a{api_key}v{version}")
            self.unsupported_versions(api_key)
            log.info("%s done: %d pairs so far", api_name(api_key), len(self.pairs))


def _describe(out: Outcome) -> Any:
    if out.kind == "response":
        return {"response": {k: v for k, v in out.body.items() if "error" in k}}
    return f"{out.kind}: {out.detail}" if out.detail else out.kind
