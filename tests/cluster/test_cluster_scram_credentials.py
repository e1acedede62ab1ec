"""SCRAM credentials in a cluster: kept in ZooKeeper as Kafka's ZooKeeper mode keeps them
(/config/users/<user> + a /config/changes notice), so a credential made through one
broker is known to the others at once and to a broker that starts later."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from kazoo.client import KazooClient

from tests.brokerproc import raw_request
from tests.cluster.clusterkit import Cluster
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


def upsert(name: str, mechanism: int, iterations: int = 4096) -> dict:
    salt = os.urandom(16)
    digest = "sha256" if mechanism == 1 else "sha512"
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt,
            "salted_password": hashlib.pbkdf2_hmac(digest, b"pw", salt, iterations)}


def described(broker, users: list[str]) -> dict:
    answer = raw_request("127.0.0.1", broker.port, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                         {"users": [{"name": u} for u in users]})
    return {r["user"]: (r["error_code"], sorted((i["mechanism"], i["iterations"]) for i in r["credential_infos"]))
            for r in answer["results"]}


def test_credentials_live_in_zookeeper_and_reach_every_broker(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 2) as cluster:
        one, two = cluster.brokers[1], cluster.brokers[2]
        answer = raw_request("127.0.0.1", one.port, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0,
                             {"deletions": [], "upsertions": [upsert("bob smith*", 1, 8192), upsert("bob smith*", 2)]})
        assert answer["results"] == [{"user": "bob smith*", "error_code": 0, "error_message": None}]
        client = KazooClient(hosts=zk_connect)
        client.start()
        try:
            data, _ = client.get("/config/users/bob%20smith%2A")
            config = json.loads(data)["config"]
            assert config["SCRAM-SHA-256"].startswith("salt=") and config["SCRAM-SHA-256"].endswith(",iterations=8192")
            assert "stored_key=" in config["SCRAM-SHA-512"] and "server_key=" in config["SCRAM-SHA-512"]
            notices = [json.loads(client.get(f"/config/changes/{c}")[0]) for c in client.get_children("/config/changes")]
            assert {"version": 2, "entity_path": "users/bob%20smith%2A"} in notices
        finally:
            client.stop()
        expected = {"bob smith*": (ErrorCode.NONE, [(1, 8192), (2, 4096)])}
        Cluster.wait_for(lambda: described(two, ["bob smith*"]) == expected, 15, "broker 2 to learn the credential")
        raw_request("127.0.0.1", two.port, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0,
                    {"deletions": [{"name": "bob smith*", "mechanism": 2}], "upsertions": []})
        Cluster.wait_for(lambda: described(one, ["bob smith*"]) == {"bob smith*": (ErrorCode.NONE, [(1, 8192)])}, 15,
                         "broker 1 to learn the deletion")
        two.restart()  # a starting broker reads every user
        assert described(two, ["bob smith*"]) == {"bob smith*": (ErrorCode.NONE, [(1, 8192)])}
        assert not (one.data_dir / "__security" / "scram_credentials.json").exists()  # ZooKeeper only
