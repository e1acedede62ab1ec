"""The REST Proxy of one broker: bound at start-up, served on the broker's trio loop.

Why bind first, ourselves (as the Schema Registry does): a broker whose REST Proxy port is
taken must say so and not start; so the socket is opened at start-up (an OSError names
the address and `rest.proxy.listeners`) and hypercorn is handed the bound socket. The
proxy's Kafka clients connect to the broker's first listener once it listens
(`set_bootstrap`), and are closed, with every consumer instance, at shutdown.
"""

from __future__ import annotations

import logging
import socket
import time
from functools import partial
from importlib.resources import files

import trio
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType
from hypercorn.trio import serve as hypercorn_serve
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from http_common import listen
from rest_proxy import errors, v2, v3
from rest_proxy.consumers import ConsumerInstances
from rest_proxy.formats import SchemaSource
from rest_proxy.http import JSONAnswer, basic_credentials, drain, error_answer
from rest_proxy.kafka import Credentials, KafkaClients, kafka_error

log = logging.getLogger("trafka.rest_proxy")

PRODUCE_METADATA_AGE = 1.0  # seconds a metadata answer serves v2 produce requests


class RestProxyBindError(listen.BindError):
    """The REST Proxy's listener address cannot be bound."""


def bind(listener: str) -> socket.socket:
    """A listening socket on `listener` (HOST:PORT); RestProxyBindError when it cannot be."""
    try:
        return listen.bind(listener)
    except OSError as exc:
        raise RestProxyBindError(f"rest proxy: cannot listen on {listener} "
                                 f"(rest.proxy.listeners): {exc.strerror or exc}") from None


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


def build_app(proxy: RestProxy) -> Starlette:
    """The ASGI application: v2 routes at the root, v3 under /v3; every refusal Confluent's
    error body, an unexpected exception a 500 / 50002 with its traceback in the log."""

    async def root(request: Request) -> Response:
        return JSONAnswer({})

    description = files("rest_proxy").joinpath("openapi.json").read_bytes()

    async def openapi(request: Request) -> Response:
        """This API's OpenAPI 3 description (package data, checked against these routes by
        tests/rest_proxy/test_rest_openapi.py), for clients and fuzzers."""
        return Response(description, media_type="application/json")

    async def on_rest_error(request: Request, exc: errors.RestError) -> Response:
        return error_answer(request, exc)

    async def on_http_error(request: Request, exc: HTTPException) -> Response:
        return error_answer(request, errors.RestError(exc.status_code, exc.status_code, f"HTTP {exc.status_code} "
                                                      f"{exc.detail}"))

    def guarded(endpoint):
        async def run(request: Request) -> Response:
            try:
                return await endpoint(request)
            except errors.RestError as exc:
                await drain(request)
                return error_answer(request, exc)
            except Exception:
                log.exception("rest proxy: %s %s failed", request.method, request.url.path)
                return error_answer(request, errors.RestError(500, 50002, "Internal server error"))
        return run

    from starlette.routing import Route

    routes = [Route("/", root, methods=["GET"]), Route("/openapi.json", openapi, methods=["GET"])] \
        + v2.routes(proxy) + v3.routes(proxy)
    for route in routes:
        route.app = _wrap(route, guarded)
    return Starlette(routes=routes, exception_handlers={errors.RestError: on_rest_error,
                                                        HTTPException: on_http_error})


def _wrap(route, guarded):
    from starlette.routing import request_response

    return request_response(guarded(route.endpoint))


class RestProxyServer:
    """The REST Proxy of one broker (rest.proxy.listeners)."""

    def __init__(self, config, listener: str) -> None:
        self.listener = listener
        self.proxy = RestProxy(config)
        self.sock = bind(listener)
        self.address = self.sock.getsockname()[:2]
        self.closed = False

    def set_bootstrap(self, addresses: list) -> None:
        """The broker's listeners are bound: the proxy's listener's address (a port 0 is
        the first bound socket's, as tests start brokers with one listener)."""
        listener = self.proxy.listener
        if listener.port:
            self.proxy.clients.set_bootstrap(listener.host, listener.port)
        else:
            self.proxy.clients.set_bootstrap(*addresses[0][:2])

    async def serve(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        config = listen.hypercorn_config(self.sock, logging.getLogger("trafka.rest_proxy.http"),
                                         graceful_timeout=2.0)
        config.read_timeout = 120
        log.info("rest proxy: listening on http://%s:%d", *self.address)
        print(f"trafka: rest proxy on http://{self.address[0]}:{self.address[1]}", flush=True)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.proxy.consumers.expire)
                await nursery.start(partial(hypercorn_serve, build_app(self.proxy), config))
                task_status.started()
        finally:
            with trio.CancelScope(shield=True):
                await self.close()

    async def close(self) -> None:
        """Close every consumer instance (they leave their groups), deliver what the
        producers hold and drop the clients; bounded, and idempotent."""
        if self.closed:
            return
        self.closed = True
        with trio.move_on_after(15):
            await self.proxy.consumers.close_all()
            await trio.to_thread.run_sync(self.proxy.clients.close)
            await self.proxy.schemas.close()
