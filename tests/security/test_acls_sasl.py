"""ACLs for authenticated users: a SASL_PLAINTEXT broker (PLAIN users admin, alice, bob)
with the authorizer on and Kafka's defaults — allow.everyone.if.no.acl.found=false,
super.users=User:admin. Alice, without ACLs, is refused produce, consume, her group and the
admin APIs with Kafka's codes; each right appears once the super user grants it; a
prefixed grant, DENY over ALLOW, and bob (no ACLs) kept out throughout."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

from tests.brokerproc import BrokerProcess, free_port
from tests.security import acl_kit
from tests.security.sasl_kit import client_conf

pytestmark = pytest.mark.timeout(180)

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" password=\"admin-secret\" "
        + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    port = free_port()
    proc = BrokerProcess(tmp_path_factory.mktemp("acl-sasl") / "data",
                         "--set", f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
                         "--set", "sasl.enabled.mechanisms=PLAIN",
                         "--set", f"sasl.jaas.config={JAAS}",
                         "--set", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                         "--set", "super.users=User:admin", port=port)
    with proc:
        yield proc


def conf(broker, user: str) -> dict:
    return client_conf(broker, "PLAIN", user, PASSWORDS[user])


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient(conf(broker, "admin"))


def grant(admin: AdminClient, resource: ResourceType, name: str, user: str, op: AclOperation,
          permission=AclPermissionType.ALLOW, pattern=ResourcePatternType.LITERAL) -> None:
    binding = AclBinding(resource, name, pattern, f"User:{user}", "*", op, permission)
    for future in admin.create_acls([binding]).values():
        future.result(timeout=10)


def topic(admin: AdminClient, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=10)
    return name


def produce_error(broker, user: str, name: str) -> int | None:
    return acl_kit.produce_error(broker, name, {**conf(broker, user), "enable.idempotence": False})


def consume_error(broker, user: str, name: str, group: str) -> int | None:
    return acl_kit.consume_error(broker, name, group, config=conf(broker, user))


def test_the_super_user_can_do_everything(broker, admin):
    name = topic(admin, "super")
    assert produce_error(broker, "admin", name) is None
    assert consume_error(broker, "admin", name, "super-group") is None
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"carol-secret")])
    assert futures["carol"].result(timeout=10) is None


def test_produce_and_consume_need_their_acls(broker, admin):
    name = topic(admin, "orders")
    assert produce_error(broker, "alice", name) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(admin, ResourceType.TOPIC, name, "alice", AclOperation.WRITE)
    assert produce_error(broker, "alice", name) is None
    assert produce_error(broker, "bob", name) == KafkaError.TOPIC_AUTHORIZATION_FAILED

    group = f"g-{name}"
    # WRITE implies DESCRIBE, not READ: the consumer's group is refused first (Kafka checks the group).
    assert consume_error(broker, "alice", name, group) == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant(admin, ResourceType.GROUP, group, "alice", AclOperation.READ)
    assert consume_error(broker, "alice", name, group) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(admin, ResourceType.TOPIC, name, "alice", AclOperation.READ)
    assert consume_error(broker, "alice", name, group) is None


def test_prefixed_grant_and_deny_over_allow(broker, admin):
    prefix = f"team-{uuid.uuid4().hex[:6]}-"
    first, second = topic(admin, prefix + "a"), topic(admin, prefix + "b")
    grant(admin, ResourceType.TOPIC, prefix, "alice", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED)
    assert produce_error(broker, "alice", first) is None
    assert produce_error(broker, "alice", second) is None
    grant(admin, ResourceType.TOPIC, second, "alice", AclOperation.WRITE, permission=AclPermissionType.DENY)
    assert produce_error(broker, "alice", second) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_error(broker, "alice", first) is None


def test_admin_apis_need_cluster_rights(broker, admin):
    alice = AdminClient(conf(broker, "alice"))
    name = f"alice-made-{uuid.uuid4().hex[:6]}"
    with pytest.raises(Exception) as refused:
        alice.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=10)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    binding = AclBinding(ResourceType.TOPIC, "x", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    with pytest.raises(Exception) as refused:
        next(iter(alice.create_acls([binding]).values())).result(timeout=10)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(Exception) as refused:
        alice.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "mallory", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"x")])["mallory"].result(timeout=10)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # Granted CREATE on the cluster, alice creates topics.
    grant(admin, ResourceType.BROKER, "kafka-cluster", "alice", AclOperation.CREATE)
    assert alice.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=10) is None


def test_metadata_shows_alice_only_what_she_may_describe(broker, admin):
    mine, other = topic(admin, "visible"), topic(admin, "hidden")
    grant(admin, ResourceType.TOPIC, mine, "alice", AclOperation.DESCRIBE)
    topics = AdminClient(conf(broker, "alice")).list_topics(timeout=10).topics
    assert mine in topics and other not in topics
