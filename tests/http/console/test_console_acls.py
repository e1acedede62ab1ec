"""The console under an authorizer is an unauthenticated client (User:ANONYMOUS): it shows,
browses and changes only what such a Kafka client may; and `trafka.console.enable=false`
leaves the HTTP listener with /metrics, /healthz and /readyz alone."""

from __future__ import annotations

import uuid

import httpx
import pytest
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)

from tests.brokerproc import BrokerProcess
from tests.http.console.conftest import produce

pytestmark = pytest.mark.timeout(120)


def alice_only(admin: AdminClient, resource_type: ResourceType, name: str) -> None:
    """An ALLOW ALL for User:alice: the resource now has ACLs, none of them ANONYMOUS's
    (allow.everyone.if.no.acl.found lets everyone else through)."""
    binding = AclBinding(resource_type, name, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.ALL,
                         AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(timeout=10)


def test_console_sees_and_does_what_an_anonymous_client_may(tmp_path):
    with BrokerProcess(tmp_path / "data", "--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                       "--set", "allow.everyone.if.no.acl.found=true", http=True) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        suffix = uuid.uuid4().hex[:6]
        open_topic, secret, group = f"open-{suffix}", f"secret-{suffix}", f"private-{suffix}"
        for future in admin.create_topics([NewTopic(open_topic, 1, 1), NewTopic(secret, 1, 1)]).values():
            future.result(10)
        produce(broker.bootstrap, open_topic, [{"value": b"hello"}])
        alice_only(admin, ResourceType.TOPIC, secret)
        alice_only(admin, ResourceType.GROUP, group)
        with httpx.Client(base_url=broker.http_url + "/api", timeout=20) as api:
            names = [t["name"] for t in api.get("/topics").json()["topics"]]
            assert open_topic in names and secret not in names
            for response in (api.get(f"/topics/{secret}"), api.get(f"/topics/{secret}/partitions/0/records"),
                             api.delete(f"/topics/{secret}")):
                assert response.status_code == 403, response.text
                assert response.json()["error"] == "TOPIC_AUTHORIZATION_FAILED"
            assert (broker.data_dir / f"{secret}-0").is_dir()  # not deleted (Kafka's clients cannot see it either)
            assert api.get(f"/topics/{open_topic}/partitions/0/records").json()["records"][0]["value"]["text"] == "hello"
            refused = api.get(f"/groups/{group}")
            assert refused.status_code == 403 and refused.json()["error"] == "GROUP_AUTHORIZATION_FAILED"
            reset = api.post(f"/groups/{group}/reset-offsets", json={"to": "earliest", "topic": open_topic})
            assert reset.status_code == 403 and reset.json()["error"] == "GROUP_AUTHORIZATION_FAILED"


def test_console_can_be_turned_off(tmp_path):
    with BrokerProcess(tmp_path / "data", "--set", "trafka.console.enable=false", http=True) as broker:
        assert httpx.get(broker.http_url + "/", timeout=10).status_code == 404
        assert httpx.get(broker.http_url + "/api/cluster", timeout=10).status_code == 404
        assert httpx.get(broker.http_url + "/metrics", timeout=10).status_code == 200
