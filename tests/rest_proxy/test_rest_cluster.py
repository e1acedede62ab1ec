"""The REST Proxy of one broker of a ZooKeeper-mode cluster: being a Kafka client, it routes
produce requests to each partition's leader wherever it is, and v3 shows every broker."""

from __future__ import annotations

import base64
import time
import uuid

import httpx
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from tests.brokerproc import free_port
from tests.cluster.clusterkit import Cluster
from tests.cluster.conftest import zk_connect, zookeeper  # noqa: F401  (the fixtures)

pytestmark = pytest.mark.timeout(180)


def test_produce_reaches_leaders_on_other_brokers(tmp_path, zk_connect):
    cluster = Cluster(tmp_path, zk_connect, 2)
    proxied = cluster.brokers[1]
    proxied.rest_port = free_port()
    with cluster:
        rest = httpx.Client(base_url=proxied.rest_url, timeout=30)
        deadline = time.monotonic() + 30
        while True:
            try:
                clusters = rest.get("/v3/clusters").json()
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, proxied.log_tail()
                time.sleep(0.1)
        cluster_id = clusters["data"][0]["cluster_id"]
        brokers = rest.get(f"/v3/clusters/{cluster_id}/brokers").json()["data"]
        assert sorted(b["broker_id"] for b in brokers) == [1, 2]

        topic = f"spread-{uuid.uuid4().hex[:6]}"
        r = rest.post(f"/v3/clusters/{cluster_id}/topics", json={"topic_name": topic, "partitions_count": 4,
                                                                 "replication_factor": 2})
        assert r.status_code == 201, r.text
        leaders = {}
        deadline = time.monotonic() + 30
        while len(leaders) < 4 and time.monotonic() < deadline:
            for p in rest.get(f"/topics/{topic}/partitions").json():
                if p["leader"] in (1, 2):
                    leaders[p["partition"]] = p["leader"]
            time.sleep(0.2)
        assert set(leaders.values()) == {1, 2}, leaders  # some partitions lead elsewhere

        for partition in range(4):
            r = rest.post(f"/topics/{topic}/partitions/{partition}",
                          headers={"Content-Type": "application/vnd.kafka.binary.v2+json"},
                          json={"records": [{"value": base64.b64encode(b"p%d" % partition).decode()}]})
            assert r.status_code == 200 and r.json()["offsets"][0]["error_code"] is None, r.text

        # assigned, not subscribed: no group coordinator needed (__consumer_offsets wants 3 brokers)
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(4)])
        got = set()
        deadline = time.monotonic() + 30
        try:
            while len(got) < 4 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    got.add((msg.partition(), msg.value()))
        finally:
            consumer.close()
        assert got == {(p, b"p%d" % p) for p in range(4)}
