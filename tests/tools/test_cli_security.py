"""`trafka acl ...` and `trafka user ...` against a SASL_PLAINTEXT broker with the authorizer
on (super.users=User:admin), every command logging in through `--command-config` files
written the Java client's way (sasl.jaas.config): a SCRAM user made with `user create` is
refused until `acl create` grants it, and again after `acl delete`; a user without rights
cannot manage ACLs."""

from __future__ import annotations

import pytest

from tests.security.acl_kit import unique
from tests.security.sasl_kit import USERS, sasl_broker
from tests.tools.clikit import trafka

pytestmark = pytest.mark.timeout(300)

AUTHORIZER = ("--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
              "--set", "super.users=User:admin")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with sasl_broker(tmp_path_factory.mktemp("cli-acl") / "data", *AUTHORIZER) as proc:
        yield proc


def properties(path, mechanism: str, user: str, password: str) -> str:
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    path.write_text(f"# a Kafka Java client's properties\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
                    f"sasl.jaas.config=org.apache.kafka.common.security.{module} required \\\n"
                    f'    username="{user}" password="{password}";\n')
    return str(path)


@pytest.fixture(scope="module")
def admin(broker, tmp_path_factory):
    return properties(tmp_path_factory.mktemp("props") / "admin.properties", "PLAIN", "admin", USERS["admin"])


def as_user(broker, config: str, *args: str, stdin: str | None = None):
    return trafka(*args, "--command-config", config, bootstrap=broker.bootstrap, stdin=stdin)


def test_scram_user_and_acls(broker, admin, tmp_path):
    user, topic, group = unique("carol"), unique("secure"), unique("carol-group")
    created = as_user(broker, admin, "user", "create", user, "--password", "carol-secret",
                      "--mechanism", "SCRAM-SHA-512")
    assert created.ok().out == f"created user {user} (SCRAM-SHA-512)\n"
    users = {r["user"]: r["mechanisms"] for r in as_user(broker, admin, "user", "list", "--format", "json").json()}
    assert users[user] == [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}]
    carol = properties(tmp_path / "carol.properties", "SCRAM-SHA-512", user, "carol-secret")

    as_user(broker, admin, "topic", "create", topic).ok()
    as_user(broker, carol, "topic", "produce", topic, stdin="first\n").one_line_error("TOPIC_AUTHORIZATION_FAILED")

    principal = f"User:{user}"
    as_user(broker, admin, "acl", "create", "--allow-principal", principal, "--operation", "write",
            "--operation", "read", "--topic", topic).ok()
    as_user(broker, admin, "acl", "create", "--allow-principal", user, "--operation", "Read", "--group", "carol-",
            "--resource-pattern-type", "prefixed").ok()
    listed = as_user(broker, admin, "acl", "list", "--principal", principal, "--format", "json").json()
    assert sorted((a["resource_type"], a["resource_name"], a["pattern_type"], a["operation"], a["permission"])
                  for a in listed) == [("GROUP", "carol-", "PREFIXED", "READ", "ALLOW"),
                                       ("TOPIC", topic, "LITERAL", "READ", "ALLOW"),
                                       ("TOPIC", topic, "LITERAL", "WRITE", "ALLOW")]
    text = as_user(broker, admin, "acl", "list", "--topic", topic).ok().out.splitlines()
    assert text[0].split() == ["PRINCIPAL", "HOST", "RESOURCE-TYPE", "RESOURCE-NAME", "PATTERN", "OPERATION",
                               "PERMISSION"]
    assert [principal, "*", "TOPIC", topic, "LITERAL", "WRITE", "ALLOW"] in [line.split() for line in text]

    as_user(broker, carol, "topic", "produce", topic, stdin="first\nsecond\n").ok()
    assert as_user(broker, carol, "topic", "consume", topic, "-g", group).ok().out == "first\nsecond\n"

    deleted = as_user(broker, admin, "acl", "delete", "--allow-principal", principal, "--operation", "write",
                      "--topic", topic, "--format", "json").json()
    assert [(a["resource_name"], a["operation"]) for a in deleted] == [(topic, "WRITE")]
    as_user(broker, carol, "topic", "produce", topic, stdin="third\n").one_line_error("TOPIC_AUTHORIZATION_FAILED")

    assert as_user(broker, admin, "user", "delete", user).ok().out == f"deleted user {user} (SCRAM-SHA-512)\n"
    assert user not in {r["user"] for r in as_user(broker, admin, "user", "list", "--format", "json").json()}
    as_user(broker, admin, "user", "delete", user).one_line_error("RESOURCE_NOT_FOUND")


def test_a_user_without_rights_cannot_manage_acls_or_users(broker, admin, tmp_path):
    alice = properties(tmp_path / "alice.properties", "PLAIN", "alice", USERS["alice"])
    as_user(broker, alice, "acl", "create", "--allow-principal", "User:alice", "--operation", "all",
            "--cluster").one_line_error("trafka acl create: error:", "CLUSTER_AUTHORIZATION_FAILED")
    as_user(broker, alice, "user", "create", "mallory", "--password", "x").one_line_error(
        "CLUSTER_AUTHORIZATION_FAILED")
    # the admin can, on the cluster resource; a DENY entry is listed as such
    as_user(broker, admin, "acl", "create", "--deny-principal", "User:alice", "--operation", "DescribeConfigs",
            "--cluster").ok()
    rows = as_user(broker, admin, "acl", "list", "--cluster", "--format", "json").json()
    assert {"principal": "User:alice", "host": "*", "resource_type": "CLUSTER", "resource_name": "kafka-cluster",
            "pattern_type": "LITERAL", "operation": "DESCRIBE_CONFIGS", "permission": "DENY"} in rows
    assert as_user(broker, admin, "acl", "delete").one_line_error("refusing to delete every ACL")
    assert as_user(broker, admin, "acl", "create", "--allow-principal", "User:alice", "--operation", "fly",
                   "--cluster").one_line_error("unknown operation 'fly'")
