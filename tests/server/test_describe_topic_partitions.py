"""DescribeTopicPartitions (75, KIP-966) over real sockets against a broker process.

Raw requests built with wire/, so every error code and the cursor are visible: all topics,
named topics, unknown and illegal names, paging with response_partition_limit and the
cursor (every partition exactly once, in order), the broker's
max.request.partition.size.limit cap, cursor errors (INVALID_REQUEST as Kafka 3.9), and
authorization (the authorizer is on with allow.everyone.if.no.acl.found, so an ACL for
User:alice alone takes the anonymous test connection's access to a topic away).
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)

from tests.brokerproc import BrokerProcess, raw_request
from wire.primitives import ZERO_UUID
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)

NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION, TOPIC_AUTHORIZATION_FAILED, INVALID_REQUEST = 0, 3, 17, 29, 42
BROKER_LIMIT = 10
DTP = ApiKey.DESCRIBE_TOPIC_PARTITIONS
ANY_FILTER = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("dtp") / "data",
                       "--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                       "--set", "allow.everyone.if.no.acl.found=true",
                       "--set", f"max.request.partition.size.limit={BROKER_LIMIT}") as b:
        yield b


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(broker, name: str, partitions: int) -> str:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout_ms": 10000, "validate_only": False}
    answer = raw_request("127.0.0.1", broker.port, ApiKey.CREATE_TOPICS, 7, body)
    assert answer["topics"][0]["error_code"] == NONE, answer
    return name


def describe(broker, topics: list[str] | None = None, limit: int = 2000, cursor: tuple[str, int] | None = None) -> dict:
    body = {"topics": [{"name": n} for n in topics or []], "response_partition_limit": limit,
            "cursor": None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]}}
    return raw_request("127.0.0.1", broker.port, DTP, 0, body, client_id="dtp-raw")


def metadata(broker, topics: list[str]) -> dict:
    body = {"topics": [{"name": n, "topic_id": ZERO_UUID} for n in topics], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": True}
    return {t["name"]: t for t in raw_request("127.0.0.1", broker.port, ApiKey.METADATA, 12, body)["topics"]}


def pages(broker, topics: list[str] | None, limit: int) -> list[dict]:
    """Every response of a paged listing, following next_cursor until it is null."""
    answers, cursor = [], None
    for _ in range(100):
        answer = describe(broker, topics, limit, cursor)
        answers.append(answer)
        if answer["next_cursor"] is None:
            return answers
        cursor = (answer["next_cursor"]["topic_name"], answer["next_cursor"]["partition_index"])
    raise AssertionError("the cursor never ended")


def test_named_topics_match_metadata(broker):
    a, b = create(broker, unique("dtp-b"), 3), create(broker, unique("dtp-a"), 2)
    answer = describe(broker, [a, b, a])  # duplicates answered once, sorted by name
    assert answer["next_cursor"] is None
    assert [t["name"] for t in answer["topics"]] == sorted([a, b])
    meta = metadata(broker, [a, b])
    for topic in answer["topics"]:
        m = meta[topic["name"]]
        assert topic["error_code"] == NONE and topic["topic_id"] == m["topic_id"] != ZERO_UUID
        assert topic["is_internal"] is False
        assert topic["topic_authorized_operations"] == m["topic_authorized_operations"] > 0
        assert [p["partition_index"] for p in topic["partitions"]] == list(range(len(m["partitions"])))
        for p, mp in zip(topic["partitions"], m["partitions"]):
            for field in ("leader_id", "leader_epoch", "replica_nodes", "isr_nodes", "offline_replicas"):
                assert p[field] == mp[field], field
            assert p["error_code"] == NONE and p["leader_id"] >= 0
            assert p["eligible_leader_replicas"] == [] and p["last_known_elr"] == []


def test_all_topics_sorted_with_internal_flag(broker):
    names = [create(broker, unique("dtp-all"), 1) for _ in range(3)]
    raw_request("127.0.0.1", broker.port, ApiKey.FIND_COORDINATOR, 3,
                {"key": "dtp-group", "key_type": 0})  # creates __consumer_offsets
    listed = [t for page in pages(broker, None, 2000) for t in page["topics"]]
    got = [t["name"] for t in listed]
    assert got == sorted(got) and set(names) <= set(got)
    assert all(t["error_code"] == NONE for t in listed)
    internal = [t for t in listed if t["name"] == "__consumer_offsets"]
    assert all(t["is_internal"] for t in internal)
    assert not any(t["is_internal"] for t in listed if t["name"] in names)


def test_unknown_and_illegal_names(broker):
    known = create(broker, unique("dtp-known"), 1)
    missing = unique("dtp-missing")
    answer = describe(broker, [missing, known, "bad/name"])
    by_name = {t["name"]: t for t in answer["topics"]}
    assert by_name[missing]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION and by_name[missing]["partitions"] == []
    assert by_name[missing]["topic_id"] == ZERO_UUID
    assert by_name["bad/name"]["error_code"] == INVALID_TOPIC_EXCEPTION
    assert by_name[known]["error_code"] == NONE and len(by_name[known]["partitions"]) == 1
    # Nothing was auto-created (auto.create.topics.enable is on, but this API never creates).
    assert metadata(broker, [missing])[missing]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION


def test_cursor_pages_through_every_partition_once_in_order(broker):
    prefix = unique("dtp-page")
    topics = [create(broker, f"{prefix}-{i}", 7) for i in range(3)]
    answers = pages(broker, list(reversed(topics)), 4)
    seen = [(t["name"], p["partition_index"]) for a in answers for t in a["topics"] for p in t["partitions"]]
    assert seen == [(t, p) for t in topics for p in range(7)]
    assert all(sum(len(t["partitions"]) for t in a["topics"]) <= 4 for a in answers)
    assert len(answers) == 6  # 21 partitions, 4 a page
    # The first cursor points into the first topic; where a topic ends a page exactly,
    # the next page starts at the next topic's partition 0.
    assert answers[0]["next_cursor"] == {"topic_name": topics[0], "partition_index": 4}
    one_topic = pages(broker, [topics[0]], 7)
    assert len(one_topic) == 1 and one_topic[0]["next_cursor"] is None
    two = describe(broker, topics[:2], 7)
    assert [t["name"] for t in two["topics"]] == [topics[0]]
    assert two["next_cursor"] == {"topic_name": topics[1], "partition_index": 0}


def test_all_topics_paging_covers_everything(broker):
    prefix = unique("dtp-allpage")
    topics = [create(broker, f"{prefix}-{i}", 5) for i in range(2)]
    everything = raw_request("127.0.0.1", broker.port, ApiKey.METADATA, 12,
                             {"topics": None, "allow_auto_topic_creation": False,
                              "include_topic_authorized_operations": False})["topics"]
    whole = {t["name"]: len(t["partitions"]) for t in everything}
    seen = [(t["name"], p["partition_index"]) for a in pages(broker, None, 3) for t in a["topics"]
            for p in t["partitions"]]
    assert len(seen) == len(set(seen)) == sum(whole.values())
    assert [(t, p) for t, p in seen if t in topics] == [(t, p) for t in topics for p in range(5)]


def test_broker_limit_caps_the_request(broker):
    big = create(broker, unique("dtp-big"), BROKER_LIMIT + 5)
    answer = describe(broker, [big], 2000)
    assert len(answer["topics"][0]["partitions"]) == BROKER_LIMIT
    assert answer["next_cursor"] == {"topic_name": big, "partition_index": BROKER_LIMIT}
    # A limit below 1 is taken as 1, as Kafka does.
    zero = describe(broker, [big], 0)
    assert [p["partition_index"] for p in zero["topics"][0]["partitions"]] == [0]
    assert zero["next_cursor"] == {"topic_name": big, "partition_index": 1}
    # A cursor past the last partition: the topic, with no partitions, and no cursor.
    past = describe(broker, [big], 5, (big, BROKER_LIMIT + 9))
    assert past["topics"][0]["partitions"] == [] and past["next_cursor"] is None


def test_cursor_errors(broker):
    a, b = create(broker, unique("dtp-ca"), 2), create(broker, unique("dtp-cb"), 2)
    # The cursor's topic must be one of the named topics.
    other = describe(broker, [a, b], 10, (unique("dtp-zz"), 0))
    assert other["next_cursor"] is None
    assert sorted((t["name"], t["error_code"], t["partitions"]) for t in other["topics"]) == \
        sorted([(a, INVALID_REQUEST, []), (b, INVALID_REQUEST, [])])
    # A negative partition index.
    negative = describe(broker, [a], 10, (a, -1))
    assert [(t["name"], t["error_code"]) for t in negative["topics"]] == [(a, INVALID_REQUEST)]
    # Listing all topics: a negative index is INVALID_REQUEST too (no topics to answer with).
    assert describe(broker, None, 10, (a, -3)) == {"throttle_time_ms": 0, "topics": [], "next_cursor": None}
    # Listing all topics, a cursor naming no topic starts at the next name.
    after = describe(broker, None, 10, (a + "0", 0))
    assert after["topics"][0]["name"] > a + "0"
    # A valid cursor skips the topics before it.
    from_b = describe(broker, [a, b], 10, (b, 1))
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in from_b["topics"]] == [(b, [1])]
    log = broker.log_path.read_text(errors="replace")
    assert "DescribeTopicPartitions" in log and "cursor" in log


def test_authorization(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        hidden, shown = create(broker, unique("dtp-hidden"), 2), create(broker, unique("dtp-shown"), 2)
        binding = AclBinding(ResourceType.TOPIC, hidden, ResourcePatternType.LITERAL, "User:alice", "*",
                             AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        for future in admin.create_acls([binding]).values():
            future.result(timeout=10)
        named = describe(broker, [hidden, shown])
        assert [(t["name"], t["error_code"]) for t in named["topics"]] == \
            [(shown, NONE), (hidden, TOPIC_AUTHORIZATION_FAILED)]
        denied = named["topics"][1]
        assert denied["topic_id"] == ZERO_UUID and denied["partitions"] == []
        assert named["topics"][0]["topic_authorized_operations"] == \
            metadata(broker, [shown])[shown]["topic_authorized_operations"]
        listed = {t["name"] for page in pages(broker, None, 2000) for t in page["topics"]}
        assert shown in listed and hidden not in listed
    finally:
        admin.delete_acls([ANY_FILTER])[ANY_FILTER].result(timeout=10)
