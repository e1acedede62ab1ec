"""Shared pieces of the SASL tests: a broker on a SASL_PLAINTEXT listener, one with SASL_SSL too (SaslSslBroker), raw SASL
exchanges over a socket (for the error codes and closes a client library hides), and a
SCRAM client for those raw exchanges (RFC 5802, written from the RFC, not from the broker)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import os
import socket
import struct
import subprocess
import time
from pathlib import Path

from tests.brokerproc import BrokerProcess, free_port, recv_exact
from tests.security.certs import CertificateAuthority
from wire import ApiKey, decode_response, encode_request

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              'username="admin" password="admin-secret" '
              + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
ALL_MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"


def sasl_broker(data_dir: Path, *extra: str, mechanisms: str = ALL_MECHANISMS) -> BrokerProcess:
    port = free_port()
    return BrokerProcess(
        data_dir, "--set", f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
        "--set", f"sasl.enabled.mechanisms={mechanisms}",
        "--set", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}", *extra, port=port)


def client_conf(broker, mechanism: str, user: str, password: str) -> dict:
    """librdkafka (confluent-kafka) settings for a SASL_PLAINTEXT connection, or SASL_SSL
    when `broker` has a `ca_pem` (SaslSslBroker)."""
    conf = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password}
    if _ca(broker):
        conf.update({"security.protocol": "SASL_SSL", "ssl.ca.location": _ca(broker)})
    return conf


def _ca(broker) -> str | None:
    ca = getattr(broker, "ca_pem", None)
    return str(ca) if ca else None


def python_conf(broker, mechanism: str, user: str, password: str) -> dict:
    """kafka-python / aiokafka keyword settings (aiokafka takes the CA as an ssl_context:
    see roundtrip_aiokafka)."""
    return dict(bootstrap_servers=broker.bootstrap, security_protocol="SASL_SSL" if _ca(broker) else "SASL_PLAINTEXT",
                sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)


_cids = itertools.count(1)


class Raw:
    """One socket, requests by hand."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)

    def request(self, key: int, version: int, body: dict) -> dict:
        cid = next(_cids)
        self.sock.sendall(encode_request(key, version, cid, body, client_id="sasl-tests"))
        size = struct.unpack(">i", recv_exact(self.sock, 4))[0]
        got, response = decode_response(key, version, recv_exact(self.sock, size))
        assert got == cid
        return response

    def handshake(self, mechanism: str) -> dict:
        return self.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})

    def authenticate(self, token: bytes, version: int = 2) -> dict:
        return self.request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token})

    def plain(self, user: str, password: str, version: int = 2) -> dict:
        assert self.handshake("PLAIN")["error_code"] == 0
        return self.authenticate(f"\0{user}\0{password}".encode(), version)

    def closed_by_broker(self, timeout: float = 5.0) -> bool:
        """True once the broker has closed the connection (EOF or reset) within `timeout`."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Raw":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def scram_login(raw: Raw, mechanism: str, user: str, password: str) -> dict:
    """A whole SCRAM exchange; returns the last SaslAuthenticate response (checks the server
    signature when the broker accepted)."""
    h = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}[mechanism]
    assert raw.handshake(mechanism)["error_code"] == 0
    nonce = base64.b64encode(os.urandom(18)).decode()
    first_bare = f"n={user},r={nonce}"
    first = raw.authenticate(("n,," + first_bare).encode())
    if first["error_code"]:
        return first
    server_first = first["auth_bytes"].decode()
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    assert attrs["r"].startswith(nonce)
    salted = hashlib.pbkdf2_hmac(h().name, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", h).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(h(client_key).digest(), auth_message, h).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    final = raw.authenticate(f"{without_proof},p={proof}".encode())
    if final["error_code"] == 0:
        server_key = hmac.new(salted, b"Server Key", h).digest()
        expected = base64.b64encode(hmac.new(server_key, auth_message, h).digest())
        assert final["auth_bytes"] == b"v=" + expected
    return final


def kcat(*args: str, stdin: bytes | None = None, timeout: float = 30.0) -> subprocess.CompletedProcess:
    return subprocess.run(["kcat", *args], input=stdin, capture_output=True, timeout=timeout)


def wait_for(predicate, timeout: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# ------------------------------------------------------------------ produce + consume per client

def roundtrip_confluent(broker: BrokerProcess, mechanism: str, user: str, password: str, topic: str) -> list[bytes]:
    import confluent_kafka

    conf = client_conf(broker, mechanism, user, password)
    producer = confluent_kafka.Producer({**conf, "message.timeout.ms": 10000})
    errors = []
    for i in range(3):
        producer.produce(topic, f"{user}-{i}".encode(), on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(15) == 0
    assert errors == [None] * 3, errors
    consumer = confluent_kafka.Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def roundtrip_kafka_python(broker: BrokerProcess, mechanism: str, user: str, password: str,
                           topic: str) -> list[bytes]:
    import kafka

    conf = python_conf(broker, mechanism, user, password)
    if _ca(broker):
        conf["ssl_cafile"] = _ca(broker)
    producer = kafka.KafkaProducer(**conf, request_timeout_ms=10000)
    try:
        for i in range(3):
            producer.send(topic, f"{user}-{i}".encode()).get(timeout=15)
    finally:
        producer.close(timeout=5)
    consumer = kafka.KafkaConsumer(topic, **conf, group_id=f"g-{topic}", auto_offset_reset="earliest",
                                   consumer_timeout_ms=10000)
    try:
        got = []
        for msg in consumer:
            got.append(msg.value)
            if len(got) == 3:
                break
    finally:
        consumer.close()
    return got


def roundtrip_aiokafka(broker: BrokerProcess, mechanism: str, user: str, password: str, topic: str) -> list[bytes]:
    import asyncio

    import aiokafka

    conf = python_conf(broker, mechanism, user, password)

    async def run() -> list[bytes]:
        if _ca(broker):
            from aiokafka.helpers import create_ssl_context

            conf["ssl_context"] = create_ssl_context(cafile=_ca(broker))
        producer = aiokafka.AIOKafkaProducer(**conf, request_timeout_ms=10000)
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait(topic, f"{user}-{i}".encode())
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(topic, **conf, group_id=f"g-{topic}", auto_offset_reset="earliest")
        await consumer.start()
        try:
            got = []
            async def take():
                async for msg in consumer:
                    got.append(msg.value)
                    if len(got) == 3:
                        return
            await asyncio.wait_for(take(), 20)
            return got
        finally:
            await consumer.stop()

    return asyncio.run(run())


def roundtrip_kcat(broker: BrokerProcess, mechanism: str, user: str, password: str, topic: str) -> list[bytes]:
    conf = client_conf(broker, mechanism, user, password)
    auth = ["-b", conf.pop("bootstrap.servers")]
    for key, value in conf.items():
        auth += ["-X", f"{key}={value}"]
    lines = b"".join(f"{user}-{i}\n".encode() for i in range(3))
    produced = kcat(*auth, "-P", "-t", topic, stdin=lines)
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = kcat(*auth, "-C", "-t", topic, "-o", "beginning", "-c", "3", "-e")
    assert consumed.returncode == 0, consumed.stderr.decode()
    return consumed.stdout.splitlines()


ROUNDTRIPS = {"confluent-kafka": roundtrip_confluent, "kafka-python": roundtrip_kafka_python,
              "aiokafka": roundtrip_aiokafka, "kcat": roundtrip_kcat}


# ------------------------------------------------------------------ SASL inside TLS

BOB = "bob-secret"


class SaslSslBroker:
    """A broker with three listeners — PLAINTEXT (the one BrokerProcess waits on),
    SASL_SSL and SASL_PLAINTEXT — PLAIN users from sasl.jaas.config, SCRAM enabled, a PEM
    keystore issued by a CA made for the test."""

    def __init__(self, tmp) -> None:
        self.ca = CertificateAuthority(tmp / "certs")
        server = self.ca.issue("broker", server=True, CN="localhost", O="Trafka Tests")
        keystore = self.ca.pem_keystore(server, tmp / "certs" / "broker.keystore.pem", "keypass")
        self.sasl_ssl_port = free_port()
        self.sasl_plain_port = free_port()
        self.broker = BrokerProcess(tmp / "data")
        p = self.broker.port
        self.broker.extra = [
            "--set", f"listeners=PLAINTEXT://127.0.0.1:{p},SASL_SSL://127.0.0.1:{self.sasl_ssl_port},"
                     f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_plain_port}",
            "--set", "inter.broker.listener.name=PLAINTEXT",
            "--set", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
            "--set", f"sasl.jaas.config={PLAIN_JAAS}",
            "--set", "ssl.keystore.type=PEM", "--set", f"ssl.keystore.location={keystore}",
            "--set", "ssl.key.password=keypass",
        ]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_ssl_port}"

    @property
    def ca_pem(self):
        return self.ca.cert_pem

    def librdkafka(self, mechanism: str, user: str, password: str) -> dict:
        return client_conf(self, mechanism, user, password)

    def create_bob(self) -> None:
        """SCRAM-SHA-256/512 user bob, through confluent-kafka's AdminClient logged in with
        PLAIN over SASL_SSL."""
        from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                           UserScramCredentialUpsertion)

        admin = AdminClient(self.librdkafka("PLAIN", "admin", USERS["admin"]))
        futures = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("bob", ScramCredentialInfo(mechanism, 4096), BOB.encode())
            for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)])
        for future in futures.values():
            assert future.result(timeout=15) is None
