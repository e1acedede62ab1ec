"""The broker's HTTP listener against a real broker process over real sockets: /metrics
parsed as Prometheus does, moved by real confluent-kafka traffic; /healthz and /readyz;
http.listeners="" opening no port; a taken HTTP port stopping the start."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import confluent_kafka as ck
import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.brokerproc import REPO, BrokerProcess, create_topic, free_port, raw_request
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(180)


def scrape(broker: BrokerProcess) -> dict[str, dict[tuple, float]]:
    """Every sample of /metrics: name -> {sorted label items: value}."""
    response = httpx.get(f"{broker.http_url}/metrics", timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get(name, {}).get(tuple(sorted(labels.items())))


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def listening_ports(pid: int) -> set[int]:
    """TCP ports process `pid` listens on, from /proc (its socket inodes in LISTEN state)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


@pytest.fixture
def broker(tmp_path):
    # fsync on every append: the flush-latency histogram gets samples.
    with BrokerProcess(tmp_path / "data", "--set", "trafka.fsync.policy=always", http=True) as proc:
        yield proc


def test_counters_follow_real_traffic(broker):
    topic, partitions, produced, size = "metered", 2, 3000, 100
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)
    before = scrape(broker)
    assert value(before, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 0

    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(produced):
        producer.produce(topic, value=b"v" * size, key=b"%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0

    after_produce = scrape(broker)
    assert value(after_produce, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == produced
    bytes_in = value(after_produce, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    # Bytes in are the batches as appended: exactly what the partitions' logs hold.
    log_bytes = sum(value(after_produce, "kafka_log_log_size", topic=topic, partition=str(p)) for p in range(partitions))
    assert bytes_in == log_bytes and bytes_in > produced * size
    for p in range(partitions):
        assert value(after_produce, "kafka_log_log_logendoffset", topic=topic, partition=str(p)) == produced / partitions
    produce_requests = sum(v for labels, v in after_produce["kafka_network_requestmetrics_requests_total"].items()
                           if ("request", "Produce") in labels)
    assert produce_requests >= 1
    assert any(("version", "0") not in labels for labels in after_produce["kafka_network_requestmetrics_requests_total"])
    # The latency histogram counts every answered request of the API once.
    assert value(after_produce, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produce_requests
    assert value(after_produce, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce",
                 le="+Inf") == produce_requests
    assert value(after_produce, "kafka_log_logflushstats_logflushrateandtimems_count") > 0

    # A group consumer reads everything and commits part of each partition.
    group = "metered-group"
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < produced and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            seen += 1
    assert seen == produced
    committed = {0: 1000, 1: 250}
    consumer.commit(offsets=[ck.TopicPartition(topic, p, o) for p, o in committed.items()], asynchronous=False)

    samples = scrape(broker)
    assert value(samples, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= bytes_in
    for p, offset in committed.items():
        labels = {"consumergroup": group, "topic": topic, "partition": str(p)}
        assert value(samples, "kafka_consumergroup_current_offset", **labels) == offset
        assert value(samples, "kafka_consumergroup_lag", **labels) == produced / partitions - offset
    fetches = sum(v for labels, v in samples["kafka_network_requestmetrics_requests_total"].items()
                  if ("request", "Fetch") in labels)
    assert fetches >= 1
    assert value(samples, "kafka_network_requestmetrics_requests_total", request="OffsetCommit", version="9") or \
        any(("request", "OffsetCommit") in labels for labels in samples["kafka_network_requestmetrics_requests_total"])
    assert value(samples, "kafka_server_replicamanager_partitioncount") == partitions + 1  # + __consumer_offsets
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    consumer.close()


def test_error_counter_counts_an_unknown_partition(broker):
    def errors() -> float:
        return value(scrape(broker), "kafka_network_requestmetrics_errors_total", request="ListOffsets",
                     error="UNKNOWN_TOPIC_OR_PARTITION") or 0

    assert errors() == 0
    body = {"replica_id": -1, "topics": [{"name": "no-such-topic", "partitions": [
        {"partition_index": 7, "timestamp": -1}, {"partition_index": 8, "timestamp": -1}]}]}
    response = raw_request("127.0.0.1", broker.port, ApiKey.LIST_OFFSETS, 1, body)
    assert {p["error_code"] for p in response["topics"][0]["partitions"]} == {3}  # UNKNOWN_TOPIC_OR_PARTITION
    assert errors() == 2  # one per partition in the response, as Kafka's ErrorsPerSec counts


def test_connection_count_and_fetch_purgatory(broker):
    def connections() -> float:
        return value(scrape(broker), "kafka_server_socketservermetrics_connection_count", listener="PLAINTEXT")

    base = connections()
    sockets = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(3)]
    try:
        wait_for(lambda: connections() >= base + 3, 10, "three more connections")
    finally:
        for sock in sockets:
            sock.close()
    wait_for(lambda: connections() == base, 10, "the connections to close")

    # A Fetch long-poll at the end of a partition waits in the Fetch purgatory.
    raw_request("127.0.0.1", broker.port, ApiKey.CREATE_TOPICS, 4, {
        "topics": [{"name": "idle", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 10000, "validate_only": False})
    fetch = {"replica_id": -1, "max_wait_ms": 4000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
             "topics": [{"topic": "idle", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    waiter = threading.Thread(target=raw_request, args=("127.0.0.1", broker.port, ApiKey.FETCH, 4, fetch))
    waiter.start()
    try:
        wait_for(lambda: value(scrape(broker), "kafka_server_delayedoperationpurgatory_numdelayedoperations",
                               delayedOperation="Fetch") >= 1, 3, "a fetch in the purgatory")
    finally:
        waiter.join(10)


def test_healthz_and_readyz(broker):
    assert httpx.get(f"{broker.http_url}/healthz").status_code == 200
    ready = httpx.get(f"{broker.http_url}/readyz")
    assert ready.status_code == 200 and ready.text.strip() == "ready"
    assert httpx.get(f"{broker.http_url}/nothing-here").status_code == 404


def test_readyz_is_503_until_registered_in_zookeeper(tmp_path):
    """A cluster member whose ZooKeeper is not there: alive, not ready, and says why."""
    dead_zk = free_port()
    broker = BrokerProcess(tmp_path / "data", "--set", f"zookeeper.connect=127.0.0.1:{dead_zk}", http=True)
    log = open(broker.log_path, "ab")
    proc = subprocess.Popen([sys.executable, "-m", "server", "serve", "--listen", broker.bootstrap, "--data-dir",
                             str(broker.data_dir), "--set", f"http.listeners=127.0.0.1:{broker.http_port}",
                             "--set", f"zookeeper.connect=127.0.0.1:{dead_zk}"],
                            stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    log.close()
    try:
        def answers():
            try:
                return httpx.get(f"{broker.http_url}/healthz", timeout=1).status_code == 200
            except httpx.TransportError:
                assert proc.poll() is None, broker.log_tail()
                return False

        wait_for(answers, 30, "/healthz")
        ready = httpx.get(f"{broker.http_url}/readyz", timeout=5)
        assert ready.status_code == 503, ready.text
        assert "ZooKeeper" in ready.text
        assert broker.port not in listening_ports(proc.pid)  # no Kafka listener before registration
    finally:
        proc.kill()
        proc.wait()


def test_empty_http_listeners_opens_no_http_port(tmp_path):
    with BrokerProcess(tmp_path / "off") as off:  # BrokerProcess passes http.listeners= by default
        assert listening_ports(off.proc.pid) == {off.port}
    with BrokerProcess(tmp_path / "on", http=True) as on:
        assert listening_ports(on.proc.pid) == {on.port, on.http_port}


def test_a_taken_http_port_stops_the_start(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        kafka_port = free_port()
        done = subprocess.run([sys.executable, "-m", "server", "serve", "--listen", f"127.0.0.1:{kafka_port}",
                               "--data-dir", str(tmp_path / "data"), "--set", f"http.listeners=127.0.0.1:{port}"],
                              capture_output=True, text=True, timeout=60, cwd=REPO,
                              env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 1, done.stderr
    assert f"cannot listen for HTTP on 127.0.0.1:{port} (http.listeners)" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_grafana_dashboard_charts_only_exported_metrics(broker):
    """deploy/grafana/trafka.json: every metric name its queries use is one /metrics has."""
    import json
    import re

    text = httpx.get(f"{broker.http_url}/metrics", timeout=10).text
    exported = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _hash, _type, name, kind = line.split()
            exported.add(name)
            if kind == "histogram":
                exported.update({f"{name}_bucket", f"{name}_count", f"{name}_sum"})
    dashboard = json.loads((REPO / "deploy" / "grafana" / "trafka.json").read_text())
    used = {name for panel in dashboard["panels"] for target in panel["targets"]
            for name in re.findall(r"\bkafka_[a-z_]+", target["expr"])}
    assert len(used) >= 15
    assert used <= exported, sorted(used - exported)


def test_bytes_out_counts_what_a_long_poll_sends_once(broker):
    """A fetch that waits for min_bytes reads its partitions again after each wake-up; only
    the pass that is answered counts as BytesOut (each pass once counted again)."""
    topic = "long-polled"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=b"x" * 100)
    assert producer.flush(30) == 0
    before = value(scrape(broker), "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) or 0
    fetch = {"replica_id": -1, "max_wait_ms": 800, "min_bytes": 1_000_000, "max_bytes": 10_000_000,
             "isolation_level": 0, "session_id": 0, "session_epoch": -1,
             "topics": [{"topic": topic, "partitions": [
                 {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                  "log_start_offset": -1, "partition_max_bytes": 1_000_000}]}],
             "forgotten_topics_data": [], "rack_id": ""}
    answer = raw_request("127.0.0.1", broker.port, ApiKey.FETCH, 12, fetch)
    sent = len(answer["responses"][0]["partitions"][0]["records"])
    assert sent > 100
    after = value(scrape(broker), "kafka_server_brokertopicmetrics_bytesout_total", topic=topic)
    assert after - before == sent


def test_lag_of_a_kip848_consumer_group(tmp_path):
    """A group.protocol=consumer group (ConsumerGroupHeartbeat, server/groups/consumer/)
    commits through the same offset store as a classic one: its lag is produced minus
    committed, per partition."""
    topic, partitions, produced, group = "metered-848", 3, 90, "metered-848-group"
    with BrokerProcess(tmp_path / "data", "--set", "group.consumer.min.heartbeat.interval.ms=500",
                       "--set", "group.consumer.heartbeat.interval.ms=1000", http=True) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)
        producer = ck.Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(produced):
            producer.produce(topic, value=b"%d" % i, partition=i % partitions)
        assert producer.flush(30) == 0

        consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                "group.protocol": "consumer", "auto.offset.reset": "earliest",
                                "enable.auto.commit": False})
        try:
            consumer.subscribe([topic])
            seen = 0
            deadline = time.monotonic() + 60
            while seen < produced and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    seen += 1
            assert seen == produced
            committed = {0: 30, 1: 7, 2: 0}
            consumer.commit(offsets=[ck.TopicPartition(topic, p, o) for p, o in committed.items()],
                            asynchronous=False)
            # ListGroups v5's group_type: the coordinator holds a KIP-848 group, not a classic one.
            listed = raw_request("127.0.0.1", broker.port, ApiKey.LIST_GROUPS, 5,
                                 {"states_filter": [], "types_filter": []})
            assert {g["group_id"]: g["group_type"] for g in listed["groups"]}[group] == "consumer"

            samples = scrape(broker)
            for p, offset in committed.items():
                labels = {"consumergroup": group, "topic": topic, "partition": str(p)}
                assert value(samples, "kafka_consumergroup_current_offset", **labels) == offset
                assert value(samples, "kafka_consumergroup_lag", **labels) == produced / partitions - offset
        finally:
            consumer.close()


def test_error_counter_counts_none_as_kafka_does(broker):
    """Kafka's ErrorsPerSec counts error="NONE" too: one per error_code that is 0 (here one
    per partition of a ListOffsets answer), next to the failures of the same response."""
    create_topic(broker.port, "counted", 2)

    def errors(code: str) -> float:
        return value(scrape(broker), "kafka_network_requestmetrics_errors_total", request="ListOffsets",
                     error=code) or 0

    assert errors("NONE") == 0
    body = {"replica_id": -1, "topics": [
        {"name": "counted", "partitions": [{"partition_index": 0, "timestamp": -1},
                                           {"partition_index": 1, "timestamp": -1}]},
        {"name": "no-such-topic", "partitions": [{"partition_index": 0, "timestamp": -1}]}]}
    response = raw_request("127.0.0.1", broker.port, ApiKey.LIST_OFFSETS, 1, body)
    codes = sorted(p["error_code"] for t in response["topics"] for p in t["partitions"])
    assert codes == [0, 0, 3]
    assert errors("NONE") == 2
    assert errors("UNKNOWN_TOPIC_OR_PARTITION") == 1
    # An API whose answer has a single top-level error_code: one NONE per request.
    api_versions = value(scrape(broker), "kafka_network_requestmetrics_errors_total", request="ApiVersions",
                         error="NONE")
    requests = sum(v for labels, v in scrape(broker)["kafka_network_requestmetrics_requests_total"].items()
                   if ("request", "ApiVersions") in labels)
    assert api_versions == requests >= 1


def test_connection_count_per_listener(tmp_path):
    """Two listeners, a named one mapped to SASL_PLAINTEXT: each listener's
    kafka_server_socketservermetrics_connection_count{listener} counts its own connections."""
    port, client_port = free_port(), free_port()
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
    with BrokerProcess(tmp_path / "data",
                       "--set", f"listeners=PLAINTEXT://127.0.0.1:{port},CLIENT://127.0.0.1:{client_port}",
                       "--set", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CLIENT:SASL_PLAINTEXT",
                       "--set", "sasl.enabled.mechanisms=PLAIN", "--set", f"sasl.jaas.config={jaas}",
                       port=port, http=True) as broker:
        def counts() -> dict[str, float]:
            family = scrape(broker)["kafka_server_socketservermetrics_connection_count"]
            return {dict(labels)["listener"]: v for labels, v in family.items()}

        # Both listeners are there before any client connects (0 is a value, not a gap).
        base = {"PLAINTEXT": 0, "CLIENT": 0}
        wait_for(lambda: counts() == base, 10, "both listeners at 0 (the start-up probe gone)")
        plain = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
        sasl = [socket.create_connection(("127.0.0.1", client_port)) for _ in range(3)]
        try:
            wait_for(lambda: counts() == {"PLAINTEXT": base["PLAINTEXT"] + 2, "CLIENT": base["CLIENT"] + 3}, 10,
                     "2 PLAINTEXT and 3 CLIENT connections")
            for sock in sasl:
                sock.close()
            wait_for(lambda: counts() == {"PLAINTEXT": base["PLAINTEXT"] + 2, "CLIENT": base["CLIENT"]}, 10,
                     "the CLIENT connections to close")
        finally:
            for sock in plain + sasl:
                sock.close()
        wait_for(lambda: counts() == base, 10, "every connection to close")
