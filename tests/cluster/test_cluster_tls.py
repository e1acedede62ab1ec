"""Listeners in ZooKeeper mode: two brokers, each with a PLAINTEXT and an SSL listener,
replicating over SSL with client certificates (inter.broker.listener.name=SSL,
ssl.client.auth=required). /brokers/ids/N carries every endpoint and the protocol map;
each broker answers Metadata with the addresses of the listener the client came in on."""

from __future__ import annotations

import json
import time

import confluent_kafka as ck
import pytest

from tests.brokerproc import free_port
from tests.cluster.clusterkit import Cluster
from tests.security.certs import CertificateAuthority
from tests.security.test_tls_listeners import _metadata_brokers

pytestmark = pytest.mark.timeout(180)


def test_two_brokers_replicate_over_mtls_and_answer_per_listener(tmp_path, zk_connect):
    ca = CertificateAuthority(tmp_path / "certs")
    server = ca.issue("broker", server=True, CN="localhost", OU="brokers")
    keystore = ca.pem_keystore(server, tmp_path / "certs" / "broker.pem")
    alice = ca.issue("alice", CN="alice")
    cluster = Cluster(tmp_path, zk_connect, 2, "--set", "offsets.topic.replication.factor=2",
                      "--set", "transaction.state.log.replication.factor=2")
    ssl_ports = {}
    for node, broker in cluster.brokers.items():
        ssl_ports[node] = free_port()
        broker.extra += ["--set", f"listeners=PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{ssl_ports[node]}",
                         "--set", "inter.broker.listener.name=SSL",
                         "--set", "ssl.keystore.type=PEM", "--set", f"ssl.keystore.location={keystore}",
                         "--set", "ssl.truststore.type=PEM", "--set", f"ssl.truststore.location={ca.cert_pem}",
                         "--set", "ssl.client.auth=required"]
    with cluster:
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=zk_connect)
        zk.start(timeout=10)
        try:
            doc = json.loads(zk.get("/brokers/ids/1")[0])
        finally:
            zk.stop()
            zk.close()
        assert doc["endpoints"] == [f"PLAINTEXT://127.0.0.1:{cluster.brokers[1].port}",
                                    f"SSL://127.0.0.1:{ssl_ports[1]}"]
        assert doc["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}
        assert (doc["host"], doc["port"]) == ("127.0.0.1", cluster.brokers[1].port)

        # min.insync.replicas=2: an acks=all write below is acknowledged only once the
        # follower fetched it, and followers fetch over the SSL inter-broker listener.
        created = cluster.create_topic("secure", 2, 2, {"min.insync.replicas": "2"})
        assert created["error_code"] == 0, created

        plain = sorted(("127.0.0.1", b.port) for b in cluster.brokers.values())
        for node in cluster.brokers:  # each broker answers PLAINTEXT clients with the PLAINTEXT addresses
            cluster.wait_for(lambda: sorted((b["host"], b["port"]) for b in cluster.metadata(node=node)["brokers"])
                             == plain, 30, f"broker {node}'s PLAINTEXT metadata")
        import socket
        import ssl

        context = ssl.create_default_context(cafile=str(ca.cert_pem))
        context.load_cert_chain(str(alice.cert_pem), str(alice.key_pem))

        def ssl_metadata_of_broker_2():
            with context.wrap_socket(socket.create_connection(("127.0.0.1", ssl_ports[2]), timeout=10),
                                     server_hostname="127.0.0.1") as tls:
                return sorted(_metadata_brokers(tls))
        # A broker learns the others from the controller's UpdateMetadata, a moment after it
        # starts: until then its Metadata lists no broker (a CI run asked that early).
        expected = sorted(("127.0.0.1", p) for p in ssl_ports.values())
        cluster.wait_for(lambda: ssl_metadata_of_broker_2() == expected, 30, "broker 2's SSL-listener metadata")

        conf = {"bootstrap.servers": f"127.0.0.1:{ssl_ports[1]}", "security.protocol": "ssl",
                "ssl.ca.location": str(ca.cert_pem), "ssl.certificate.location": str(alice.cert_pem),
                "ssl.key.location": str(alice.key_pem)}
        producer = ck.Producer({**conf, "acks": "all"})
        for i in range(100):
            producer.produce("secure", key=b"k%d" % (i % 5), value=b"m%d" % i)
        assert producer.flush(30) == 0
        consumer = ck.Consumer({**conf, "group.id": "secure-readers", "auto.offset.reset": "earliest"})
        consumer.subscribe(["secure"])
        seen = set()
        deadline = time.monotonic() + 40
        while len(seen) < 100 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.add(message.value())
        consumer.close()
        assert seen == {b"m%d" % i for i in range(100)}
        # the brokers' own connections (controller, fetchers) came in on SSL with their certificate
        logs = "".join(b.log_path.read_text(errors="replace") for b in cluster.brokers.values())
        assert "on listener SSL: TLS client certificate CN=localhost,OU=brokers" in logs
        assert "on listener SSL: TLS client certificate CN=alice, principal User:CN=alice" in logs
