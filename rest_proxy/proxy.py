"""`RestProxy`: what every route of the REST Proxy shares — the Kafka clients of its
broker, the consumer instances, the Schema Registry client — and the few requests several
routes make (metadata, topic configs, watermarks, creating a topic on produce).
"""

from __future__ import annotations

import logging
import time
from functools import partial

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType
from starlette.requests import Request

from http_common import listen
from rest_proxy import errors
from rest_proxy.consumers import ConsumerInstances
from rest_proxy.formats import SchemaSource
from rest_proxy.http import basic_credentials
from rest_proxy.kafka import Credentials, KafkaClients, kafka_error

log = logging.getLogger("trafka.rest_proxy")

PRODUCE_METADATA_AGE = 1.0  # seconds a metadata answer serves v2 produce requests


class RestProxy:
    """What the routes share: the Kafka clients, the consumer instances, the schemas."""

    def __init__(self, config) -> None:
        self.config = config
        self.listener = kafka_listener(config)
        self.clients = KafkaClients(self.listener, config.get("sasl.enabled.mechanisms"))
        self.consumers = ConsumerInstances(self.clients, config.get("consumer.instance.timeout.ms"),
                                           config.get("trafka.rest.proxy.max.consumer.instances"))
        registry = config.get("schema.registry.listeners")
        url = None
        if registry:
            host, port = listen.split_address(registry)
            url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
        self.schemas = SchemaSource(url)
        self._recent: dict = {}

    async def login(self, request: Request) -> Credentials | None:
        """The request's user when security is on (401 without valid Basic credentials)."""
        creds = basic_credentials(request)
        await self.clients.authenticate(creds)
        return creds if self.clients.secured else None

    async def metadata(self, creds: Credentials | None):
        admin = self.clients.admin(creds)
        try:
            md = await self.clients.run(partial(admin.list_topics, timeout=10))
        except KafkaException as exc:
            raise kafka_error(exc) from None
        self._recent[None if creds is None else creds.key()] = (time.monotonic(), md)
        return md

    def recent_metadata(self, creds: Credentials | None, name: str):
        """The metadata answer of `recent_topic` when it holds the topic `name`, else None."""
        if self.recent_topic(creds, name, set()) is None:
            return None
        return self._recent[None if creds is None else creds.key()][1]

    def recent_topic(self, creds: Credentials | None, name: str, partitions: set):
        """A topic seen in metadata less than PRODUCE_METADATA_AGE ago holding `partitions`
        (None: ask again). Produce requests in a row then cost no metadata round trip each;
        only a hit is trusted, so a topic created or grown meanwhile is never refused."""
        seen = self._recent.get(None if creds is None else creds.key())
        if seen is None or time.monotonic() - seen[0] > PRODUCE_METADATA_AGE:
            return None
        found = seen[1].topics.get(name)
        if found is None or found.error is not None or not partitions <= set(found.partitions):
            return None
        return found

    @staticmethod
    def topic_of(md, name: str):
        found = md.topics.get(name)
        if found is None or found.error is not None and not found.partitions:
            raise errors.topic_not_found(name)
        return found

    async def topic_for_produce(self, creds: Credentials | None, name: str):
        """The topic's metadata for a v2 produce. An unknown topic is created first when
        the broker auto-creates topics (as Confluent's proxy, whose producer's metadata
        request creates it), else 40401."""
        md = await self.metadata(creds)
        if name in md.topics and md.topics[name].partitions or not self.config.get("auto.create.topics.enable"):
            return md, self.topic_of(md, name)
        from confluent_kafka.admin import NewTopic

        admin = self.clients.admin(creds)

        def create() -> None:
            try:
                admin.create_topics([NewTopic(name)], request_timeout=15)[name].result(timeout=20)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise

        try:
            await self.clients.run(create)
        except KafkaException as exc:
            raise kafka_error(exc) from None
        log.info("rest proxy: topic %s created by a produce (auto.create.topics.enable)", name)
        md = await self.metadata(creds)
        return md, self.topic_of(md, name)

    async def topic_configs(self, creds: Credentials | None, name: str) -> dict:
        admin = self.clients.admin(creds)
        resource = ConfigResource(ResourceType.TOPIC, name)

        def describe():
            return admin.describe_configs([resource], request_timeout=10)[resource].result(timeout=15)

        try:
            return await self.clients.run(describe)
        except KafkaException as exc:
            raise kafka_error(exc) from None

    async def watermarks(self, creds: Credentials | None, topic: str, partition: int) -> tuple[int, int]:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        admin = self.clients.admin(creds)

        def list_offsets():
            tp = TopicPartition(topic, partition)
            low = admin.list_offsets({tp: OffsetSpec.earliest()}, request_timeout=10)[tp].result(timeout=15)
            high = admin.list_offsets({tp: OffsetSpec.latest()}, request_timeout=10)[tp].result(timeout=15)
            return low.offset, high.offset

        try:
            return await self.clients.run(list_offsets)
        except KafkaException as exc:
            raise kafka_error(exc) from None


def kafka_listener(config):
    """The listener the proxy's clients connect to: the first without TLS (PLAINTEXT or
    SASL_PLAINTEXT: the proxy holds no client trust store); None when every listener is TLS."""
    return next((listener for listener in config.listener_list if not listener.tls), None)
