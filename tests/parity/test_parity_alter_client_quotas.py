"""AlterClientQuotas reads entries as Apache Kafka 4.4 (KRaft) does (found by the protocol
differential): an entity is a map, so a type named twice keeps its last name; and the
entries are keyed by entity, so an entity several entries name is answered once,
INVALID_REQUEST, and none of them applies. Trafka applied the first, refused the others
one by one, and refused a repeated type.
"""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, raw_request
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-alter-client-quotas") / "data") as proc:
        yield proc


def entry(entity: list[tuple[str, str | None]], rate: float) -> dict:
    return {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
            "ops": [{"key": "producer_byte_rate", "value": rate, "remove": False}]}


def alter(broker, *entries) -> list[tuple[int, list]]:
    answer = raw_request("127.0.0.1", broker.port, ApiKey.ALTER_CLIENT_QUOTAS, 1,
                         {"entries": list(entries), "validate_only": False})
    return [(e["error_code"], [(x["entity_type"], x["entity_name"]) for x in e["entity"]]) for e in answer["entries"]]


def described(broker, user: str) -> list[dict]:
    answer = raw_request("127.0.0.1", broker.port, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {
        "components": [{"entity_type": "user", "match_type": 0, "match": user}], "strict": False})
    return [{v["key"]: v["value"] for v in e["values"]} for e in answer["entries"] or []]


@pytest.mark.parametrize("copies", [2, 50])
def test_an_entity_named_twice_is_answered_once_and_not_applied(broker, copies):
    user = f"pacq-twice-{copies}"
    assert alter(broker, *[entry([("user", user)], 1000.0 + i) for i in range(copies)]) == [
        (ErrorCode.INVALID_REQUEST, [("user", user)])]
    assert described(broker, user) == []


def test_other_entities_of_the_request_still_apply(broker):
    assert alter(broker, entry([("user", "pacq-a")], 1.0), entry([("user", "pacq-b")], 2.0),
                 entry([("user", "pacq-a")], 3.0)) == [
        (ErrorCode.INVALID_REQUEST, [("user", "pacq-a")]), (ErrorCode.NONE, [("user", "pacq-b")])]
    assert described(broker, "pacq-b") == [{"producer_byte_rate": 2.0}]


def test_a_type_named_twice_keeps_its_last_name(broker):
    assert alter(broker, entry([("user", "pacq-first"), ("user", "pacq-last")], 5.0)) == [
        (ErrorCode.NONE, [("user", "pacq-last")])]
    assert described(broker, "pacq-last") == [{"producer_byte_rate": 5.0}]
    assert described(broker, "pacq-first") == []
