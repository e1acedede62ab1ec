"""Inter-broker SASL: brokers whose only listener is SASL_PLAINTEXT authenticate to each
other (sasl.mechanism.inter.broker.protocol=PLAIN, username/password of the listener's
JAAS entry) with the authorizer on, so replication runs as User:broker (a super user).

Lives with the cluster tests for their session ZooKeeper (tests/cluster/conftest.py).
Readiness is seen with ApiVersions (allowed before authentication); everything else goes
through confluent-kafka authenticated as admin or alice. A fourth broker with a wrong
inter-broker password logs the refusal and never joins the ISR of a partition it follows.
"""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)

from tests.brokerproc import BrokerProcess, free_port
from tests.cluster.clusterkit import FAST, Cluster

pytestmark = pytest.mark.timeout(150)

USERS = {"broker": "broker-secret", "admin": "admin-secret", "alice": "alice-secret"}


def _jaas(password: str) -> str:
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="broker" password="{password}" ' + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")


def _broker(tmp_path, zk_connect: str, node: int, password: str = "broker-secret") -> BrokerProcess:
    port = free_port()
    return BrokerProcess(
        tmp_path / f"broker-{node}" / "data", "--node-id", str(node), "--set", f"zookeeper.connect={zk_connect}", *FAST,
        "--set", f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
        "--set", "security.inter.broker.protocol=SASL_PLAINTEXT",
        "--set", "sasl.enabled.mechanisms=PLAIN", "--set", "sasl.mechanism.inter.broker.protocol=PLAIN",
        "--set", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={_jaas(password)}",
        "--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "--set", "super.users=User:broker;User:admin", port=port)


def _conf(brokers, user: str) -> dict:
    return {"bootstrap.servers": ",".join(b.bootstrap for b in brokers), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}


def _isrs(admin: AdminClient, topic: str) -> dict[int, list[int]]:
    meta = admin.list_topics(topic, timeout=10).topics[topic]
    if meta.error is not None:
        return {}
    return {p: sorted(part.isrs) for p, part in meta.partitions.items()}


def test_replication_over_sasl_with_acls_and_a_refused_broker(tmp_path, zk_connect):
    brokers = [_broker(tmp_path, zk_connect, node) for node in (1, 2, 3)]
    started: list[BrokerProcess] = []
    try:
        for broker in brokers:
            started.append(broker.start())
        admin = AdminClient(_conf(brokers, "admin"))
        Cluster.wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == 3, 30, "three brokers registered")

        for future in admin.create_topics([NewTopic("replicated", 2, 3)]).values():
            future.result(20)
        Cluster.wait_for(lambda: _isrs(admin, "replicated") == {0: [1, 2, 3], 1: [1, 2, 3]}, 30,
                         "whole ISRs: followers fetch over SASL as User:broker")

        follower_log = brokers[1].log_path.read_text(errors="replace")
        assert "authenticated as User:broker with PLAIN" in follower_log  # the controller's, the fetchers' connections

        acls = [AclBinding(ResourceType.TOPIC, "replicated", ResourcePatternType.LITERAL, "User:alice", "*", op,
                           AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.READ)]
        for future in admin.create_acls(acls).values():
            future.result(20)
        time.sleep(0.5)  # the other brokers follow the ACL change notice
        producer = ck.Producer({**_conf(brokers, "alice"), "acks": "all", "enable.idempotence": False})
        for i in range(60):
            producer.produce("replicated", value=b"v%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        consumer = ck.Consumer({**_conf(brokers, "alice"), "group.id": "unused", "enable.auto.commit": False})
        consumer.assign([ck.TopicPartition("replicated", p, ck.OFFSET_BEGINNING) for p in (0, 1)])
        seen: set[bytes] = set()
        deadline = time.monotonic() + 30
        while len(seen) < 60 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.add(message.value())
        consumer.close()
        assert seen == {b"v%d" % i for i in range(60)}

        # A broker whose inter-broker password is wrong: it registers (ZooKeeper), its
        # fetches to the leader are refused, so its replica never joins the ISR.
        bad = _broker(tmp_path, zk_connect, 4, password="wrong-secret")
        started.append(bad.start())
        Cluster.wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == 4, 30, "broker 4 registered")
        for future in admin.create_topics([NewTopic("guarded", 1, replica_assignment=[[1, 4]])]).values():
            future.result(20)
        Cluster.wait_for(lambda: "authentication as 'broker' failed" in bad.log_path.read_text(errors="replace"),
                         30, "broker 4 logs the refusal")
        log = bad.log_path.read_text(errors="replace")
        assert f"<BrokerClient broker 1 at 127.0.0.1:{brokers[0].port}>: SASL/PLAIN authentication as 'broker' " \
               "failed: SASL_AUTHENTICATION_FAILED: Authentication failed: Invalid username or password" in log
        # Created with the whole ISR, as Kafka; the leader drops the follower that never
        # fetches after replica.lag.time.max.ms (3 s here), and it never comes back.
        Cluster.wait_for(lambda: _isrs(admin, "guarded") == {0: [1]}, 20, "broker 4 out of the ISR")
        time.sleep(2)
        assert _isrs(admin, "guarded") == {0: [1]}
        assert "user=broker, mechanism=PLAIN): Authentication failed: Invalid username or password" in \
            brokers[0].log_path.read_text(errors="replace")
    finally:
        for broker in started:
            try:
                broker.stop()
            except Exception:
                broker.kill()


def test_replication_over_scram_once_the_broker_user_exists(tmp_path, zk_connect):
    """Inter-broker SCRAM-SHA-256: the brokers start before their SCRAM user exists (their
    connections to each other are refused, and retried). As with Kafka's ZooKeeper mode
    (`kafka-configs --zookeeper ... --entity-type users --add-config SCRAM-SHA-256=[...]`), the
    user is then written to /config/users/broker with a /config/changes notice: the brokers
    follow it, the controller's requests and the followers' fetches authenticate, the ISRs fill."""
    import json

    from kazoo.client import KazooClient

    from server.security.sasl.scram import ScramCredential

    scram_jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                  'username="broker" password="broker-scram-secret";')
    brokers = []
    for node in (1, 2):
        broker = _broker(tmp_path, zk_connect, node)
        broker.extra += ["--set", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
                         "--set", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256",
                         "--set", f"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config={scram_jaas}"]
        brokers.append(broker)
    started: list[BrokerProcess] = []
    zk = KazooClient(hosts=zk_connect)
    zk.start(timeout=10)
    try:
        for broker in brokers:
            started.append(broker.start())
        Cluster.wait_for(lambda: "SASL/SCRAM-SHA-256 authentication as 'broker' failed" in "".join(
            b.log_path.read_text(errors="replace") for b in brokers), 30, "a refused inter-broker connection")
        stored = ScramCredential.from_password("SCRAM-SHA-256", "broker-scram-secret", 4096).to_kafka()
        zk.create("/config/users/broker", json.dumps({"version": 1, "config": {"SCRAM-SHA-256": stored}}).encode(),
                  makepath=True)
        zk.create("/config/changes/config_change_", b'{"version":2,"entity_path":"users/broker"}',
                  sequence=True, makepath=True)
        admin = AdminClient(_conf(brokers, "admin"))
        Cluster.wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == 2, 40, "both brokers known")
        for future in admin.create_topics([NewTopic("scrammed", 2, 2)]).values():
            future.result(20)
        Cluster.wait_for(lambda: _isrs(admin, "scrammed") == {0: [1, 2], 1: [1, 2]}, 40, "whole ISRs over SCRAM")
        logs = "".join(b.log_path.read_text(errors="replace") for b in brokers)
        assert "authenticated as User:broker with SCRAM-SHA-256" in logs
    finally:
        zk.stop()
        zk.close()
        for broker in started:
            try:
                broker.stop()
            except Exception:
                broker.kill()


def test_replication_over_sasl_ssl(tmp_path, zk_connect):
    """SASL_SSL between brokers: TLS handshake (the other broker's certificate checked
    against the truststore), then SASL/PLAIN inside it. A PLAINTEXT listener stays on the
    harness port only for readiness; the brokers talk over SASL_SSL."""
    from tests.security.certs import CertificateAuthority

    ca = CertificateAuthority(tmp_path / "certs")
    keystore = ca.pem_keystore(ca.issue("broker", server=True, CN="localhost"), tmp_path / "certs" / "broker.pem")
    brokers, ssl_ports = [], {}
    for node in (1, 2):
        broker = _broker(tmp_path, zk_connect, node)
        ssl_ports[node] = free_port()
        broker.extra += ["--set", f"listeners=PLAINTEXT://127.0.0.1:{broker.port},SASL_SSL://127.0.0.1:{ssl_ports[node]}",
                         "--set", "security.inter.broker.protocol=SASL_SSL",
                         "--set", f"listener.name.sasl_ssl.plain.sasl.jaas.config={_jaas('broker-secret')}",
                         "--set", "ssl.keystore.type=PEM", "--set", f"ssl.keystore.location={keystore}",
                         "--set", "ssl.truststore.type=PEM", "--set", f"ssl.truststore.location={ca.cert_pem}",
                         "--set", "allow.everyone.if.no.acl.found=true"]
        brokers.append(broker)
    started: list[BrokerProcess] = []
    try:
        for broker in brokers:
            started.append(broker.start())
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ssl_ports[1]}", "security.protocol": "SASL_SSL",
                             "ssl.ca.location": str(ca.cert_pem), "sasl.mechanisms": "PLAIN",
                             "sasl.username": "admin", "sasl.password": USERS["admin"]})
        Cluster.wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == 2, 30, "both brokers known")
        for future in admin.create_topics([NewTopic("sealed", 2, 2)]).values():
            future.result(20)
        Cluster.wait_for(lambda: _isrs(admin, "sealed") == {0: [1, 2], 1: [1, 2]}, 30, "whole ISRs over SASL_SSL")
        logs = "".join(b.log_path.read_text(errors="replace") for b in brokers)
        assert "listener SASL_SSL" in logs and "authenticated as User:broker with PLAIN" in logs
    finally:
        for broker in started:
            try:
                broker.stop()
            except Exception:
                broker.kill()
