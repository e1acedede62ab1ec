"""/metrics of a 3-broker ZooKeeper cluster: under-replicated partitions appear when a
broker dies and go when it is back, ISR shrinks and expands are counted, one broker
reports itself the active controller, and every live broker is ready."""

from __future__ import annotations

import confluent_kafka as ck
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.cluster.clusterkit import Cluster, Workload, whole_isrs

pytestmark = pytest.mark.timeout(240)


def scrape(broker) -> dict[str, float]:
    """Unlabelled samples of one broker's /metrics: name -> value."""
    text = httpx.get(f"{broker.http_url}/metrics", timeout=10).text
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}


def total(cluster: Cluster, name: str, nodes) -> float:
    return sum(scrape(cluster.brokers[n])[name] for n in nodes)


def test_under_replicated_partitions_follow_a_dead_broker(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, http=True) as cluster:
        assert cluster.create_topic("watched", 3, 3, {"min.insync.replicas": "2"})["error_code"] == 0
        cluster.wait_for(whole_isrs(cluster, "watched", 3), 30, "whole ISRs")
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(30):
            producer.produce("watched", value=b"m%d" % i, partition=i % 3)
        assert producer.flush(30) == 0
        everyone = (1, 2, 3)
        for node in everyone:
            assert httpx.get(f"{cluster.brokers[node].http_url}/readyz").status_code == 200
        assert total(cluster, "kafka_server_replicamanager_underreplicatedpartitions", everyone) == 0
        assert total(cluster, "kafka_controller_kafkacontroller_activecontrollercount", everyone) == 1
        assert total(cluster, "kafka_server_replicamanager_partitioncount", everyone) >= 9
        survivors = (1, 2)

        # No controlled shutdown, and writes going on: the leaders see the follower fall
        # behind (replica.lag.time.max.ms=3000) and shrink their ISRs themselves, which is
        # what Kafka's IsrShrinksPerSec counts (not the controller's removal of a dead broker).
        with Workload(cluster, "watched", partitions=3, group=False, pace_s=0.01) as work:
            work.wait_for_progress(50)
            cluster.brokers[3].kill()
            cluster.wait_for(
                lambda: total(cluster, "kafka_server_replicamanager_underreplicatedpartitions", survivors) >= 3,
                40, "under-replicated partitions on the survivors")
            shrinks = total(cluster, "kafka_server_replicamanager_isrshrinks_total", survivors)
            assert total(cluster, "kafka_controller_kafkacontroller_offlinepartitionscount", survivors) == 0
        work.check(allow_failed=True)
        assert shrinks >= 1

        cluster.brokers[3].start()
        cluster.wait_for(whole_isrs(cluster, "watched", 3), 60, "whole ISRs again")
        cluster.wait_for(lambda: total(cluster, "kafka_server_replicamanager_underreplicatedpartitions", everyone) == 0
                         or None, 30, "no under-replicated partition")
        assert total(cluster, "kafka_server_replicamanager_isrexpands_total", everyone) >= 1
