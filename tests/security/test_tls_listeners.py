"""TLS listeners with stock clients over real sockets: one broker process with three
listeners at once, certificates made by the test (tests/security/certs.py):

- PLAINTEXT on the port the fixture waits on;
- SSL: a PEM keystore with an encrypted key, a PEM truststore, ssl.client.auth=required
  and ssl.principal.mapping.rules, so a client certificate becomes "User:alice";
- CLIENT (listener.security.protocol.map CLIENT:SSL): settings of its own through
  Kafka's listener.name.client.ssl.* prefix: a PKCS12 keystore, no client certificates,
  and an advertised address (advertised.listeners) that differs from the bound one only
  in the host name (localhost), so Metadata visibly answers per listener.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import struct
import subprocess
import time
import uuid

import pytest

from tests.brokerproc import BrokerProcess, free_port, recv_exact
from tests.security.certs import CertificateAuthority
from wire import ApiKey, decode_response, encode_request
from wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(120)

RULES = r"RULE:^CN=([^,]*),OU=eng,.*$/$1/L,DEFAULT"


class Setup:
    def __init__(self, tmp) -> None:
        self.ca = CertificateAuthority(tmp / "certs")
        self.server = self.ca.issue("broker", server=True, CN="localhost", OU="brokers", O="Trafka Tests")
        self.alice = self.ca.issue("alice", CN="Alice", OU="eng", O="Acme", C="NL")
        self.pem_keystore = self.ca.pem_keystore(self.server, tmp / "certs" / "broker.keystore.pem", "keypass")
        self.p12_keystore = self.ca.pkcs12_keystore(self.server, tmp / "certs" / "broker.keystore.p12", "storepass")
        self.p12_truststore = self.ca.pkcs12_truststore(tmp / "certs" / "truststore.p12", "trustpass")
        self.ssl_port = free_port()
        self.client_port = free_port()
        self.broker = BrokerProcess(tmp / "data")
        p = self.broker.port
        self.broker.extra = [
            "--set", f"listeners=PLAINTEXT://127.0.0.1:{p},SSL://127.0.0.1:{self.ssl_port},"
                     f"CLIENT://127.0.0.1:{self.client_port}",
            "--set", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,CLIENT:SSL",
            "--set", f"advertised.listeners=CLIENT://localhost:{self.client_port}",
            "--set", "inter.broker.listener.name=PLAINTEXT",
            "--set", "ssl.keystore.type=PEM", "--set", f"ssl.keystore.location={self.pem_keystore}",
            "--set", "ssl.key.password=keypass",
            "--set", "ssl.truststore.type=PEM", "--set", f"ssl.truststore.location={self.ca.cert_pem}",
            "--set", "ssl.client.auth=required", "--set", f"ssl.principal.mapping.rules={RULES}",
            "--set", "listener.name.client.ssl.keystore.type=PKCS12",
            "--set", f"listener.name.client.ssl.keystore.location={self.p12_keystore}",
            "--set", "listener.name.client.ssl.keystore.password=storepass",
            "--set", "listener.name.client.ssl.truststore.type=PKCS12",
            "--set", f"listener.name.client.ssl.truststore.location={self.p12_truststore}",
            "--set", "listener.name.client.ssl.truststore.password=trustpass",
            "--set", "listener.name.client.ssl.client.auth=none",
            "--set", "trafka.ssl.handshake.timeout.ms=1500",
        ]

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    def client_context(self, with_certificate: bool = True) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca.cert_pem))
        if with_certificate:
            context.load_cert_chain(str(self.alice.cert_pem), str(self.alice.key_pem))
        return context

    def log(self) -> str:
        return self.broker.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    s = Setup(tmp_path_factory.mktemp("tls"))
    with s.broker:
        yield s


def _request(sock: socket.socket, api_key: int, version: int, body: dict) -> dict:
    sock.sendall(encode_request(api_key, version, 11, body, client_id="tls-tests"))
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    correlation, response = decode_response(api_key, version, recv_exact(sock, size))
    assert correlation == 11
    return response


def _tls_socket(setup: Setup, port: int, with_certificate: bool = True) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return setup.client_context(with_certificate).wrap_socket(raw, server_hostname="localhost")


def _metadata_brokers(sock) -> list[tuple[str, int]]:
    body = _request(sock, ApiKey.METADATA, 1, {"topics": []})
    return [(b["host"], b["port"]) for b in body["brokers"]]


def test_metadata_answers_the_address_of_the_listener_the_client_came_in_on(setup):
    with socket.create_connection(("127.0.0.1", setup.broker.port), timeout=10) as plain:
        assert _metadata_brokers(plain) == [("127.0.0.1", setup.broker.port)]
    with _tls_socket(setup, setup.ssl_port) as tls:
        assert _metadata_brokers(tls) == [("127.0.0.1", setup.ssl_port)]
        coordinator = _request(tls, ApiKey.FIND_COORDINATOR, 1, {"key": "g", "key_type": 0})
        if coordinator["error_code"] == ErrorCode.NONE:
            assert (coordinator["host"], coordinator["port"]) == ("127.0.0.1", setup.ssl_port)
    with _tls_socket(setup, setup.client_port, with_certificate=False) as tls:
        assert _metadata_brokers(tls) == [("localhost", setup.client_port)]
        cluster = _request(tls, ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
        assert [(b["host"], b["port"]) for b in cluster["brokers"]] == [("localhost", setup.client_port)]


def test_confluent_kafka_with_client_certificate_gets_mapped_principal(setup):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = f"tls-ck-{uuid.uuid4().hex[:8]}"
    conf = {"bootstrap.servers": setup.ssl_bootstrap, "security.protocol": "ssl",
            "ssl.ca.location": str(setup.ca.cert_pem), "ssl.certificate.location": str(setup.alice.cert_pem),
            "ssl.key.location": str(setup.alice.key_pem)}
    producer = confluent_kafka.Producer(conf)
    for i in range(50):
        producer.produce(topic, key=b"k", value=f"value-{i}".encode())
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 50 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got.append(message.value().decode())
    consumer.close()
    assert got == [f"value-{i}" for i in range(50)]
    # The certificate's DN, as Java writes it, through RULE ... /L: "User:alice".
    assert "TLS client certificate CN=Alice,OU=eng,O=Acme,C=NL, principal User:alice" in setup.log()


def test_required_client_auth_turns_away_a_client_without_certificate(setup):
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        with _tls_socket(setup, setup.ssl_port, with_certificate=False) as tls:
            _metadata_brokers(tls)  # TLS 1.3: the refusal arrives with the first read
    with socket.create_connection(("127.0.0.1", setup.broker.port), timeout=10) as plain:
        assert _metadata_brokers(plain)  # and the broker goes on


def test_kafka_python_over_pkcs12_listener(setup):
    kafka = pytest.importorskip("kafka")
    topic = f"tls-kp-{uuid.uuid4().hex[:8]}"
    bootstrap = f"localhost:{setup.client_port}"
    common = {"bootstrap_servers": bootstrap, "security_protocol": "SSL", "ssl_cafile": str(setup.ca.cert_pem),
              "request_timeout_ms": 20000}
    producer = kafka.KafkaProducer(**common)
    for i in range(20):
        producer.send(topic, f"kp-{i}".encode())
    producer.flush(30)
    producer.close(10)
    consumer = kafka.KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=15000, **common)
    got = []
    for message in consumer:
        got.append(message.value.decode())
        if len(got) == 20:
            break
    consumer.close()
    assert got == [f"kp-{i}" for i in range(20)]


def test_aiokafka_over_ssl_with_client_certificate(setup):
    aiokafka = pytest.importorskip("aiokafka")
    topic = f"tls-aio-{uuid.uuid4().hex[:8]}"

    async def run() -> list[str]:
        context = setup.client_context()
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=setup.ssl_bootstrap, security_protocol="SSL",
                                             ssl_context=context)
        await producer.start()
        try:
            for i in range(20):
                await producer.send_and_wait(topic, f"aio-{i}".encode())
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=setup.ssl_bootstrap, security_protocol="SSL",
                                             ssl_context=context, auto_offset_reset="earliest")
        await consumer.start()
        got = []
        try:
            async with asyncio.timeout(30):
                async for message in consumer:
                    got.append(message.value.decode())
                    if len(got) == 20:
                        break
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [f"aio-{i}" for i in range(20)]


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_over_ssl(setup):
    topic = f"tls-kcat-{uuid.uuid4().hex[:8]}"
    tls = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={setup.ca.cert_pem}",
           "-X", f"ssl.certificate.location={setup.alice.cert_pem}", "-X", f"ssl.key.location={setup.alice.key_pem}"]
    lines = "".join(f"kcat-{i}\n" for i in range(10))
    subprocess.run(["kcat", "-b", setup.ssl_bootstrap, *tls, "-P", "-t", topic], input=lines.encode(),
                   check=True, timeout=30)
    out = subprocess.run(["kcat", "-b", setup.ssl_bootstrap, *tls, "-C", "-t", topic, "-o", "beginning", "-e",
                          "-c", "10"], capture_output=True, check=True, timeout=30)
    assert out.stdout.decode().split() == [f"kcat-{i}" for i in range(10)]


def test_plaintext_client_on_the_tls_port_is_closed_and_the_broker_goes_on(setup):
    with socket.create_connection(("127.0.0.1", setup.ssl_port), timeout=10) as sock:
        sock.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, {}, client_id="plain"))
        data = b""
        try:
            while chunk := sock.recv(4096):
                data += chunk
        except ConnectionError:
            pass
    # No Kafka frame comes back: at most a TLS alert record (content type 21), then close.
    assert not data or data[0] == 21
    assert "TLS handshake with 127.0.0.1" in setup.log()
    with _tls_socket(setup, setup.ssl_port) as tls:
        assert _metadata_brokers(tls) == [("127.0.0.1", setup.ssl_port)]


def test_a_silent_client_is_closed_after_the_handshake_timeout_without_holding_up_others(setup):
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", setup.client_port), timeout=10) as silent:
        # While the silent one waits, another TLS client is served at once.
        with _tls_socket(setup, setup.client_port, with_certificate=False) as tls:
            assert _metadata_brokers(tls) == [("localhost", setup.client_port)]
        assert silent.recv(1) == b""  # closed by the broker, not by our 10 s socket timeout
    assert time.monotonic() - started < 8
    assert "trafka.ssl.handshake.timeout.ms" in setup.log()


def test_java_client_over_ssl_with_a_client_certificate(setup, tmp_path):
    """kafka-clients 3.9.2 (what Spark's connector runs) with Kafka's own ssl.* client
    settings: PKCS12 truststore, PKCS12 keystore holding Alice's certificate, hostname
    verification on (the broker's certificate names 127.0.0.1). Admin, producer and
    consumer all go through the SSL listener; the broker logs Alice's mapped principal."""
    from compat_tests.clients.base import Message
    from compat_tests.clients.java_client import JavaClient

    keystore = setup.ca.pkcs12_keystore(setup.alice, tmp_path / "alice.p12", "alicepass")
    java = JavaClient(setup.ssl_bootstrap, {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(setup.p12_truststore),
        "ssl.truststore.password": "trustpass",
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(keystore),
        "ssl.keystore.password": "alicepass", "ssl.key.password": "alicepass",
    })
    topic = f"tls-java-{uuid.uuid4().hex[:8]}"
    try:
        java.create_topic(topic, 1)
        deliveries = java.produce(topic, [Message(value=b"java-%d" % i) for i in range(20)])
        assert [d.offset for d in deliveries] == list(range(20))
        records = java.consume(topic, 20, group=f"{topic}-group")
        assert [r.value for r in records] == [b"java-%d" % i for i in range(20)]
    finally:
        java.close()
    assert "User:alice" in setup.log()

