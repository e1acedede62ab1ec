"""The scenario-level differential check (compat_tests/observe) against itself: what it records,
what normalising keeps and drops, that a real difference is found and fails the run, and that
an allow-list entry explains only what it names.

The logs here are made by running an in-memory adapter through the real recorder: two "brokers"
that answer alike except for names, ids, ports and clocks must normalise to the same log, and
one changed answer must come out as exactly that difference.
"""

from __future__ import annotations

import itertools
import json
import textwrap
import threading
import uuid

import pytest

from compat_tests.clients.base import (
    ClientError, ClusterMetadata, Delivery, GroupInfo, GroupMemberInfo, Message, Record,
    TopicDescription, TopicMetadata, ZERO_UUID, kafka_uuid, wait_until)
from compat_tests.helpers import unique_name
from compat_tests import recording as record
from compat_tests.observe import allowlist, compare, normalise

pytest_plugins = ["pytester"]


class MemoryBroker:
    """Just enough state to answer the verbs below the way a broker would."""

    def __init__(self, node: int, port: int, *, log_append: bool = False,
                 exists_code: int = 36) -> None:
        self.node, self.port = node, port
        self.log_append = log_append
        self.exists_code = exists_code
        self.topics: dict[str, list[list[Message]]] = {}
        self.ids: dict[str, str] = {}
        self.group = ""
        self.clock = itertools.count(1_700_000_000_000 + node * 7919, 3)


class MemoryAdapter:
    """A client adapter over a MemoryBroker (the recorder only sees verbs and answers)."""

    name = "memory"

    def __init__(self, broker: MemoryBroker) -> None:
        self.b = broker
        self.metadata_calls = 0

    def create_topic(self, name, partitions=1, configs=None):
        if name in self.b.topics:
            raise ClientError(f"Topic '{name}' already exists on 127.0.0.1:{self.b.port}.",
                              self.b.exists_code)
        self.b.topics[name] = [[] for _ in range(partitions)]
        self.b.ids[name] = kafka_uuid(uuid.uuid4().bytes)

    def metadata(self, topics=None, allow_auto_create=False):
        self.metadata_calls += 1
        leader = -1 if self.metadata_calls < 3 else self.b.node  # a leader after a while
        names = list(self.b.topics) if topics is None else topics
        return ClusterMetadata(
            {self.b.node: ("127.0.0.1", self.b.port)},
            {t: TopicMetadata(0 if t in self.b.topics else 3,
                              {p: leader for p in range(len(self.b.topics.get(t, [])))})
             for t in names + ["__consumer_offsets"]})

    def describe_topic(self, name):
        return TopicDescription(name, self.b.ids[name],
                                {p: self.b.node for p in range(len(self.b.topics[name]))})

    def produce(self, topic, messages, acks="all", compression="none", idempotent=None):
        out = []
        for m in messages:
            log = self.b.topics[topic][m.partition or 0]
            log.append(m)
            out.append(Delivery(m.partition or 0, len(log) - 1))
        return out

    def consume(self, topic, n, **kwargs):
        records = []
        for p, log in enumerate(self.b.topics[topic]):
            for offset, m in enumerate(log):
                stamp = next(self.b.clock) if self.b.log_append or m.timestamp is None \
                    else m.timestamp
                records.append(Record(topic, p, offset, m.key, m.value, m.headers, stamp,
                                      "LogAppendTime" if self.b.log_append else "CreateTime"))
        # partitions interleaved in an order of the broker's choosing
        records.sort(key=lambda r: (r.offset, -r.partition if self.b.node % 2 else r.partition))
        return records[:n]

    def list_groups(self):
        return [f"other-test-{uuid.uuid4().hex[:10]}", self.b.group]

    def describe_group(self, group):
        members = [GroupMemberInfo(f"compat-{uuid.uuid4()}", "compat", frozenset({(t, 0)}))
                   for t in sorted(self.b.topics)]
        return GroupInfo(group, "Stable", "consumer", members)


def scenario(adapter_for, log_append=False, exists_code=36, node=1, port=9092):
    """A scenario run against one broker: returns its normalised observation."""
    broker = MemoryBroker(node, port, log_append=log_append, exists_code=exists_code)
    log = record.start("test")
    try:
        client = record.recording(adapter_for(broker), "memory")
        topic = unique_name("scenario")
        broker.group = unique_name("g-scenario")
        client.create_topic(topic, 2)
        wait_until(lambda: all(v >= 0 for v in client.metadata([topic]).topics[topic]
                               .partitions.values()), 5, 0.001, "leaders")
        with pytest.raises(ClientError):
            client.create_topic(topic, 2)
        client.describe_topic(topic)
        chosen = 1_600_000_000_000 + port  # a time the scenario chose (now - x)
        client.produce(topic, [Message(b"v%d" % i, b"k", partition=i % 2,
                                       timestamp=chosen + i * 1000) for i in range(4)]
                       + [Message(bytes(range(256)) * 2 + uuid.uuid4().bytes, partition=0)])
        client.consume(topic, 5)
        client.metadata()
        client.list_groups()
        client.describe_group(broker.group)
        worker = threading.Thread(target=lambda: client.metadata([topic]), name="Thread-7 (bg)")
        worker.start()
        worker.join()
    finally:
        record.stop()
    streams = log.close()
    return normalise.normalise(streams)


def test_two_brokers_answering_alike_normalise_to_the_same_log():
    a, applied = scenario(MemoryAdapter, node=1, port=9092)
    b, _ = scenario(MemoryAdapter, node=0, port=39117)
    assert a == b
    diffs, compared = compare.compare_streams(a, b, pair="x~y", scenario="s", client="c")
    assert diffs == [] and compared == sum(len(s) for s in a.values())
    for rule in ("unique-names", "foreign-names", "uuids", "node-ids", "ports", "topic-ids",
                 "wall-clock", "random-bytes", "error-text", "partition-interleaving", "unordered"):
        assert applied[rule] > 0, f"rule {rule} never applied: the scenario does not cover it"
    main = a["main"]
    # the poll kept its last answer only (leaders), marked as polled
    polled = [e for e in main if e.get("polled")]
    assert len(polled) == 1 and polled[0]["ok"]["topics"]["scenario-<1>"]["partitions"] == {
        "0": "node#1", "1": "node#1"}
    # the background thread's call is a stream of its own, named without its counter
    assert list(a) == ["main", "Thread (bg)"]
    # chosen timestamps stay relative, the error keeps its code and loses its text
    consumed = next(e for e in main if e["verb"] == "consume")["ok"]
    assert [r["timestamp"] for r in consumed["scenario-<1>/0"]] == ["<t0>", "<t0+2000>", "<wall-clock>"]
    assert consumed["scenario-<1>/0"][2]["value"] == "<bytes#1 len=528>"
    raised = next(e for e in main if "raised" in e)["raised"]
    assert raised == {"type": "ClientError", "code": 36, "error": "TOPIC_ALREADY_EXISTS"}
    # only this test's names survive in listings
    assert next(e for e in main if e["verb"] == "list_groups")["ok"] == ["g-scenario-<2>"]
    everything = json.dumps(a)
    assert "__consumer_offsets" not in everything and "other-test" not in everything


def test_a_changed_answer_is_found_with_its_path():
    a, _ = scenario(MemoryAdapter)
    b, _ = scenario(MemoryAdapter, log_append=True, exists_code=3, port=40000)
    diffs, _ = compare.compare_streams(a, b, pair="kafka~trafka", scenario="s", client="c")
    paths = {(d.verb, d.path) for d in diffs}
    assert ("create_topic", "raised.code") in paths and ("create_topic", "raised.error") in paths
    assert ("consume", "ok.scenario-<1>/0[0].timestamp_type") in paths
    assert ("consume", "ok.scenario-<1>/0[0].timestamp") in paths
    d = next(d for d in diffs if d.path == "raised.code")
    assert (d.reference, d.other, d.where()) == ("36", "3", "main[2] client#1:memory.create_topic")


def test_a_call_made_on_one_side_only_is_a_difference_and_the_rest_stays_aligned():
    entry = {"obj": "c#1", "verb": "produce", "args": ["t-<1>"], "ok": [{"offset": 0}]}
    extra = {"obj": "c#1", "verb": "metadata", "args": [["t-<1>"]], "ok": {}}
    last = {"obj": "c#1", "verb": "consume", "args": ["t-<1>", 1], "ok": {"t-<1>/0": []}}
    diffs, compared = compare.compare_streams({"main": [entry, last]},
                                              {"main": [entry, extra, last]},
                                              pair="p", scenario="s", client="c")
    assert compared == 2
    assert [(d.verb, d.path, d.reference) for d in diffs] == [("metadata", "", compare.ABSENT)]


def test_a_list_of_another_length_is_one_difference_for_its_tail():
    a = {"ok": {"t-<1>/0": [{"offset": 0}, {"offset": 1}]}}
    b = {"ok": {"t-<1>/0": [{"offset": 0}, {"offset": 1}, {"offset": 2}, {"offset": 3}]}}
    assert compare.deep_diff(a, b) == [("ok.t-<1>/0[2:]", compare.ABSENT,
                                        [{"offset": 2}, {"offset": 3}])]
    d = compare.Difference("p", "s", "c", "main", 0, "client#1:x", "consume", "ok.t-<1>/0[2:]",
                           compare.ABSENT, "[...]")
    tail = allowlist.Allowance("s", "consume", "*", "why", one_side_only=True)
    assert allowlist.explain(d, (tail,)) is tail
    changed = compare.Difference("p", "s", "c", "main", 0, "client#1:x", "consume",
                                 "ok.t-<1>/0[1].value", '"a"', '"b"')
    assert allowlist.explain(changed, (tail,)) is None


def test_an_allowance_explains_only_what_it_names():
    d = compare.Difference("kafka~trafka", "compression[lz4]", "kcat", "main", 3,
                           "client#1:kcat", "describe_configs", "ok.trafka.fsync.policy",
                           compare.ABSENT, '"never"')
    yes = allowlist.Allowance("compression[lz4]", "describe_configs", "ok.trafka.*", "why")
    no_scenario = allowlist.Allowance("compression[gzip]", "describe_configs", "ok.trafka.*", "why")
    no_bracket_class = allowlist.Allowance("compression[lz]", "*", "*", "why")
    no_path = allowlist.Allowance("*", "describe_configs", "ok.confluent.*", "why")
    assert allowlist.explain(d, (no_scenario, no_bracket_class, no_path, yes)) is yes
    assert allowlist.explain(d, (no_scenario, no_bracket_class, no_path)) is None


def test_a_member_is_compared_by_sizes_and_the_group_as_a_whole():
    """Which member holds which partitions is the member ids' doing: two runs where the
    members swapped their partitions compare equal; a group missing a partition does not."""

    class Member:
        def __init__(self, parts):
            self.parts = frozenset(("t-0123456789", p) for p in parts)

        def assignment(self):
            return self.parts

        def records(self):
            return [Record("t-0123456789", p, 0, None, b"x", (), 1, "CreateTime")
                    for _t, p in sorted(self.parts)]

    def run(first, second):
        log = record.start("t")
        members = [record.recording_member(Member(first)), record.recording_member(Member(second))]
        wait_until(lambda: [m.assignment() for m in members], 1, 0.01)
        for m in members:
            m.records()
        record.stop()
        return normalise.normalise(log.close())[0]

    a, b = run([0, 1], [2, 3]), run([2, 3], [0, 1])
    assert a == b
    assert a["main"][-1]["ok"] == {f"t-<unknown-suffix>/{p}": [
        {"offset": 0, "key": None, "value": "b'x'", "headers": [], "timestamp": 1,
         "timestamp_type": "CreateTime"}] for p in range(4)}
    short = run([0, 1], [2])
    diffs, _ = compare.compare_streams(a, short, pair="p", scenario="s", client="c")
    assert {d.verb for d in diffs} >= {"assignments (unordered)", "records (pooled)"}


def test_zero_topic_id_is_kept_and_others_numbered():
    n = normalise.Normaliser()
    real = kafka_uuid(uuid.uuid4().bytes)
    assert n.topic_id(ZERO_UUID) == ZERO_UUID
    assert n.topic_id(real) == n.topic_id(real) == "<topic-id#1>"


CONFTEST = """
import pytest
from compat_tests.observe.plugin import ObservationPlugin
from compat_tests.observe.allowlist import Allowance

ALLOWED = {allowed}

def pytest_configure(config):
    config.pluginmanager.register(ObservationPlugin(config, config.rootpath, ALLOWED), "observe")

def pytest_generate_tests(metafunc):
    if "broker_kind" in metafunc.fixturenames:
        metafunc.parametrize("broker_kind", ["kafka", "trafka"])
    if "client_name" in metafunc.fixturenames:
        metafunc.parametrize("client_name", ["memory"])
"""

SCENARIO = """
from compat_tests.clients.base import ClientError
from compat_tests import recording as record

class Adapter:
    def __init__(self, kind):
        self.kind = kind
    def list_offsets(self, topic, partition, spec):
        return 7 if self.kind == "kafka" else {other}
    def delete_group(self, group):
        raise ClientError("gone", 69)

def test_offsets(broker_kind, client_name):
    client = record.recording(Adapter(broker_kind), client_name)
    client.list_offsets("t", 0, "latest")
    try:
        client.delete_group("g")
    except ClientError:
        pass
"""


def _suite(pytester: pytest.Pytester, other: int, allowed: str = "()") -> None:
    pytester.makeconftest(CONFTEST.format(allowed=allowed))
    (pytester.path / "compat_tests").mkdir(exist_ok=True)  # the plugin watches compat tests only
    (pytester.path / "compat_tests" / "test_scenario.py").write_text(
        textwrap.dedent(SCENARIO.format(other=other)))


def test_plugin_fails_the_run_on_a_difference_and_writes_the_report(pytester):
    _suite(pytester, other=8)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "compat_tests")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*observed answers agree (kafka vs trafka)*",
                                 "*offsets ?memory? main?0? client#1:memory.list_offsets ok:",
                                 "*reference 7*", "*other     8*"])
    report = json.loads((pytester.path / "differences.json").read_text())
    assert report["counts"]["pairs_compared"] == 1
    assert report["counts"]["calls_compared"] == 2
    assert [d["path"] for d in report["unexplained"]] == ["ok"]
    assert (pytester.path / "observations" / "trafka" / "offsets~memory.json").exists()
    assert "1 unexplained" in (pytester.path / "differences.md").read_text()


def test_plugin_passes_when_alike_or_allow_listed(pytester):
    _suite(pytester, other=7)
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "compat_tests").assert_outcomes(passed=3)
    _suite(pytester, other=8, allowed='(Allowance("offsets", "list_offsets", "ok", "a reason"),)')
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "compat_tests")
    result.assert_outcomes(passed=3)
    report = json.loads((pytester.path / "differences.json").read_text())
    assert report["allow_list_entries_used"][0]["reason"] == "a reason"
