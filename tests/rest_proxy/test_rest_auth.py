"""REST Proxy with security on: HTTP Basic against the broker's SASL users (a PLAIN user of
the JAAS config and a SCRAM user made with AlterUserScramCredentials); the proxy logs in to
its broker as that user, so the broker's authentication (and ACLs) decide."""

from __future__ import annotations

import base64
import uuid

import httpx
import pytest
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from tests.brokerproc import free_port
from tests.rest_proxy.conftest import BINARY, V2, RestBroker, read_all
from tests.security.sasl_kit import ALL_MECHANISMS, PLAIN_JAAS, client_conf

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    port = free_port()
    with RestBroker(tmp_path_factory.mktemp("rest-sasl") / "data",
                    "--set", f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
                    "--set", f"sasl.enabled.mechanisms={ALL_MECHANISMS}",
                    "--set", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
                    port=port) as broker:
        admin = AdminClient(client_conf(broker, "PLAIN", "admin", "admin-secret"))
        futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bob-secret")])
        for f in futures.values():
            f.result(timeout=15)
        yield broker


def test_no_or_wrong_credentials_are_401(secured):
    r = httpx.get(secured.rest_url + "/topics")
    assert r.status_code == 401 and r.json()["error_code"] == 401
    assert r.headers["www-authenticate"].startswith("Basic")
    for auth in (("alice", "wrong"), ("nobody", "x"), ("bob", "alice-secret")):
        r = httpx.get(secured.rest_url + "/topics", auth=auth, timeout=30)
        assert r.status_code == 401, (auth, r.text)
    r = httpx.get(secured.rest_url + "/v3/clusters", headers={"Authorization": "Basic !!!"})
    assert r.status_code == 401


def test_plain_and_scram_users_produce_and_consume(secured):
    topic = f"sec-{uuid.uuid4().hex[:6]}"
    alice = httpx.Client(base_url=secured.rest_url, auth=("alice", "alice-secret"), timeout=30)
    bob = httpx.Client(base_url=secured.rest_url, auth=("bob", "bob-secret"), timeout=30)
    cluster_id = alice.get("/v3/clusters").json()["data"][0]["cluster_id"]
    r = alice.post(f"/v3/clusters/{cluster_id}/topics", json={"topic_name": topic, "partitions_count": 1})
    assert r.status_code == 201, r.text
    r = bob.post(f"/topics/{topic}", headers={"Content-Type": BINARY},
                 json={"records": [{"value": base64.b64encode(b"from bob").decode()}]})
    assert r.status_code == 200 and r.json()["offsets"][0]["error_code"] is None, r.text

    r = alice.post(f"/consumers/g-{topic}", headers={"Content-Type": V2},
                   json={"name": "alices", "auto.offset.reset": "earliest"})
    assert r.status_code == 200, r.text
    base_uri = r.json()["base_uri"]
    assert alice.post(base_uri + "/subscription", headers={"Content-Type": V2},
                      json={"topics": [topic]}).status_code == 204
    got = read_all(alice, base_uri, BINARY, 1)
    assert base64.b64decode(got[0]["value"]) == b"from bob"
    # an instance belongs to the user who made it
    r = bob.get(base_uri + "/records", headers={"Accept": BINARY})
    assert r.status_code == 404 and r.json()["error_code"] == 40403
    assert alice.delete(base_uri).status_code == 204
