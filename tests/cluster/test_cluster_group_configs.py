"""Group configs (GROUP config resources) in a 3-broker cluster with a real ZooKeeper: set
through a broker that is not the group's coordinator, stored as `/config/groups/<group>`
with a change notice, applied by the coordinator (ConsumerGroupHeartbeat's interval),
described the same by every broker, and still applied after the coordinator restarts."""

from __future__ import annotations

import uuid

import pytest

from tests.cluster.clusterkit import Cluster
from tests.cluster.test_cluster_dynamic_configs import zk_read
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(240)

GROUP, SET = 32, 0
GROUP_CONFIG = 8


def coordinator_of(cluster: Cluster, group: str) -> int | None:
    c = cluster.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]
    return c["node_id"] if c["error_code"] == 0 else None


def heartbeat_interval(cluster: Cluster, node: int, group: str) -> int | None:
    """A new member's ConsumerGroupHeartbeat v1 at `node`: the interval it is given."""
    body = {"group_id": group, "member_id": uuid.uuid4().hex[:22], "member_epoch": 0, "instance_id": None,
            "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": ["t"],
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []}
    r = cluster.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body, node)
    return r["heartbeat_interval_ms"] if r["error_code"] == 0 else None


def described(cluster: Cluster, node: int, group: str, key: str) -> tuple[str, int]:
    body = {"resources": [{"resource_type": GROUP, "resource_name": group, "configuration_keys": [key]}],
            "include_synonyms": True, "include_documentation": False}
    entry = cluster.call(ApiKey.DESCRIBE_CONFIGS, 4, body, node)["results"][0]["configs"][0]
    return entry["value"], entry["config_source"]


def test_group_configs_set_anywhere_applied_by_the_coordinator(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 3) as cluster:
        assert cluster.create_topic("t", 2, 3)["error_code"] == 0
        group = "cfg/group"  # a group id with a '/': the znode's name is URL-encoded
        coordinator = cluster.wait_for(lambda: coordinator_of(cluster, group), 30, "a coordinator")
        assert cluster.wait_for(lambda: heartbeat_interval(cluster, coordinator, group), 30, "a join") == 5000
        other = next(n for n in (1, 2, 3) if n != coordinator)
        body = {"resources": [{"resource_type": GROUP, "resource_name": group, "configs": [
            {"name": "consumer.heartbeat.interval.ms", "config_operation": SET, "value": "7000"}]}],
            "validate_only": False}
        answer = cluster.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body, other)["responses"][0]
        assert answer["error_code"] == 0, answer
        assert zk_read(zk_connect, "/config/groups/cfg%2Fgroup") == {
            "version": 1, "config": {"consumer.heartbeat.interval.ms": "7000"}}
        notices = zk_read(zk_connect, "/config/changes") or {}
        assert {"version": 2, "entity_path": "groups/cfg%2Fgroup"} in notices.values()
        # the coordinator hears of it through the notice
        cluster.wait_for(lambda: heartbeat_interval(cluster, coordinator, group) == 7000, 30, "the group's interval")
        for node in (1, 2, 3):
            assert described(cluster, node, group, "consumer.heartbeat.interval.ms") == ("7000", GROUP_CONFIG)
        # a restarted coordinator reads /config/groups before it serves
        cluster.brokers[coordinator].restart()
        cluster.wait_for(lambda: len(cluster.metadata()["brokers"]) == 3, 30, "the coordinator back")
        now = cluster.wait_for(lambda: coordinator_of(cluster, group), 60, "a coordinator after the restart")
        assert cluster.wait_for(lambda: heartbeat_interval(cluster, now, group), 60, "a join after the restart") == 7000
