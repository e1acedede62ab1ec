"""ACLs with allow.everyone.if.no.acl.found=false (Kafka's default), the ACLs written to
`<data dir>/__security/acls.json` before the broker starts (the file the broker keeps), since
User:ANONYMOUS is the only principal until authentication lands.

Covers what the permissive tests cannot: a principal with only some rights, idempotent and
transactional producers (InitProducerId), and KIP-430 authorized operations.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic

from tests.brokerproc import BrokerProcess

pytestmark = pytest.mark.timeout(120)

ANON = "User:ANONYMOUS"


def rule(rtype: str, name: str, op: str, pattern: str = "LITERAL", permission: str = "ALLOW") -> dict:
    return {"resourceType": rtype, "name": name, "patternType": pattern, "principal": ANON, "host": "*",
            "operation": op, "permissionType": permission}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("acls-strict") / "data"
    (data / "__security").mkdir(parents=True)
    acls = [rule("TOPIC", "orders-", "WRITE", "PREFIXED"), rule("TOPIC", "orders-", "CREATE", "PREFIXED"),
            rule("TOPIC", "reports", "READ"), rule("CLUSTER", "kafka-cluster", "ALTER"),
            rule("TOPIC", "orders-secret", "ALL", permission="DENY")]
    (data / "__security" / "acls.json").write_text(json.dumps({"version": 1, "acls": acls}))
    env = {"TRAFKA_AUTHORIZER_CLASS_NAME": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "TRAFKA_AUTO_CREATE_TOPICS_ENABLE": "false"}
    with BrokerProcess(data, env=env) as b:
        yield b


def deliver(broker, topic: str, **config) -> int | None:
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 5000, **config})
    producer.produce(topic, b"v", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(10)
    assert errors
    return errors[0].code() if errors[0] is not None else None


def test_only_what_the_acls_allow(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("orders-1", 1, 1)])["orders-1"].result(timeout=10)
    with pytest.raises(KafkaException) as failed:
        admin.create_topics([NewTopic("elsewhere", 1, 1)])["elsewhere"].result(timeout=10)
    assert failed.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # WRITE implies DESCRIBE; idempotence needs IDEMPOTENT_WRITE or WRITE on some topic.
    assert deliver(broker, "orders-1", **{"enable.idempotence": True}) is None
    listed = admin.list_topics(timeout=10).topics
    assert "orders-1" in listed and "__consumer_offsets" not in listed
    ops = admin.describe_topics(TopicCollection(["orders-1"]), include_authorized_operations=True)
    assert set(ops["orders-1"].result(timeout=10).authorized_operations) == {
        AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE}
    cluster = admin.describe_cluster(include_authorized_operations=True).result(timeout=10)
    assert set(cluster.authorized_operations) == {AclOperation.ALTER, AclOperation.DESCRIBE}


def test_transactional_id_needs_write(broker):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tx-1"})
    with pytest.raises(KafkaException) as failed:
        producer.init_transactions(10)
    assert failed.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_deny_all_on_one_topic_of_an_allowed_prefix(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException) as failed:
        admin.create_topics([NewTopic("orders-secret", 1, 1)])["orders-secret"].result(timeout=10)
    assert failed.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
