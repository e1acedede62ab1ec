"""The proxy's Kafka side: confluent-kafka clients of the broker the proxy lives in.

Why a Kafka client and not the broker's internals: routing to partition leaders in a
cluster, SASL authentication, ACLs, quotas and consumer-group semantics are then exactly
Kafka's, as for any other client (Confluent's REST Proxy is itself a Java-client
application). librdkafka calls block, so every call runs in a worker thread
(`trio.to_thread.run_sync`): producers and admin clients share a pool, each consumer
instance has a limiter of its own (consumers.py) so one long poll holds nobody else.

With security on (the proxy's listener is SASL_PLAINTEXT) each HTTP user gets clients logged in with the
user's own Basic credentials: the broker authenticates them and its ACLs apply to them.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass

import trio
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from rest_proxy import errors

log = logging.getLogger("trafka.rest_proxy")

# Mechanisms a Basic user/password pair can log in with, in the order the proxy prefers them.
PASSWORD_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")


@dataclass(frozen=True)
class Credentials:
    """An HTTP Basic user; None stands for "security off" wherever credentials are taken."""

    user: str
    password: str

    def key(self) -> tuple[str, str]:
        return self.user, hashlib.sha256(self.password.encode()).hexdigest()


class KafkaClients:
    """Producers and admin clients per user (one each when security is off), created on
    first use and closed at shutdown."""

    def __init__(self, listener, mechanisms: str) -> None:
        self.security_protocol = listener.security_protocol
        self.sasl = self.security_protocol.startswith("SASL")
        enabled = [m.strip().upper() for m in mechanisms.split(",")]
        self.mechanisms = [m for m in PASSWORD_MECHANISMS if m in enabled]
        self._mechanism_of: dict = {}  # user key -> the mechanism the user logged in with
        self.bootstrap = ""
        self.limiter = trio.CapacityLimiter(64)
        self._producers: dict = {}
        self._admins: dict = {}
        self._verified: dict = {}
        self._lock = threading.Lock()

    @property
    def secured(self) -> bool:
        return self.sasl

    def set_bootstrap(self, host: str, port: int) -> None:
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        self.bootstrap = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def base_conf(self, creds: Credentials | None) -> dict:
        conf = {"bootstrap.servers": self.bootstrap, "client.id": "trafka-rest-proxy",
                "security.protocol": self.security_protocol}
        if self.sasl and creds is not None:
            conf.update({"sasl.mechanisms": self._mechanism_of.get(creds.key(), self.mechanisms[0]),
                         "sasl.username": creds.user, "sasl.password": creds.password})
        return conf

    def _key(self, creds: Credentials | None):
        return None if creds is None else creds.key()

    def producer(self, creds: Credentials | None) -> Producer:
        with self._lock:
            key = self._key(creds)
            producer = self._producers.get(key)
            if producer is None:
                conf = self.base_conf(creds) | {"linger.ms": 2, "enable.idempotence": False,
                                                "message.timeout.ms": 30000}
                producer = self._producers[key] = Producer(conf)
            return producer

    def admin(self, creds: Credentials | None) -> AdminClient:
        with self._lock:
            key = self._key(creds)
            admin = self._admins.get(key)
            if admin is None:
                admin = self._admins[key] = AdminClient(self.base_conf(creds))
            return admin

    async def run(self, fn, *args):
        """`fn(*args)` in a worker thread of the shared pool."""
        return await trio.to_thread.run_sync(fn, *args, limiter=self.limiter)

    async def authenticate(self, creds: Credentials | None) -> None:
        """401 unless `creds` log in to the broker (security on). A user may be a SCRAM or a
        PLAIN one: the enabled password mechanisms are tried in turn and the one that
        works is the user's from then on; verified pairs are remembered for a minute so a
        request costs no extra round trip."""
        if not self.secured:
            return
        if creds is None:
            raise errors.unauthorized("Authentication required (HTTP Basic, the SASL users of the broker)")
        if not self.mechanisms:
            raise errors.unauthorized("no password SASL mechanism (PLAIN, SCRAM) is enabled on the broker")
        key = creds.key()
        if self._verified.get(key, 0) > time.monotonic():
            return

        def probe(mechanism: str) -> KafkaError | None:
            """Blocking: None when the user logs in with `mechanism`, else the refusal.
            librdkafka retries a failed login rather than failing a request, so the
            refusal is taken from its error callback."""
            seen: list[KafkaError] = []
            client = Producer(self.base_conf(creds) | {
                "client.id": "trafka-rest-proxy-login", "sasl.mechanisms": mechanism,
                "reconnect.backoff.ms": 1000, "reconnect.backoff.max.ms": 1000, "error_cb": seen.append})
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    client.list_topics(timeout=0.3)
                    return None
                except KafkaException as exc:
                    last = exc.args[0]
                client.poll(0.05)
                for err in seen:
                    if err.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
                        return err
            raise KafkaException(last)

        refused = None
        for mechanism in self._ordered(key):
            try:
                refused = await self.run(probe, mechanism)
            except KafkaException as exc:
                raise kafka_error(exc) from None
            if refused is not None:
                continue
            self._mechanism_of[key] = mechanism
            self._verified[key] = time.monotonic() + 60
            return
        log.info("rest proxy: login of %r refused (%s): %s", creds.user, ", ".join(self.mechanisms), refused)
        raise errors.unauthorized("Authentication failed")

    def _ordered(self, key) -> list[str]:
        known = self._mechanism_of.get(key)
        return ([known] if known else []) + [m for m in self.mechanisms if m != known]

    def close(self) -> None:
        """Blocking: deliver what producers hold (bounded), then drop every client."""
        for producer in self._producers.values():
            producer.flush(5)
        self._producers.clear()
        self._admins.clear()


def kafka_error(err) -> errors.RestError:
    """A librdkafka error (KafkaError or KafkaException) as Confluent's answer for it."""
    if isinstance(err, KafkaException):
        err = err.args[0]
    if not isinstance(err, KafkaError):
        return errors.kafka_error(str(err))
    code = err.code()
    if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
        return errors.unknown_topic_or_partition()
    if code == KafkaError._UNKNOWN_PARTITION:
        return errors.partition_not_found()
    if code in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
                KafkaError.CLUSTER_AUTHORIZATION_FAILED):
        return errors.forbidden(err.str())
    if code == KafkaError._INVALID_ARG:  # librdkafka refused the call's arguments (duplicate config entries, ...)
        return errors.bad_request(err.str())
    if code == KafkaError.TOPIC_ALREADY_EXISTS:
        return errors.RestError(400, 40002, err.str())
    if code in (KafkaError.INVALID_PARTITIONS, KafkaError.INVALID_REPLICATION_FACTOR, KafkaError.INVALID_CONFIG,
                KafkaError.TOPIC_EXCEPTION, KafkaError.POLICY_VIOLATION, KafkaError.INVALID_REQUEST):
        return errors.RestError(400, 40002, err.str())
    return errors.kafka_error(err.str(), retriable=err.retriable())


def produce_sync(producer: Producer, items: list[tuple], timeout: float = 30.0) -> list[tuple]:
    """Blocking: produce `items` ((topic, partition | None, key, value, headers, timestamp_ms))
    and wait for their delivery reports: a (partition, offset, timestamp, KafkaError | None)
    per item, in order. Other requests' threads may serve these reports (poll serves every
    pending callback); each waits on its own event."""
    results: list = [None] * len(items)
    left = [len(items)]
    done = threading.Event()
    guard = threading.Lock()

    def report(i: int):
        def on_delivery(err, msg) -> None:
            ts = msg.timestamp()[1] if msg is not None else None
            results[i] = (msg.partition() if msg is not None else None,
                          msg.offset() if msg is not None and err is None else None, ts, err)
            with guard:
                left[0] -= 1
                if left[0] == 0:
                    done.set()
        return on_delivery

    if not items:
        return []
    for i, (topic, partition, key, value, headers, timestamp) in enumerate(items):
        kwargs = {"key": key, "value": value, "on_delivery": report(i)}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        refreshed = False
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
            except KafkaException as exc:
                if exc.args[0].code() == KafkaError._UNKNOWN_PARTITION and not refreshed:
                    # a partition added since the producer's last metadata (the proxy
                    # checked it exists): refresh its metadata once and try again
                    refreshed = True
                    try:
                        producer.list_topics(topic, timeout=5)
                    except KafkaException:
                        pass
                    continue
                results[i] = (partition, None, None, exc.args[0])
                with guard:
                    left[0] -= 1
                    if left[0] == 0:
                        done.set()
                break
    deadline = time.monotonic() + timeout
    while not done.is_set() and time.monotonic() < deadline:
        producer.poll(0.01)
    for i, r in enumerate(results):
        if r is None:
            results[i] = (items[i][1], None, None, KafkaError(KafkaError._MSG_TIMED_OUT))
    return results
