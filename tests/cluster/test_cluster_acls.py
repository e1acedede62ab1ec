"""ACLs in a ZooKeeper-mode cluster: created on one broker, enforced by all.

Two broker processes share a real ZooKeeper (this directory's fixtures). CreateAcls on
broker 1 writes Kafka's znodes (`/kafka-acl/Topic/<name>`, PREFIXED ones under
`/kafka-acl-extended/prefixed`) and a change notice; broker 2 follows the notice, so its
DescribeAcls and its Metadata answers change too; DeleteAcls on broker 2 removes the znode;
a restarted broker starts with the cluster's ACLs.
"""

from __future__ import annotations

import json

import pytest
from kazoo.client import KazooClient

from tests.cluster.clusterkit import Cluster
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)

ENV = ("--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
       "--set", "allow.everyone.if.no.acl.found=true")
ANY = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None,
       "host_filter": None, "operation": 1, "permission_type": 1}


def creation(name: str, pattern: int) -> dict:
    return {"resource_type": 2, "resource_name": name, "resource_pattern_type": pattern, "principal": "User:alice",
            "host": "*", "operation": 2, "permission_type": 3}


def described(cluster: Cluster, node: int) -> set[tuple[str, int]]:
    answer = cluster.call(ApiKey.DESCRIBE_ACLS, 3, ANY, node=node)
    assert answer["error_code"] == 0
    return {(r["resource_name"], r["pattern_type"]) for r in answer["resources"]}


def test_acls_through_zookeeper(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 2, *ENV) as cluster:
        cluster.create_topic("locked", 1, 2)
        cluster.create_topic("open", 1, 2)
        answer = cluster.call(ApiKey.CREATE_ACLS, 3, {"creations": [creation("locked", 3), creation("pfx-", 4)]},
                              node=1)
        assert [r["error_code"] for r in answer["results"]] == [0, 0]
        zk = KazooClient(hosts=zk_connect)
        zk.start()
        try:
            literal = json.loads(zk.get("/kafka-acl/Topic/locked")[0])
            assert literal == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                                       "operation": "All", "host": "*"}]}
            assert zk.exists("/kafka-acl-extended/prefixed/Topic/pfx-")
            assert zk.get_children("/kafka-acl-changes") and zk.get_children("/kafka-acl-extended-changes")
            cluster.wait_for(lambda: described(cluster, 2) == {("locked", 3), ("pfx-", 4)}, 15,
                             "broker 2 follows the change notices")
            topics = {t["name"]: t["error_code"] for t in cluster.metadata(["locked", "open"], node=2)["topics"]}
            assert topics == {"locked": 29, "open": 0}
            deleted = cluster.call(ApiKey.DELETE_ACLS, 3, {"filters": [dict(ANY, resource_name_filter="locked")]},
                                   node=2)
            assert [m["resource_name"] for m in deleted["filter_results"][0]["matching_acls"]] == ["locked"]
            assert not zk.exists("/kafka-acl/Topic/locked")
            cluster.wait_for(lambda: described(cluster, 1) == {("pfx-", 4)}, 15, "broker 1 follows the deletion")
            topics = {t["name"]: t["error_code"] for t in cluster.metadata(["locked"], node=1)["topics"]}
            assert topics == {"locked": 0}
            # A restarted broker reads the cluster's ACLs from ZooKeeper before serving.
            cluster.brokers[2].restart()
            assert described(cluster, 2) == {("pfx-", 4)}
        finally:
            zk.stop()
