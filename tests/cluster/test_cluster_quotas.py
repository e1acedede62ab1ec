"""Client quotas in a 2-broker cluster with a real ZooKeeper: an AlterClientQuotas to one
broker is stored as Kafka's ZooKeeper mode stores it (`/config/users/<u>/clients/<c>`,
`/config/clients/<c>`, a `/config/changes` notice with the entity path), the other broker
describes and enforces it (a throttled Produce answered with throttle_time_ms), and a
removal reaches it too."""

from __future__ import annotations

import json
import os
import time

import pytest
from kazoo.client import KazooClient

from tests.brokerproc import raw_request
from tests.cluster.clusterkit import Cluster
from wire.records import Record, build_batch

pytestmark = pytest.mark.timeout(120)

DESCRIBE, ALTER, PRODUCE = 48, 49, 0


def zk_json(zk_connect: str, path: str):
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    try:
        if path.endswith("/changes"):
            return [json.loads(client.get(f"{path}/{c}")[0]) for c in client.get_children(path)]
        return json.loads(client.get(path)[0]) if client.exists(path) else None
    finally:
        client.stop()
        client.close()


def alter(cluster, node, entity, key, value):
    body = {"entries": [{"entity": entity, "ops": [{"key": key, "value": value or 0.0, "remove": value is None}]}],
            "validate_only": False}
    answer = cluster.call(ALTER, 1, body, node=node)
    assert answer["entries"][0]["error_code"] == 0, answer


def described(cluster, node) -> dict:
    answer = cluster.call(DESCRIBE, 1, {"components": [], "strict": False}, node=node)
    assert answer["error_code"] == 0
    return {frozenset((e["entity_type"], e["entity_name"]) for e in entry["entity"]):
            {v["key"]: v["value"] for v in entry["values"]} for entry in answer["entries"]}


def test_quotas_through_zookeeper(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 2) as cluster:
        alter(cluster, 1, [{"entity_type": "user", "entity_name": "alice"},
                           {"entity_type": "client-id", "entity_name": None}], "request_percentage", 12.5)
        alter(cluster, 1, [{"entity_type": "client-id", "entity_name": "app"}], "producer_byte_rate", 1024)
        assert zk_json(zk_connect, "/config/users/alice/clients/<default>") == {
            "version": 1, "config": {"request_percentage": "12.5"}}
        assert zk_json(zk_connect, "/config/clients/app") == {"version": 1, "config": {"producer_byte_rate": "1024"}}
        paths = {n["entity_path"] for n in zk_json(zk_connect, "/config/changes")}
        assert {"users/alice/clients/<default>", "clients/app"} <= paths

        expected = {frozenset({("user", "alice"), ("client-id", None)}): {"request_percentage": 12.5},
                    frozenset({("client-id", "app")}): {"producer_byte_rate": 1024.0}}
        cluster.wait_for(lambda: described(cluster, 2) == expected, 15, "broker 2 has the quotas")

        # broker 2 enforces it: 16 KiB against 1 KiB/s over a 10 s window is ~6 s over
        batch = build_batch([Record(offset=0, timestamp=int(time.time() * 1000), key=None,
                                    value=os.urandom(16 * 1024))])
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                "topic_data": [{"name": "quota-cluster", "partition_data": [{"index": 0, "records": bytes(batch)}]}]}
        answer = raw_request("127.0.0.1", cluster.brokers[2].port, PRODUCE, 7, body, client_id="app")
        assert 3000 < answer["throttle_time_ms"] < 9000, answer

        alter(cluster, 1, [{"entity_type": "client-id", "entity_name": "app"}], "producer_byte_rate", None)
        del expected[frozenset({("client-id", "app")})]
        cluster.wait_for(lambda: described(cluster, 2) == expected, 15, "broker 2 saw the removal")
        answer = raw_request("127.0.0.1", cluster.brokers[2].port, PRODUCE, 7, body, client_id="app")
        assert answer["throttle_time_ms"] == 0
