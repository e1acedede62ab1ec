"""AlterClientQuotas (49) and DescribeClientQuotas (48) against a real broker process.

No installed Python client exposes these APIs (confluent-kafka 2.x and kafka-python 3.x
have no client-quota admin calls), so the requests are built with wire/ and sent over a
socket (tests/brokerproc.raw_request); the client libraries still see the APIs in
ApiVersions. Checked: set, describe with every match type and `strict`, remove,
validate_only, the INVALID_REQUEST / UNSUPPORTED_VERSION cases Kafka answers, and that
the table survives a restart (`__security/client_quotas.json`).
"""

from __future__ import annotations

import json

import pytest

from tests.brokerproc import BrokerProcess, raw_request

pytestmark = pytest.mark.timeout(60)

DESCRIBE, ALTER = 48, 49
NONE, UNSUPPORTED_VERSION, INVALID_REQUEST = 0, 35, 42
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def entity(**names) -> list[dict]:
    return [{"entity_type": kind.replace("_", "-"), "entity_name": name} for kind, name in names.items()]


def op(key: str, value: float = 0.0, remove: bool = False) -> dict:
    return {"key": key, "value": value, "remove": remove}


@pytest.fixture
def broker(tmp_path):
    with BrokerProcess(tmp_path / "data") as proc:
        yield proc


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """For the tests that change nothing (or always the same entity to the same value)."""
    with BrokerProcess(tmp_path_factory.mktemp("quotas-admin") / "data") as proc:
        yield proc


def alter(broker, entries, validate_only=False, version=1):
    body = {"entries": [{"entity": e, "ops": ops} for e, ops in entries], "validate_only": validate_only}
    return raw_request("127.0.0.1", broker.port, ALTER, version, body)["entries"]


def describe(broker, components, strict=False, version=1):
    body = {"components": [{"entity_type": t, "match_type": m, "match": n} for t, m, n in components],
            "strict": strict}
    return raw_request("127.0.0.1", broker.port, DESCRIBE, version, body)


def described(response) -> dict:
    """{frozenset of (type, name): {key: value}} of a DescribeClientQuotas answer."""
    assert response["error_code"] == NONE, response
    return {frozenset((e["entity_type"], e["entity_name"]) for e in entry["entity"]):
            {v["key"]: v["value"] for v in entry["values"]} for entry in response["entries"]}


def key(**names) -> frozenset:
    return frozenset((kind.replace("_", "-"), name) for kind, name in names.items())


def test_apis_advertised(shared_broker):
    broker = shared_broker
    answer = raw_request("127.0.0.1", broker.port, 18, 3, {"client_software_name": "tests",
                                                           "client_software_version": "1"})
    versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]}
    assert versions[DESCRIBE] == (0, 1) and versions[ALTER] == (0, 1)


def test_set_describe_match_types_remove_and_restart(broker):
    results = alter(broker, [
        (entity(user="alice"), [op("producer_byte_rate", 1024), op("request_percentage", 12.5)]),
        (entity(user="alice", client_id="app"), [op("consumer_byte_rate", 2048)]),
        (entity(user=None), [op("producer_byte_rate", 4096)]),
        (entity(client_id=None), [op("consumer_byte_rate", 8192)]),
        (entity(user=None, client_id=None), [op("producer_byte_rate", 512)]),
        (entity(ip="10.1.2.3"), [op("connection_creation_rate", 50)]),
    ], version=0)
    assert [r["error_code"] for r in results] == [NONE] * 6
    everything = described(describe(broker, []))
    assert everything == {
        key(user="alice"): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
        key(user="alice", client_id="app"): {"consumer_byte_rate": 2048.0},
        key(user=None): {"producer_byte_rate": 4096.0},
        key(client_id=None): {"consumer_byte_rate": 8192.0},
        key(user=None, client_id=None): {"producer_byte_rate": 512.0},
        key(ip="10.1.2.3"): {"connection_creation_rate": 50.0},
    }
    # EXACT without strict: every entity with that user, alone or with a client id
    assert set(described(describe(broker, [("user", EXACT, "alice")]))) == {
        key(user="alice"), key(user="alice", client_id="app")}
    assert set(described(describe(broker, [("user", EXACT, "alice")], strict=True))) == {key(user="alice")}
    assert set(described(describe(broker, [("user", DEFAULT, None)], strict=True))) == {key(user=None)}
    assert set(described(describe(broker, [("user", DEFAULT, None), ("client-id", DEFAULT, None)]))) == {
        key(user=None, client_id=None)}
    # SPECIFIED: any entity with that type, default ones included (Kafka's ClientQuotasImage)
    assert set(described(describe(broker, [("client-id", SPECIFIED, None)], strict=True, version=0))) == {
        key(client_id=None)}
    assert set(described(describe(broker, [("user", SPECIFIED, None), ("client-id", SPECIFIED, None)]))) == {
        key(user="alice", client_id="app"), key(user=None, client_id=None)}
    assert described(describe(broker, [("ip", EXACT, "10.1.2.3")])) == {
        key(ip="10.1.2.3"): {"connection_creation_rate": 50.0}}
    assert described(describe(broker, [("user", EXACT, "nobody")])) == {}

    # validate_only changes nothing; remove drops a key, and the entity with its last key
    assert alter(broker, [(entity(user="alice"), [op("producer_byte_rate", remove=True)])],
                 validate_only=True)[0]["error_code"] == NONE
    assert described(describe(broker, [("user", EXACT, "alice")], strict=True))[key(user="alice")][
        "producer_byte_rate"] == 1024.0
    alter(broker, [(entity(user="alice"), [op("producer_byte_rate", remove=True)]),
                   (entity(ip="10.1.2.3"), [op("connection_creation_rate", remove=True)])])
    after = described(describe(broker, []))
    assert after[key(user="alice")] == {"request_percentage": 12.5}
    assert key(ip="10.1.2.3") not in after

    stored = json.loads((broker.data_dir / "__security" / "client_quotas.json").read_text())
    assert {"entity": {"user": "alice"}, "config": {"request_percentage": 12.5}} in stored["entries"]
    broker.restart()
    assert described(describe(broker, [])) == after


@pytest.mark.parametrize("entry, message", [
    ((entity(user="bob"), [op("connection_creation_rate", 5)]), "Invalid configuration key"),
    ((entity(ip=None), [op("producer_byte_rate", 5)]), "Invalid configuration key"),
    ((entity(user="bob"), [op("no_such_rate", 5)]), "Invalid configuration key"),
    (([{"entity_type": "group", "entity_name": "g"}], [op("producer_byte_rate", 5)]), "entity type"),
    (([], [op("producer_byte_rate", 5)]), "empty"),
    ((entity(user="a") + entity(user="b"), [op("producer_byte_rate", 5)]), "Duplicate"),
    ((entity(ip="1.2.3.4", user="a"), [op("connection_creation_rate", 5)]), "combination"),
    ((entity(ip="not-an-ip"), [op("connection_creation_rate", 5)]), "not a valid IP"),
    ((entity(user="bob"), [op("producer_byte_rate", 10.5)]), "fractional"),
    ((entity(user="bob"), [op("producer_byte_rate", -1)]), "positive"),
    ((entity(user="bob"), [op("producer_byte_rate", 5), op("producer_byte_rate", 6)]), "Duplicate"),
])
def test_alter_validation(shared_broker, entry, message):
    broker = shared_broker
    good = (entity(client_id="fine"), [op("producer_byte_rate", 100)])
    results = alter(broker, [entry, good])
    assert results[0]["error_code"] == INVALID_REQUEST, results
    assert message in results[0]["error_message"]
    assert results[0]["entity"] == entry[0]  # echoed as sent
    assert results[1]["error_code"] == NONE  # entries are independent
    assert described(describe(broker, [])) == {key(client_id="fine"): {"producer_byte_rate": 100.0}}
    assert "AlterClientQuotas from tests: INVALID_REQUEST" in broker.log_tail(200)


@pytest.mark.parametrize("components, code", [
    ([("user", EXACT, None)], INVALID_REQUEST),
    ([("user", DEFAULT, "x")], INVALID_REQUEST),
    ([("user", SPECIFIED, "x")], INVALID_REQUEST),
    ([("user", EXACT, "a"), ("user", DEFAULT, None)], INVALID_REQUEST),
    ([("ip", SPECIFIED, None), ("user", SPECIFIED, None)], INVALID_REQUEST),
    ([("", SPECIFIED, None)], INVALID_REQUEST),
    ([("group", SPECIFIED, None)], UNSUPPORTED_VERSION),
    ([("user", 7, None)], INVALID_REQUEST),  # an unknown match type: what Kafka 4.4 answers
])
def test_describe_validation(shared_broker, components, code):
    broker = shared_broker
    response = describe(broker, components)
    assert response["error_code"] == code and response["entries"] is None
    assert response["error_message"]
