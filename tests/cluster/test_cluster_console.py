"""The web console of one broker of a 3-broker ZooKeeper cluster: every broker and the
controller as Metadata has them, partitions from the controller's metadata with offsets
where this broker has a replica, the message browser naming the leader of a partition
hosted elsewhere, and create/delete topic going through the cluster's admin path."""

from __future__ import annotations

import confluent_kafka as ck
import httpx
import pytest
from confluent_kafka.admin import AdminClient

from tests.cluster.clusterkit import Cluster, whole_isrs

pytestmark = pytest.mark.timeout(240)


def test_console_in_a_cluster(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, http=True) as cluster:
        console = httpx.Client(base_url=cluster.brokers[1].http_url + "/api", timeout=40)
        metadata = cluster.metadata(node=1)
        shown = console.get("/cluster").json()
        assert shown["mode"] == "zookeeper" and shown["node_id"] == 1
        assert shown["controller_id"] == metadata["controller_id"] >= 1
        assert [b["node_id"] for b in shown["brokers"]] == [1, 2, 3]
        assert [b["port"] for b in shown["brokers"]] == [cluster.brokers[n].port for n in (1, 2, 3)]
        assert [b["node_id"] for b in shown["brokers"] if b["controller"]] == [metadata["controller_id"]]

        # create through the console: the cluster's CreateTopics path (replicas placed over brokers)
        created = console.post("/topics", json={"name": "spread", "partitions": 3, "replication_factor": 2})
        assert created.status_code == 201, created.text
        cluster.wait_for(whole_isrs(cluster, "spread", 3, size=2), 30, "whole ISRs")
        too_many = console.post("/topics", json={"name": "wide", "partitions": 1, "replication_factor": 4})
        assert too_many.status_code == 400 and too_many.json()["error"] == "INVALID_REPLICATION_FACTOR"
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(30):
            producer.produce("spread", value=b"m%d" % i, partition=i % 3)
        assert producer.flush(30) == 0

        def partitions_agree():
            topic = console.get("/topics/spread").json()
            kafka = {p["partition_index"]: p for p in cluster.metadata(["spread"], node=1)["topics"][0]["partitions"]}
            same = all((p["leader"], p["replicas"], p["isr"]) ==
                       (kafka[p["partition"]]["leader_id"], kafka[p["partition"]]["replica_nodes"],
                        kafka[p["partition"]]["isr_nodes"]) for p in topic["partitions"])
            return topic if same else None

        topic = cluster.wait_for(partitions_agree, 20, "the console's partitions to match Metadata")
        elsewhere = [p for p in topic["partitions"] if 1 not in p["replicas"]]
        here = [p for p in topic["partitions"] if p["leader"] == 1]
        assert elsewhere and here
        assert all(not p["local"] and p["high_watermark"] is None for p in elsewhere)
        for p in here:
            assert p["local"] and p["high_watermark"] == 10
            records = console.get(f"/topics/spread/partitions/{p['partition']}/records").json()["records"]
            assert len(records) == 10

        # a partition without a replica here: the browser says which broker leads it
        away = elsewhere[0]
        answer = console.get(f"/topics/spread/partitions/{away['partition']}/records")
        assert answer.status_code == 421 and answer.json()["error"] == "NOT_LEADER_OR_FOLLOWER"
        leader = cluster.brokers[away["leader"]]
        assert f"broker {away['leader']} (127.0.0.1:{leader.port})" in answer.json()["message"]

        deleted = console.delete("/topics/spread")
        assert deleted.status_code == 200, deleted.text
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        cluster.wait_for(lambda: "spread" not in admin.list_topics(timeout=10).topics, 30, "the topic gone")
        console.close()
