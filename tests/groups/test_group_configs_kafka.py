"""Group configs answered by Trafka as Apache Kafka 4.4 answers them.

The same AlterConfigs, IncrementalAlterConfigs and DescribeConfigs requests on GROUP
resources go to a Kafka 4.4.0 node (KRaft, compat_tests/kafka_brokers.KafkaBroker) and to
a single Trafka broker, both with the suite's settings (compat_tests/brokers.SUITE_SETTINGS:
group.consumer.min.session.timeout.ms=6000, group.consumer.session.timeout.ms=10000, ...),
and the answers are compared whole: error codes and messages, and every described entry
(value, source, synonyms, type, documentation). Valid changes, unknown names, values out of
the broker's bounds, bad types, a session timeout not above its heartbeat interval, a group
nobody uses, a classic group, a consumer group and a share group with members, deletes,
validate_only, and the describe versions. The applied values are compared too: the
heartbeat interval a consumer group's and a share group's members are given.

One difference is normalised: a described resource's error_message, "" in Kafka 4's answers
and null in Trafka's (a difference of every DescribeConfigs answer, not of GROUP resources).
Entries are compared regardless of order (Kafka lists them in a hash map's order).
"""

from __future__ import annotations

import time
import uuid

import pytest

from compat_tests.brokers import TRAFKA_SUITE_ARGS, started
from compat_tests.kafka_brokers import KafkaBroker
from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.registry import ApiKey as K

pytestmark = pytest.mark.timeout(600)

GROUP = 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(Kafka 4.4 port, Trafka port), both with the suite's settings and a topic "t"."""
    kafka = started(lambda: KafkaBroker(tmp_path_factory.mktemp("kafka44")))
    trafka = BrokerProcess(tmp_path_factory.mktemp("trafka") / "data", *TRAFKA_SUITE_ARGS)
    try:
        trafka.start()
        for port in (kafka.port, trafka.port):
            create_topic(port, "t", 1)
        yield kafka.port, trafka.port
    finally:
        trafka.kill()
        kafka.stop()


def incremental(port: int, group: str, ops, validate_only: bool = False) -> list[dict]:
    return raw_request("127.0.0.1", port, K.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": GROUP, "resource_name": group, "configs": [
            {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
        "validate_only": validate_only})["responses"]


def replace(port: int, group: str, configs, validate_only: bool = False) -> list[dict]:
    return raw_request("127.0.0.1", port, K.ALTER_CONFIGS, 2, {
        "resources": [{"resource_type": GROUP, "resource_name": group, "configs": [
            {"name": n, "value": v} for n, v in configs]}], "validate_only": validate_only})["responses"]


def describe(port: int, group: str, keys=None, *, version: int = 4, documentation: bool = False) -> list[dict]:
    results = raw_request("127.0.0.1", port, K.DESCRIBE_CONFIGS, version, {
        "resources": [{"resource_type": GROUP, "resource_name": group, "configuration_keys": keys}],
        "include_synonyms": True, "include_documentation": documentation})["results"]
    return [{**r, "error_message": r["error_message"] or None, "configs": sorted(r["configs"], key=lambda c: c["name"])}
            for r in results]


def both(pair, call, *args, **kwargs):
    return tuple(call(port, *args, **kwargs) for port in pair)


# (request, group, arguments): sent in this order to both brokers, which start empty.
CASES = [
    (describe, "fresh", ()),
    (describe, "fresh", (["consumer.session.timeout.ms", "share.auto.offset.reset", "nope"],), {"documentation": True}),
    (incremental, "g1", ([("consumer.session.timeout.ms", SET, "20000"), ("share.auto.offset.reset", SET, "earliest"),
                          ("share.record.lock.duration.ms", SET, " 20000 ")],)),
    (describe, "g1", ()),
    (describe, "g1", (), {"documentation": True}),
    (describe, "g1", (), {"version": 1}),
    (describe, "g1", (), {"version": 2}),
    (describe, "g1", (), {"version": 3, "documentation": True}),
    # unknown names, types, definition rules
    (incremental, "g2", ([("nope", SET, "1")],)),
    (incremental, "g2", ([("consumer.session.timeout.ms", SET, "abc")],)),
    (incremental, "g2", ([("consumer.session.timeout.ms", SET, "")],)),
    (incremental, "g2", ([("consumer.session.timeout.ms", SET, "99999999999")],)),
    (incremental, "g2", ([("share.record.lock.duration.ms", SET, "500")],)),
    (incremental, "g2", ([("share.delivery.count.limit", SET, "1")],)),
    (incremental, "g2", ([("share.isolation.level", SET, "READ_COMMITTED")],)),
    (incremental, "g2", ([("share.renew.acknowledge.enable", SET, "yes")],)),
    (incremental, "g2", ([("share.auto.offset.reset", SET, "none")],)),
    (incremental, "g2", ([("share.auto.offset.reset", SET, "by_duration:xx")],)),
    (incremental, "g2", ([("share.auto.offset.reset", SET, "by_duration:-PT1H")],)),
    (incremental, "g2", ([("streams.acceptable.recovery.lag", SET, "-1")],)),
    (incremental, "g2", ([("streams.num.standby.replicas", SET, "-1")],)),
    # the broker's bounds
    (incremental, "g2", ([("consumer.session.timeout.ms", SET, "1000")],)),
    (incremental, "g2", ([("consumer.session.timeout.ms", SET, "100000000")],)),
    (incremental, "g2", ([("consumer.heartbeat.interval.ms", SET, "100")],)),
    (incremental, "g2", ([("consumer.assignment.interval.ms", SET, "20000")],)),
    (incremental, "g2", ([("share.session.timeout.ms", SET, "30000")],)),
    (incremental, "g2", ([("share.heartbeat.interval.ms", SET, "20000")],)),
    (incremental, "g2", ([("share.record.lock.duration.ms", SET, "5000")],)),
    (incremental, "g2", ([("share.delivery.count.limit", SET, "20")],)),
    (incremental, "g2", ([("share.partition.max.record.locks", SET, "20000")],)),
    (incremental, "g2", ([("streams.session.timeout.ms", SET, "1000")],)),
    (incremental, "g2", ([("streams.num.standby.replicas", SET, "5")],)),
    (incremental, "g2", ([("streams.num.warmup.replicas", SET, "50")],)),
    (incremental, "g2", ([("streams.task.offset.interval.ms", SET, "100")],)),
    (incremental, "g2", ([("streams.assignor.name", SET, "foo")],)),
    (incremental, "g2", ([("errors.deadletterqueue.topic.name", SET, "__dlq")],)),
    (incremental, "g2", ([("streams.rack.aware.assignment.tags", SET, "a, b,a")],)),
    # session above heartbeat: the group's own values, else the broker's (10000 / 1000)
    (incremental, "g2", ([("consumer.heartbeat.interval.ms", SET, "11000")],)),
    (incremental, "g2", ([("consumer.heartbeat.interval.ms", SET, "9000")],)),
    (incremental, "g2", ([("consumer.session.timeout.ms", SET, "8000")],)),
    (incremental, "g2", ([("consumer.session.timeout.ms", SET, "20000"), ("consumer.heartbeat.interval.ms", SET, "12000")],)),
    # values Kafka accepts (and prints parsed)
    (incremental, "g3", ([("consumer.session.timeout.ms", SET, " 7000 "), ("share.renew.acknowledge.enable", SET, "TRUE"),
                          ("share.auto.offset.reset", SET, "by_duration:P1DT2H"), ("share.isolation.level", SET, " read_committed"),
                          ("streams.rack.aware.assignment.tags", SET, "a, b"), ("streams.assignor.name", SET, "sticky"),
                          ("errors.deadletterqueue.topic.name", SET, "dlq"), ("streams.acceptable.recovery.lag", SET, "99999999999"),
                          ("consumer.assignor.offload.enable", SET, "false")],)),
    (describe, "g3", ()),
    (describe, "g3", (["consumer.assignor.offload.enable", "share.assignor.offload.enable"],)),
    # request-level checks, in Kafka's order
    (incremental, "g4", ([("consumer.session.timeout.ms", SET, None)],)),
    (incremental, "g4", ([("consumer.session.timeout.ms", SUBTRACT, None)],)),
    (incremental, "g4", ([("consumer.session.timeout.ms", APPEND, "7000")],)),
    (incremental, "g4", ([("streams.rack.aware.assignment.tags", APPEND, "a")],)),
    (incremental, "g4", ([("nope", APPEND, "x")],)),
    (incremental, "g4", ([("consumer.session.timeout.ms", APPEND, "1"), ("x", SET, None)],)),
    (incremental, "g4", ([("consumer.session.timeout.ms", SET, "7000"), ("consumer.session.timeout.ms", DELETE, None)],)),
    (incremental, "", ([("consumer.session.timeout.ms", SET, "7000")],)),
    (incremental, "", ([("x", APPEND, "1")],)),
    (incremental, "", ([("consumer.session.timeout.ms", SET, None)],)),
    (describe, "", ()),
    # validate_only, delete (also of a name never set, or unknown), AlterConfigs' whole set
    (incremental, "g4", ([("share.auto.offset.reset", SET, "earliest")],), {"validate_only": True}),
    (incremental, "g4", ([("consumer.session.timeout.ms", SET, "7000"), ("consumer.heartbeat.interval.ms", SET, "2000")],)),
    (incremental, "g4", ([("consumer.session.timeout.ms", DELETE, None), ("nope", DELETE, None)],)),
    (describe, "g4", (["consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "share.auto.offset.reset"],)),
    (replace, "g4", ([("share.isolation.level", "read_committed")],)),
    (describe, "g4", ()),
    (replace, "g4", ([("consumer.session.timeout.ms", "1")],)),
    (replace, "g4", ([("nope", "1")],)),
    (replace, "g4", ([("consumer.session.timeout.ms", None)],)),
    (replace, "g4", ([("consumer.session.timeout.ms", "8000"), ("consumer.session.timeout.ms", "9000")],)),
    (replace, "g4", ([("x", None), ("x", "1")],)),
    (replace, "g4", ([("consumer.session.timeout.ms", "9000")],), {"validate_only": True}),
    (replace, "", ([("consumer.session.timeout.ms", "8000")],)),
    (replace, "", ([("x", None)],)),
    (describe, "g4", ()),
]


@pytest.mark.parametrize("case", range(len(CASES)), ids=lambda i: f"{i:02d}-{CASES[i][0].__name__}-{CASES[i][1] or 'empty'}")
def test_group_config_requests_answered_as_kafka_answers(pair, case):
    call, group, args, *kwargs = CASES[case]
    kafka, trafka = both(pair, call, group, *args, **(kwargs[0] if kwargs else {}))
    assert trafka == kafka


def _find_coordinator(port: int, group: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        found = raw_request("127.0.0.1", port, K.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
        if found["coordinators"][0]["error_code"] == 0 or time.monotonic() > deadline:
            return
        time.sleep(0.3)


def test_a_classic_group_takes_group_configs_as_in_kafka(pair):
    """An existing classic group (offsets committed outside group management): no check of
    its type, in either broker."""
    answers = []
    for port in pair:
        _find_coordinator(port, "classic")
        deadline = time.monotonic() + 30
        while True:
            committed = raw_request("127.0.0.1", port, K.OFFSET_COMMIT, 8, {
                "group_id": "classic", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                         "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
            code = committed["topics"][0]["partitions"][0]["error_code"]
            if code not in (14, 15, 16) or time.monotonic() > deadline:  # the coordinator still loading
                break
            time.sleep(0.3)
        assert code == 0, committed
        listed = raw_request("127.0.0.1", port, K.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
        assert [(g["group_id"], g["group_type"]) for g in listed["groups"]] == [("classic", "classic")], listed
        answers.append((incremental(port, "classic", [("consumer.session.timeout.ms", SET, "7000")]),
                        describe(port, "classic", ["consumer.session.timeout.ms"])))
    assert answers[1] == answers[0]
    assert answers[0][0][0]["error_code"] == 0


def _consumer_heartbeat(port: int, group: str, member: str, epoch: int) -> dict:
    body = {"group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 30000 if epoch == 0 else -1, "subscribed_topic_names": ["t"] if epoch == 0 else None,
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": [] if epoch == 0 else None}
    deadline = time.monotonic() + 30
    while True:
        r = raw_request("127.0.0.1", port, K.CONSUMER_GROUP_HEARTBEAT, 1, body)
        if r["error_code"] not in (14, 15, 16) or time.monotonic() > deadline:  # coordinator still loading
            return r
        time.sleep(0.3)


def test_consumer_group_members_are_given_the_groups_heartbeat_interval_as_in_kafka(pair):
    seen = []
    for port in pair:
        member = uuid.uuid4().hex[:22]
        joined = _consumer_heartbeat(port, "consumer", member, 0)
        assert joined["error_code"] == 0, joined
        changed = incremental(port, "consumer", [("consumer.heartbeat.interval.ms", SET, "1500")])
        again = _consumer_heartbeat(port, "consumer", member, joined["member_epoch"])
        deleted = incremental(port, "consumer", [("consumer.heartbeat.interval.ms", DELETE, None)])
        last = _consumer_heartbeat(port, "consumer", member, again["member_epoch"])
        seen.append((joined["heartbeat_interval_ms"], changed, again["error_code"], again["heartbeat_interval_ms"],
                     deleted, last["heartbeat_interval_ms"]))
    assert seen[1] == seen[0]
    assert seen[0][3] == 1500 and seen[0][5] == 1000  # the group's, then the suite's group.consumer.heartbeat.interval.ms


def test_share_group_members_are_given_the_groups_heartbeat_interval_as_in_kafka(pair):
    seen = []
    for port in pair:
        set_first = incremental(port, "share", [("share.heartbeat.interval.ms", SET, "6000")])
        _find_coordinator(port, "share")
        body = {"group_id": "share", "member_id": uuid.uuid4().hex[:22], "member_epoch": 0, "rack_id": None,
                "subscribed_topic_names": ["t"]}
        joined = raw_request("127.0.0.1", port, K.SHARE_GROUP_HEARTBEAT, 1, body)
        described = describe(port, "share", ["share.heartbeat.interval.ms", "share.session.timeout.ms"])
        seen.append((set_first, joined["error_code"], joined["heartbeat_interval_ms"], described))
    assert seen[1] == seen[0]
    assert seen[0][2] == 6000
