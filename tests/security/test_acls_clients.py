"""ACLs end to end: a broker process with the authorizer on, stock clients over loopback.

Here every connection is User:ANONYMOUS (no SASL listener), so the brokers run
with allow.everyone.if.no.acl.found=true: ANONYMOUS manages ACLs through confluent-kafka's
AdminClient and kafka-python's KafkaAdminClient, and an ACL for someone else (User:alice) on
a resource is what takes ANONYMOUS's access to it away (the resource now has ACLs, none
for ANONYMOUS). Each test removes the ACLs it made.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)
from kafka import KafkaAdminClient
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern,
                         ResourcePatternFilter)
from kafka.admin import ResourceType as KpResourceType

from tests.brokerproc import BrokerProcess, raw_request
from tests.security.acl_kit import consume_error, produce_error, unique

pytestmark = pytest.mark.timeout(120)

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
ANY_FILTER = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)
DESCRIBE_ANY = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}


def authorizer_env(**more: str) -> dict:
    env = {"TRAFKA_AUTHORIZER_CLASS_NAME": AUTHORIZER, "TRAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND": "true"}
    env.update(more)
    return env


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("acls") / "data", env=authorizer_env()) as b:
        yield b


@pytest.fixture
def admin(broker):
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    yield client
    client.delete_acls([ANY_FILTER])[ANY_FILTER].result(timeout=10)


def create(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings)).values():
        future.result(timeout=10)


def make_topic(admin: AdminClient, name: str) -> str:
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=10)
    return name


def topic_acl(name: str, principal: str, op: AclOperation, permission=AclPermissionType.ALLOW,
              pattern=ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, principal, "*", op, permission)


def test_confluent_create_describe_delete(admin):
    topic = unique("acl-crud")
    alice = topic_acl(topic, "User:alice", AclOperation.READ)
    bob = AclBinding(ResourceType.GROUP, "g-", ResourcePatternType.PREFIXED, "User:bob", "10.0.0.1",
                     AclOperation.DESCRIBE, AclPermissionType.DENY)
    create(admin, alice, bob)
    assert sorted(map(str, admin.describe_acls(ANY_FILTER).result(timeout=10))) == sorted([str(alice), str(bob)])
    # MATCH: the patterns that apply to a resource name (the prefix g- applies to g-1)
    match = AclBindingFilter(ResourceType.GROUP, "g-1", ResourcePatternType.MATCH, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    assert admin.describe_acls(match).result(timeout=10) == [bob]
    only_topics = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, "User:alice", None,
                                   AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(only_topics).result(timeout=10) == [alice]
    assert admin.delete_acls([only_topics])[only_topics].result(timeout=10) == [alice]
    assert admin.describe_acls(ANY_FILTER).result(timeout=10) == [bob]


def test_invalid_acls_answer_invalid_request(broker, admin):
    # An operation GROUP does not have, and a CLUSTER resource not named kafka-cluster.
    bad = [{"resource_type": 3, "resource_name": "g", "resource_pattern_type": 3, "principal": "User:a",
            "host": "*", "operation": 4, "permission_type": 3},
           {"resource_type": 4, "resource_name": "other", "resource_pattern_type": 3, "principal": "User:a",
            "host": "*", "operation": 7, "permission_type": 3},
           {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "alice",
            "host": "*", "operation": 3, "permission_type": 3},
           {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 2, "principal": "User:a",
            "host": "*", "operation": 3, "permission_type": 3}]
    answer = raw_request("127.0.0.1", broker.port, 30, 3, {"creations": bad})
    assert [r["error_code"] for r in answer["results"]] == [42, 42, 42, 42]
    assert "only supports operations" in answer["results"][0]["error_message"]
    unknown = {"resource_type_filter": 0, "resource_name_filter": None, "pattern_type_filter": 1,
               "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    assert raw_request("127.0.0.1", broker.port, 29, 3, unknown)["error_code"] == 42
    assert admin.describe_acls(ANY_FILTER).result(timeout=10) == []


def test_kafka_python_admin(broker, admin):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        topic = unique("acl-kp")
        acl = ACL("User:carol", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                  ResourcePattern(KpResourceType.TOPIC, topic, ACLResourcePatternType.PREFIXED))
        result = client.create_acls([acl])
        assert result["failed"] == [] and result["succeeded"] == [acl]
        flt = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePatternFilter(KpResourceType.TOPIC, topic, ACLResourcePatternType.ANY))
        found, error = client.describe_acls(flt)
        assert found == [acl] and error.errno == 0
        deleted = client.delete_acls([flt])
        assert [(matches, error.errno) for _f, matches, error in deleted] == [([acl], 0)]
        assert client.describe_acls(flt)[0] == []
    finally:
        client.close()


def test_acl_for_someone_else_takes_access_away(broker, admin):
    locked, free = make_topic(admin, unique("locked")), make_topic(admin, unique("free"))
    assert produce_error(broker, locked) is None
    create(admin, topic_acl(locked, "User:alice", AclOperation.ALL))
    assert produce_error(broker, locked) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert consume_error(broker, locked) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_error(broker, free) is None
    assert consume_error(broker, free) is None
    # Metadata: the locked topic is left out of the full list, and named it is refused.
    listed = admin.list_topics(timeout=10).topics
    assert free in listed and locked not in listed
    named = admin.list_topics(locked, timeout=10).topics[locked]
    assert named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Deleting the ACL gives access back (the authorizer's cache is dropped on change).
    admin.delete_acls([ANY_FILTER])[ANY_FILTER].result(timeout=10)
    assert produce_error(broker, locked) is None
    assert locked in admin.list_topics(timeout=10).topics


def test_prefixed_deny_and_deny_over_allow(broker, admin):
    prefix = unique("pfx")
    topic, other = make_topic(admin, prefix + "-a"), make_topic(admin, unique("other"))
    create(admin, topic_acl("*", "User:ANONYMOUS", AclOperation.ALL),
           topic_acl(prefix, "User:ANONYMOUS", AclOperation.WRITE, AclPermissionType.DENY,
                     ResourcePatternType.PREFIXED))
    # DESCRIBE is allowed (the wildcard ALLOW ALL), so the producer gets as far as Produce.
    assert produce_error(broker, topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_error(broker, other) is None
    assert consume_error(broker, other, assign=True) is None
    # READ is not denied yet; then it is, and the Fetch itself is refused.
    create(admin, topic_acl(prefix, "User:ANONYMOUS", AclOperation.READ, AclPermissionType.DENY,
                            ResourcePatternType.PREFIXED))
    assert consume_error(broker, topic, assign=True) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert consume_error(broker, other, assign=True) is None


def test_group_acl(broker, admin):
    topic = make_topic(admin, unique("grp-topic"))
    assert produce_error(broker, topic) is None
    group = unique("locked-group")
    create(admin, AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:alice", "*",
                             AclOperation.READ, AclPermissionType.ALLOW))
    assert consume_error(broker, topic, group=group) == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert consume_error(broker, topic, group=unique("open-group")) is None
    # A standalone commit to the locked group is refused and nothing is stored.
    commit = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
              "retention_time_ms": -1, "topics": [{"name": topic, "partitions": [
                  {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                   "committed_metadata": ""}]}]}
    answer = raw_request("127.0.0.1", broker.port, 8, 8, commit)
    assert answer["topics"][0]["partitions"][0]["error_code"] == KafkaError.GROUP_AUTHORIZATION_FAILED
    fetch = {"group_id": group, "topics": None, "require_stable": False}
    assert raw_request("127.0.0.1", broker.port, 9, 7, fetch)["error_code"] == KafkaError.GROUP_AUTHORIZATION_FAILED
    admin.delete_acls([ANY_FILTER])[ANY_FILTER].result(timeout=10)
    assert raw_request("127.0.0.1", broker.port, 9, 7, fetch)["topics"] == []
    answer = raw_request("127.0.0.1", broker.port, 8, 8, commit)
    assert answer["topics"][0]["partitions"][0]["error_code"] == 0
    assert raw_request("127.0.0.1", broker.port, 9, 7, fetch)["topics"][0]["partitions"][0]["committed_offset"] == 1


def test_cluster_acl_super_users_and_restart(tmp_path):
    data = tmp_path / "data"
    someone_else = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                              AclOperation.ALTER, AclPermissionType.ALLOW)
    with BrokerProcess(data, env=authorizer_env()) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        create(admin, someone_else)
        with pytest.raises(KafkaException) as failed:
            create(admin, topic_acl("t", "User:bob", AclOperation.READ))
        assert failed.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        # ALTER implies DESCRIBE, for alice only. (confluent-kafka's describe_acls shows a
        # top-level error as an empty list, so the answer is read raw.)
        answer = raw_request("127.0.0.1", b.port, 29, 3, DESCRIBE_ANY)
        assert (answer["error_code"], answer["resources"]) == (KafkaError.CLUSTER_AUTHORIZATION_FAILED, [])
        assert b.stop() == 0
    stored = json.loads((data / "__security" / "acls.json").read_text())
    assert stored["acls"] == [{"resourceType": "CLUSTER", "name": "kafka-cluster", "patternType": "LITERAL",
                               "principal": "User:alice", "host": "*", "operation": "ALTER",
                               "permissionType": "ALLOW"}]
    # super.users bypasses every ACL; the ACL survived the restart.
    with BrokerProcess(data, env=authorizer_env(TRAFKA_SUPER_USERS="User:admin;User:ANONYMOUS")) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        assert admin.describe_acls(ANY_FILTER).result(timeout=10) == [someone_else]
        extra = topic_acl("t", "User:bob", AclOperation.READ)
        create(admin, extra)
        assert sorted(map(str, admin.describe_acls(ANY_FILTER).result(timeout=10))) == sorted(
            [str(someone_else), str(extra)])


def test_security_disabled_without_authorizer(tmp_path):
    with BrokerProcess(tmp_path / "data") as b:
        answer = raw_request("127.0.0.1", b.port, 29, 1, DESCRIBE_ANY)
        assert answer["error_code"] == KafkaError.SECURITY_DISABLED
        # Kafka's words (AclApis): DescribeAcls "... on the broker", Create/DeleteAcls without
        assert answer["error_message"] == "No Authorizer is configured on the broker"
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for call in (lambda: create(admin, topic_acl("t", "User:bob", AclOperation.READ)),
                     lambda: admin.delete_acls([ANY_FILTER])[ANY_FILTER].result(timeout=10)):
            with pytest.raises(KafkaException) as failed:
                call()
            assert failed.value.args[0].code() == KafkaError.SECURITY_DISABLED
        # and everything else works as before
        make_topic(admin, "no-authorizer")
        assert produce_error(b, "no-authorizer") is None


def test_java_admin_client(broker, admin):
    from compat_tests.clients.base import NotSupportedByClient
    from compat_tests.clients.java_client import JavaClient

    try:
        java = JavaClient(broker.bootstrap)
    except NotSupportedByClient as exc:
        pytest.skip(str(exc))
    try:
        java.create_acl("java-", "PREFIXED", "User:dave", "WRITE", "DENY")
        assert java.describe_acls() == [{"resource_type": "TOPIC", "name": "java-", "pattern": "PREFIXED",
                                         "principal": "User:dave", "host": "*", "operation": "WRITE",
                                         "permission": "DENY"}]
        assert [str(a) for a in admin.describe_acls(ANY_FILTER).result(timeout=10)] == [str(
            topic_acl("java-", "User:dave", AclOperation.WRITE, AclPermissionType.DENY, ResourcePatternType.PREFIXED))]
    finally:
        java.close()


def test_unknown_authorizer_class_refused_at_start(tmp_path):
    broker = BrokerProcess(tmp_path / "data", env={"TRAFKA_AUTHORIZER_CLASS_NAME": "com.example.MyAuthorizer"})
    with pytest.raises(RuntimeError, match="unknown authorizer class"):
        broker.start(timeout=20)
    broker.kill()
