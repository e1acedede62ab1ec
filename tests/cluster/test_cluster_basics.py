"""A 3-broker cluster on a real ZooKeeper: registration, controller, topic creation with
replication, produce with acks=all through the ISR, consume from the leader."""

from __future__ import annotations

import confluent_kafka as ck
import pytest

from tests.cluster.clusterkit import Cluster
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(180)


def test_three_brokers_replicate_a_topic(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cluster:
        meta = cluster.metadata()
        assert sorted(b["node_id"] for b in meta["brokers"]) == [1, 2, 3]
        assert meta["controller_id"] in (1, 2, 3)
        # Share groups (KIP-932) work in a cluster too: every broker advertises their APIs and
        # the share coordinator's; membership is the group coordinator's, which no broker is
        # before __consumer_offsets exists (NOT_COORDINATOR, the client looks it up again).
        versions = cluster.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}, 1)
        keys = {api["api_key"] for api in versions["api_keys"]}
        assert ApiKey.FETCH in keys and {76, 77, 78, 79, 84, 85} <= keys, sorted(keys)
        heartbeat = cluster.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {"group_id": "q", "member_id": "m1", "member_epoch": 0,
                                                                   "rack_id": None, "subscribed_topic_names": ["events"]}, 1)
        assert heartbeat["error_code"] == 16, heartbeat  # NOT_COORDINATOR
        created = cluster.create_topic("events", 3, 3, {"min.insync.replicas": "2"})
        assert created["error_code"] == 0, created
        for p in range(3):
            info = cluster.wait_for(lambda: (lambda x: x if x and x["leader_id"] >= 0 and len(x["isr_nodes"]) == 3 else None)(
                cluster.partition("events", p)), 20, f"partition {p} with a full ISR")
            assert sorted(info["replica_nodes"]) == [1, 2, 3]
        leaders = {cluster.partition("events", p)["leader_id"] for p in range(3)}
        assert len(leaders) >= 2, f"leaders spread over brokers: {leaders}"
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
        delivered = []
        for i in range(300):
            producer.produce("events", value=b"m%d" % i, key=b"k%d" % (i % 7),
                             on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())))
        assert producer.flush(30) == 0
        assert all(err is None for err, _p, _o in delivered), [e for e, _p, _o in delivered if e][:3]
        consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "readers",
                                "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["events"])
        seen = set()
        import time
        deadline = time.monotonic() + 60
        while len(seen) < 300 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.add(msg.value())
        consumer.close()
        assert seen == {b"m%d" % i for i in range(300)}
