"""Group configs (GROUP config resources, Kafka 4.4's GroupConfig) on a single broker, over
real sockets: set, checked against the broker's bounds with Kafka's messages, described
with Kafka's sources and synonyms, deleted, kept across a restart (in
__share_group_state), and applied — a share group's members get its share.* timings and
limits. (The consumer.* ones: test_group_configs_consumer.py; the same requests answered by
Kafka 4.4 itself: test_group_configs_kafka.py.)"""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, raw_request
from tests.groups.share_wire import ShareClient, acquired, create_topic, produce
from wire.errors import ErrorCode as E
from wire.registry import ApiKey as K

pytest.importorskip("confluent_kafka")

GROUP = 32
SET, DELETE, APPEND = 0, 1, 2
GROUP_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 8, 4, 5
RELEASE = 2


@pytest.fixture
def broker(tmp_path):
    with BrokerProcess(tmp_path / "data", "--set", "group.consumer.session.timeout.ms=50000") as b:
        yield b


def alter(broker, group: str, ops: list[tuple[str, int, str | None]], validate_only: bool = False) -> tuple:
    r = raw_request("127.0.0.1", broker.port, K.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": GROUP, "resource_name": group, "configs": [
            {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
        "validate_only": validate_only})["responses"][0]
    return r["error_code"], r["error_message"]


def replace(broker, group: str, configs: dict[str, str | None]) -> tuple:
    r = raw_request("127.0.0.1", broker.port, K.ALTER_CONFIGS, 2, {
        "resources": [{"resource_type": GROUP, "resource_name": group, "configs": [
            {"name": n, "value": v} for n, v in configs.items()]}], "validate_only": False})["responses"][0]
    return r["error_code"], r["error_message"]


def describe(broker, group: str, keys: list[str] | None = None) -> dict:
    r = raw_request("127.0.0.1", broker.port, K.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": GROUP, "resource_name": group, "configuration_keys": keys}],
        "include_synonyms": True, "include_documentation": False})["results"][0]
    assert r["error_code"] == 0, r
    return {c["name"]: c for c in r["configs"]}


def chain(entry: dict) -> list[tuple[str, str, int]]:
    return [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]]


def test_group_configs_set_described_deleted_and_kept_across_a_restart(broker):
    # before: INVALID_CONFIG "unknown group config consumer.session.timeout.ms" (only two share configs known)
    assert alter(broker, "g", [("consumer.session.timeout.ms", SET, "52000"),
                               ("share.record.lock.duration.ms", SET, " 20000 ")]) == (E.NONE, None)
    # before: INVALID_REQUEST "unsupported resource type 32"
    configs = describe(broker, "g")
    assert "consumer.assignor.offload.enable" not in configs  # internal, not set: not shown
    session = configs["consumer.session.timeout.ms"]
    assert (session["value"], session["config_source"], session["read_only"]) == ("52000", GROUP_CONFIG, False)
    assert chain(session) == [("consumer.session.timeout.ms", "52000", GROUP_CONFIG),
                              ("group.consumer.session.timeout.ms", "50000", STATIC_BROKER_CONFIG),
                              ("group.consumer.session.timeout.ms", "45000", DEFAULT_CONFIG)]
    assert configs["share.record.lock.duration.ms"]["value"] == "20000"  # shown parsed, as Kafka
    assert chain(configs["share.auto.offset.reset"]) == [("share.auto.offset.reset", "latest", DEFAULT_CONFIG)]
    assert configs["consumer.heartbeat.interval.ms"]["config_source"] == DEFAULT_CONFIG
    # a group nobody configured: every value is the broker's
    other = describe(broker, "other", ["consumer.session.timeout.ms", "nope"])
    assert list(other) == ["consumer.session.timeout.ms"]
    assert other["consumer.session.timeout.ms"]["config_source"] == STATIC_BROKER_CONFIG

    assert alter(broker, "g", [("consumer.session.timeout.ms", DELETE, None)]) == (E.NONE, None)
    broker.restart()
    configs = describe(broker, "g", ["consumer.session.timeout.ms", "share.record.lock.duration.ms"])
    assert configs["consumer.session.timeout.ms"]["value"] == "50000"
    assert configs["share.record.lock.duration.ms"]["config_source"] == GROUP_CONFIG
    # AlterConfigs replaces the whole set
    assert replace(broker, "g", {"share.isolation.level": "read_committed"}) == (E.NONE, None)
    configs = describe(broker, "g", ["share.record.lock.duration.ms", "share.isolation.level"])
    assert configs["share.record.lock.duration.ms"]["config_source"] == DEFAULT_CONFIG
    assert configs["share.isolation.level"]["value"] == "read_committed"


def test_group_configs_refused_with_kafkas_codes_and_messages(broker):
    assert alter(broker, "g", [("nope", SET, "1")]) == (E.INVALID_CONFIG, "Unknown group config name: nope")
    # the broker's bounds (group.consumer.min/max.session.timeout.ms: 45000..60000 by default)
    assert alter(broker, "g", [("consumer.session.timeout.ms", SET, "6000")]) == (
        E.INVALID_CONFIG, "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.")
    assert alter(broker, "g", [("consumer.heartbeat.interval.ms", SET, "60000")]) == (
        E.INVALID_CONFIG, "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive.")
    assert alter(broker, "g", [("share.record.lock.duration.ms", SET, "999")]) == (
        E.INVALID_CONFIG, "Invalid value 999 for configuration share.record.lock.duration.ms: "
                          "Value must be at least 1000")
    assert alter(broker, "g", [("share.auto.offset.reset", SET, "sometimes")])[0] == E.INVALID_CONFIG
    assert alter(broker, "g", [("share.auto.offset.reset", SET, "by_duration:PT1H")]) == (E.NONE, None)
    assert alter(broker, "g", [("consumer.session.timeout.ms", SET, None)]) == (
        E.INVALID_REQUEST, "Null value not supported for : consumer.session.timeout.ms")
    assert alter(broker, "g", [("streams.rack.aware.assignment.tags", APPEND, "a")]) == (
        E.INVALID_CONFIG, "Can't APPEND to key streams.rack.aware.assignment.tags because its type is not LIST.")
    assert alter(broker, "", [("consumer.session.timeout.ms", SET, "50000")]) == (
        E.INVALID_REQUEST, "Default group resources are not allowed.")
    # validate_only changes nothing; the whole set is checked after the change
    assert alter(broker, "g", [("consumer.session.timeout.ms", SET, "46000")], validate_only=True) == (E.NONE, None)
    assert describe(broker, "g", ["consumer.session.timeout.ms"])["consumer.session.timeout.ms"]["value"] == "50000"
    assert alter(broker, "g", [("consumer.heartbeat.interval.ms", SET, "15000")]) == (E.NONE, None)
    assert alter(broker, "g", [("consumer.session.timeout.ms", SET, "15000")])[0] == E.INVALID_CONFIG


def test_share_group_takes_its_group_configs(broker):
    """share.heartbeat.interval.ms in ShareGroupHeartbeat answers, share.record.lock.duration.ms
    as the acquisition lock, share.delivery.count.limit archiving a record released twice,
    share.auto.offset.reset where it starts; another share group keeps the broker's."""
    tid = create_topic(broker.bootstrap, "q")
    produce(broker.bootstrap, "q", 1)  # before any member: only earliest delivers it
    assert alter(broker, "s", [("share.heartbeat.interval.ms", SET, "7000"),
                               ("share.record.lock.duration.ms", SET, "20000"),
                               ("share.delivery.count.limit", SET, "2"),
                               ("share.auto.offset.reset", SET, "earliest")]) == (E.NONE, None)
    m = ShareClient(broker, "s")
    assert m.join("q")["heartbeat_interval_ms"] == 7000
    counts = []
    for _ in range(3):
        r = m.fetch(tid, max_wait_ms=1500)
        got = acquired(r)
        if not got:
            break
        assert r["acquisition_lock_timeout_ms"] == 20000
        counts.append(got[0][2])
        m.acknowledge(tid, {0: [(got[0][0], got[0][1], [RELEASE])]})
    assert counts == [1, 2]  # archived after its second delivery (the broker's limit is 5)
    plain = ShareClient(broker, "plain")
    assert plain.join("q")["heartbeat_interval_ms"] == 5000
    assert acquired(plain.fetch(tid, max_wait_ms=300)) == []  # latest: the record is before its start
    produce(broker.bootstrap, "q", 1)
    assert plain.fetch(tid, max_wait_ms=2000)["acquisition_lock_timeout_ms"] == 30000
    m.close()
    plain.close()
