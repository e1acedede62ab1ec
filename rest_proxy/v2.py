"""Confluent REST Proxy API v2: produce to topics and partitions, topic and partition
metadata, brokers, and consumer instances (subscription, assignments, positions, records,
offsets).

Routes take `application/vnd.kafka[.FORMAT].v2+json` (415 otherwise) and answer
`application/vnd.kafka.v2+json`; records are answered in the consumer's own embedded
format's media type, a different format asked in Accept is a 406 40601 as in Confluent's.
Consumer routes take every embedded format's type as well as the generic one, whatever the
instance's format (Confluent's consumers resource declares them all, so clients send the
type of the format they read with on every call).

Every route is a function of its own taking the proxy and the request, named for its
method and path (GET /topics/{topic}/partitions is `get_topics_topic_partitions`: the
method, then the path's segments with each parameter by its name); `ROUTES` is the one
table of them (tests/rest_proxy/test_rest_route_names.py holds the naming rule).
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException
from starlette.requests import Request
from starlette.responses import Response

from rest_proxy import errors, formats
from rest_proxy.consumers import ConsumerInstance, topic_partitions
from rest_proxy.formats import BINARY, JSON
from rest_proxy.http import (V2, JSONAnswer, check_accept, check_v2_content_type, int_param, json_body,
                                    no_content)
from rest_proxy.kafka import produce_sync
from rest_proxy.proxy import RestProxy

log = logging.getLogger("trafka.rest_proxy")

RECORD_TYPES = {f: f"application/vnd.kafka.{f}.v2+json" for f in formats.FORMATS}
PRODUCE_TYPES = tuple(RECORD_TYPES.values()) + ("application/json",)
CONSUMER_TYPES = tuple(RECORD_TYPES.values()) + (V2, "application/json", "application/octet-stream")


Endpoint = Callable[[RestProxy, Request], Awaitable[Response]]


# ---- metadata ------------------------------------------------------------------
async def get_topics(proxy: RestProxy, request: Request) -> Response:
    creds = await proxy.login(request)
    check_accept(request, (V2, "application/json"))
    md = await proxy.metadata(creds)
    return JSONAnswer(sorted(t for t in md.topics if not t.startswith("__")))


def _partition_json(p) -> dict:
    return {"partition": p.id, "leader": p.leader,
            "replicas": [{"broker": r, "leader": r == p.leader, "in_sync": r in p.isrs} for r in p.replicas]}


async def get_topics_topic(proxy: RestProxy, request: Request) -> Response:
    creds = await proxy.login(request)
    md = await proxy.metadata(creds)
    name = request.path_params["topic"]
    found = proxy.topic_of(md, name)
    configs = await proxy.topic_configs(creds, name)
    return JSONAnswer({"name": name, "configs": {c.name: c.value for c in configs.values()},
                       "partitions": [_partition_json(p) for _i, p in sorted(found.partitions.items())]})


async def get_topics_topic_partitions(proxy: RestProxy, request: Request) -> Response:
    creds = await proxy.login(request)
    found = proxy.topic_of(await proxy.metadata(creds), request.path_params["topic"])
    return JSONAnswer([_partition_json(p) for _i, p in sorted(found.partitions.items())])


def _partition(proxy: RestProxy, md, request: Request):
    name = request.path_params["topic"]
    found = proxy.topic_of(md, name)
    number = request.path_params["partition"]
    if number not in found.partitions:
        raise errors.partition_not_found(name, number)
    return name, found.partitions[number]


async def get_topics_topic_partitions_partition(proxy: RestProxy, request: Request) -> Response:
    creds = await proxy.login(request)
    _name, p = _partition(proxy, await proxy.metadata(creds), request)
    return JSONAnswer(_partition_json(p))


async def get_topics_topic_partitions_partition_offsets(proxy: RestProxy, request: Request) -> Response:
    creds = await proxy.login(request)
    name, p = _partition(proxy, await proxy.metadata(creds), request)
    low, high = await proxy.watermarks(creds, name, p.id)
    return JSONAnswer({"beginning_offset": low, "end_offset": high})


async def get_brokers(proxy: RestProxy, request: Request) -> Response:
    creds = await proxy.login(request)
    md = await proxy.metadata(creds)
    return JSONAnswer({"brokers": sorted(md.brokers)})


# ---- produce -------------------------------------------------------------------
async def _produce(proxy: RestProxy, request: Request) -> Response:
    creds = await proxy.login(request)
    ctype = check_v2_content_type(request, PRODUCE_TYPES)
    check_accept(request, (V2, "application/json"))
    fmt = formats.format_of_media_type(ctype) or JSON
    body = await json_body(request)
    if not isinstance(body, dict) or not isinstance(body.get("records"), list):
        raise errors.unprocessable("the request body must be an object with a 'records' list")
    name = request.path_params["topic"]
    fixed = request.path_params.get("partition")
    records = body["records"]
    # only the int partitions: a hostile record's partition may be any JSON value (a dict is
    # unhashable); whatever is not a partition number is refused record by record below
    wanted = {fixed} if fixed is not None else {r.get("partition") for r in records
                                                  if isinstance(r, dict) and isinstance(r.get("partition"), int)}
    found = proxy.recent_topic(creds, name, wanted)
    if found is None:
        _md, found = await proxy.topic_for_produce(creds, name)
    if fixed is not None and fixed not in found.partitions:
        raise errors.partition_not_found(name, fixed)
    for r in records:
        if not isinstance(r, dict):
            raise errors.unprocessable("each record must be a JSON object")
        p = r.get("partition") if fixed is None else fixed
        if p is not None and (not isinstance(p, int) or isinstance(p, bool) or p not in found.partitions):
            raise errors.partition_not_found(name, p)
    key_schema = value_schema = None
    if fmt in formats.SCHEMA_FORMATS:
        key_schema = await _schema(proxy, body, "key", name, fmt, any(r.get("key") is not None for r in records))
        value_schema = await _schema(proxy, body, "value", name, fmt, any(r.get("value") is not None for r in records))
    items = []
    for r in records:
        if fmt in formats.SCHEMA_FORMATS:
            key = None if r.get("key") is None else key_schema.encode(r["key"])
            value = None if r.get("value") is None else value_schema.encode(r["value"])
        else:
            key = formats.to_bytes(fmt, r.get("key"), what="key")
            value = formats.to_bytes(fmt, r.get("value"), what="value")
        items.append((name, fixed if fixed is not None else r.get("partition"), key, value, None, None))
    results = await proxy.clients.run(produce_sync, proxy.clients.producer(creds), items)
    offsets = []
    for partition_id, offset, _ts, err in results:
        if err is None:
            offsets.append({"partition": partition_id, "offset": offset, "error_code": None, "error": None})
        else:
            log.info("rest proxy: produce to %s failed: %s", name, err)
            offsets.append({"partition": partition_id, "offset": None,
                            "error_code": 1 if err.retriable() else 2, "error": err.str()})
    return JSONAnswer({"key_schema_id": key_schema.id if key_schema else None,
                       "value_schema_id": value_schema.id if value_schema else None,
                       "offsets": offsets})


async def post_topics_topic(proxy: RestProxy, request: Request) -> Response:
    return await _produce(proxy, request)


async def post_topics_topic_partitions_partition(proxy: RestProxy, request: Request) -> Response:
    return await _produce(proxy, request)


async def _schema(proxy: RestProxy, body: dict, part: str, topic: str, fmt: str, needed: bool):
    schema_id = body.get(f"{part}_schema_id")
    text = body.get(f"{part}_schema")
    if schema_id is not None:
        schema = await proxy.schemas.by_id(schema_id)
        if schema.type != formats.REGISTRY_TYPE[fmt]:
            raise errors.invalid_schema(f"{part}_schema_id {schema_id} is a {schema.type} schema, "
                                        f"not {formats.REGISTRY_TYPE[fmt]} (format {fmt})")
        return schema
    if text is not None:
        return await proxy.schemas.register(f"{topic}-{part}", fmt, text)
    if needed:
        raise errors.key_schema_missing() if part == "key" else errors.value_schema_missing()
    return None


# ---- consumer instances --------------------------------------------------------
async def post_consumers_group(proxy: RestProxy, request: Request) -> Response:
    creds = await proxy.login(request)
    check_v2_content_type(request, CONSUMER_TYPES)
    group = request.path_params["group"]
    instance = await proxy.consumers.create(group, await json_body(request, empty={}), creds)
    base = str(request.base_url).rstrip("/")
    return JSONAnswer({"instance_id": instance.name,
                       "base_uri": f"{base}/consumers/{group}/instances/{instance.name}"})


async def _instance(proxy: RestProxy, request: Request) -> ConsumerInstance:
    creds = await proxy.login(request)
    return proxy.consumers.get(request.path_params["group"], request.path_params["name"], creds)


async def delete_consumers_group_instances_name(proxy: RestProxy, request: Request) -> Response:
    instance = await _instance(proxy, request)
    await proxy.consumers.delete(instance)
    return no_content()


async def post_consumers_group_instances_name_subscription(proxy: RestProxy, request: Request) -> Response:
    instance = await _instance(proxy, request)
    check_v2_content_type(request, CONSUMER_TYPES)
    body = await json_body(request)
    if not isinstance(body, dict):
        raise errors.unprocessable("the request body must be an object with 'topics' or 'topic_pattern'")
    topics, pattern = body.get("topics"), body.get("topic_pattern")
    if (topics is None) == (pattern is None):
        raise errors.RestError(409, 40903, "Illegal state: Exactly one of 'topics' or 'topic_pattern' "
                                           "must be given")
    if topics is not None:
        if not isinstance(topics, list) or not topics or not all(isinstance(t, str) and t for t in topics):
            raise errors.unprocessable("topics must be a non-empty list of topic names")
        wanted = list(topics)
    else:
        if not isinstance(pattern, str) or not pattern:
            raise errors.unprocessable("topic_pattern must be a regular expression")
        wanted = ["^" + pattern.removeprefix("^")]

    def subscribe_(consumer) -> None:
        consumer.subscribe(wanted)

    await instance.call(subscribe_)
    instance.subscribed = list(topics) if topics is not None else []
    instance.pattern = pattern
    return no_content()


async def get_consumers_group_instances_name_subscription(proxy: RestProxy, request: Request) -> Response:
    instance = await _instance(proxy, request)
    return JSONAnswer({"topics": instance.subscribed} if instance.pattern is None
                      else {"topics": instance.subscribed, "topic_pattern": instance.pattern})


async def delete_consumers_group_instances_name_subscription(proxy: RestProxy, request: Request) -> Response:
    instance = await _instance(proxy, request)
    async with instance.reading:
        await instance.call(lambda consumer: consumer.unsubscribe())
        instance.subscribed, instance.pattern = [], None
        instance.pending.clear()
    return no_content()


async def post_consumers_group_instances_name_assignments(proxy: RestProxy, request: Request) -> Response:
    instance = await _instance(proxy, request)
    check_v2_content_type(request, CONSUMER_TYPES)
    tps = topic_partitions(await json_body(request))
    if instance.subscribed or instance.pattern:
        raise errors.illegal_state("Subscription to topics, partitions and pattern are mutually exclusive")
    await instance.call(lambda consumer: consumer.assign(tps))
    return no_content()


async def get_consumers_group_instances_name_assignments(proxy: RestProxy, request: Request) -> Response:
    instance = await _instance(proxy, request)
    tps = await instance.call(lambda consumer: consumer.assignment())
    return JSONAnswer({"partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in tps]})


async def post_consumers_group_instances_name_positions(proxy: RestProxy, request: Request) -> Response:
    instance = await _instance(proxy, request)
    check_v2_content_type(request, CONSUMER_TYPES)
    tps = topic_partitions(await json_body(request), "offsets", offsets=True)
    async with instance.reading:
        await instance.call(_seek_all, instance, tps)
    return no_content()


def _seek_all(consumer, instance: ConsumerInstance, tps) -> None:
    assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
    for tp in tps:
        if (tp.topic, tp.partition) not in assigned:
            raise errors.illegal_state(f"No current assignment for partition {tp.topic}-{tp.partition}")
    # records already fetched for these partitions are dropped: the next ones start at the seek
    keep = [m for m in instance.pending if (m.topic(), m.partition()) not in {(t.topic, t.partition) for t in tps}]
    instance.pending.clear()
    instance.pending.extend(keep)
    for tp in tps:
        _seek(consumer, tp)


def _seek(consumer, tp) -> None:
    """librdkafka refuses a seek (_STATE) until the partition's fetcher has started, a
    moment after assign(); Kafka's consumer takes it at once, so it is retried a
    little while."""
    deadline = time.monotonic() + 5
    while True:
        try:
            consumer.seek(tp)
            return
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._STATE or time.monotonic() > deadline:
                raise
        time.sleep(0.02)


async def _seek_edge(proxy: RestProxy, request: Request, edge: str) -> Response:
    instance = await _instance(proxy, request)
    check_v2_content_type(request, CONSUMER_TYPES)
    tps = topic_partitions(await json_body(request))

    def run(consumer) -> None:
        # the assignment first: a partition not assigned is an illegal state at once,
        # not a watermark lookup that times out (10 s, then a 500) for an unknown topic
        assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        for tp in tps:
            if (tp.topic, tp.partition) not in assigned:
                raise errors.illegal_state(f"No current assignment for partition {tp.topic}-{tp.partition}")
        # The end is looked up now (a short watermark query), so records produced after
        # this answer are read: librdkafka's logical OFFSET_END is resolved later, when the
        # fetcher starts, and then skips them. A partition whose end cannot be had in time
        # (a topic that does not exist) falls back to the logical offsets, resolved by the
        # consumer as Kafka's seekToBeginning / seekToEnd are, instead of waiting 10 s.
        for tp in tps:
            tp.offset = OFFSET_BEGINNING if edge == "beginning" else OFFSET_END
            if edge == "end":
                try:
                    _low, high = consumer.get_watermark_offsets(tp, timeout=1.0, cached=False)
                except KafkaException:
                    continue
                if high >= 0:
                    tp.offset = high
        _seek_all(consumer, instance, tps)

    async with instance.reading:
        await instance.call(run)
    return no_content()


async def post_consumers_group_instances_name_positions_beginning(proxy: RestProxy, request: Request) -> Response:
    return await _seek_edge(proxy, request, "beginning")


async def post_consumers_group_instances_name_positions_end(proxy: RestProxy, request: Request) -> Response:
    return await _seek_edge(proxy, request, "end")


async def get_consumers_group_instances_name_records(proxy: RestProxy, request: Request) -> Response:
    instance = await _instance(proxy, request)
    accept = request.headers.get("accept", "")
    named = {formats.format_of_media_type(item.split(";")[0]) for item in accept.split(",")}
    named.discard(None)
    if named and instance.format not in named:
        raise errors.format_mismatch()  # Accept names other embedded formats only
    check_accept(request, (RECORD_TYPES[instance.format], V2, "application/json"))
    timeout = int_param(request.query_params.get("timeout"), "timeout", instance.request_timeout_ms)
    max_bytes = int_param(request.query_params.get("max_bytes"), "max_bytes", 64 * 1024 * 1024, minimum=1)
    # A record that cannot be read ends the answer before it: the records ahead of it are
    # answered, it and those after it stay first in line, so the next request reports it
    # (Confluent's 408 40801, naming partition and offset) until the client seeks past it.
    # Nothing is skipped and no commit passes a record that was not answered.
    async with instance.reading:
        msgs = await instance.call(lambda _consumer: instance.poll(min(timeout, 60000) / 1000, max_bytes))
        out: list[dict] = []
        refusal: errors.RestError | None = None
        try:
            for m in msgs:
                try:
                    out.append(await _entry(proxy, instance.format, m))
                except formats.UnreadableRecord as exc:
                    refusal = errors.record_unreadable(exc.part, m.topic(), m.partition(), m.offset(), exc.cause)
                    break
                except errors.RestError as exc:  # the Schema Registry cannot be asked: retried next time
                    refusal = exc
                    break
        finally:
            if msgs and not instance.closed:
                with trio.CancelScope(shield=True):  # a request cancelled mid-way still gives records back
                    await instance.call(instance.settle, msgs[:len(out)], msgs[len(out):])
    if refusal is not None:
        log.info("rest proxy: consumer %s/%s: %s", instance.group, instance.name, refusal.message)
        if not out:
            raise refusal
    return JSONAnswer(out, media_type=RECORD_TYPES[instance.format])


async def _entry(proxy: RestProxy, fmt: str, m) -> dict:
    entry: dict = {"topic": m.topic()}
    for part, data in (("key", m.key()), ("value", m.value())):
        try:
            entry[part] = await _decode(proxy, fmt, data)
        except formats.UnreadableRecord as exc:
            raise formats.UnreadableRecord(exc.cause, part) from None
    entry |= {"partition": m.partition(), "offset": m.offset()}
    if fmt in formats.SCHEMA_FORMATS:
        entry["key_schema_id"] = formats.schema_id_of(m.key())
        entry["value_schema_id"] = formats.schema_id_of(m.value())
    headers = m.headers()
    if headers:
        entry["headers"] = [{"key": k, "value": base64.b64encode(v or b"").decode()} for k, v in headers]
    return entry


async def _decode(proxy: RestProxy, fmt: str, data: bytes | None) -> Any:
    """The key or value as the consumer's format answers it (UnreadableRecord when the
    format cannot read it; a Schema Registry that cannot be asked is a RestError)."""
    if fmt in (BINARY, JSON):
        return formats.from_bytes(fmt, data)
    if data is None:
        return None
    schema_id = formats.schema_id_of(data)
    if schema_id is None:
        raise formats.UnreadableRecord(f"Unknown magic byte: not in the Schema Registry's wire format "
                                       f"(consumer format {fmt})")
    try:
        schema = await proxy.schemas.by_id(schema_id)
    except errors.RestError as exc:
        if exc.status != 404:
            raise
        raise formats.UnreadableRecord(f"schema {schema_id} is not in the Schema Registry") from None
    try:
        return schema.decode(data)
    except Exception as exc:  # a record the schema cannot read: Confluent's SerializationException
        raise formats.UnreadableRecord(f"a record cannot be read with schema {schema_id}: {exc}") from None


async def post_consumers_group_instances_name_offsets(proxy: RestProxy, request: Request) -> Response:
    instance = await _instance(proxy, request)
    body = await json_body(request, empty=None)
    if isinstance(body, dict) and body.get("offsets"):
        tps = topic_partitions(body, "offsets", offsets=True)
        # Confluent commits the given offsets as they are: the next record to read is
        # the offset + 1 of the last processed, the caller says which.
        await instance.call(lambda consumer: consumer.commit(offsets=tps, asynchronous=False))
    else:
        def commit_consumed(consumer) -> None:
            try:
                consumer.commit(asynchronous=False)
            except KafkaException as exc:  # nothing consumed yet: nothing to commit, as Confluent's
                if exc.args[0].code() == KafkaError._NO_OFFSET:
                    return
                raise
        await instance.call(commit_consumed)
    return no_content()


async def get_consumers_group_instances_name_offsets(proxy: RestProxy, request: Request) -> Response:
    instance = await _instance(proxy, request)
    tps = topic_partitions(await json_body(request))
    found = await instance.call(lambda consumer: consumer.committed(tps, timeout=10))
    return JSONAnswer({"offsets": [{"topic": tp.topic, "partition": tp.partition, "offset": tp.offset,
                                    "metadata": tp.metadata or ""} for tp in found if tp.offset >= 0]})


# ---- the table -------------------------------------------------------------------------
# (method, path, function), in matching order: one starlette route each (server.build_app).
INSTANCE = "/consumers/{group}/instances/{name}"
ROUTES: list[tuple[str, str, Endpoint]] = [
    ("GET", "/topics", get_topics),
    ("GET", "/topics/{topic}", get_topics_topic),
    ("POST", "/topics/{topic}", post_topics_topic),
    ("GET", "/topics/{topic}/partitions", get_topics_topic_partitions),
    ("GET", "/topics/{topic}/partitions/{partition:int}", get_topics_topic_partitions_partition),
    ("POST", "/topics/{topic}/partitions/{partition:int}", post_topics_topic_partitions_partition),
    ("GET", "/topics/{topic}/partitions/{partition:int}/offsets", get_topics_topic_partitions_partition_offsets),
    ("GET", "/brokers", get_brokers),
    ("POST", "/consumers/{group}", post_consumers_group),
    ("DELETE", INSTANCE, delete_consumers_group_instances_name),
    ("POST", INSTANCE + "/subscription", post_consumers_group_instances_name_subscription),
    ("GET", INSTANCE + "/subscription", get_consumers_group_instances_name_subscription),
    ("DELETE", INSTANCE + "/subscription", delete_consumers_group_instances_name_subscription),
    ("POST", INSTANCE + "/assignments", post_consumers_group_instances_name_assignments),
    ("GET", INSTANCE + "/assignments", get_consumers_group_instances_name_assignments),
    ("POST", INSTANCE + "/positions", post_consumers_group_instances_name_positions),
    ("POST", INSTANCE + "/positions/beginning", post_consumers_group_instances_name_positions_beginning),
    ("POST", INSTANCE + "/positions/end", post_consumers_group_instances_name_positions_end),
    ("GET", INSTANCE + "/records", get_consumers_group_instances_name_records),
    ("POST", INSTANCE + "/offsets", post_consumers_group_instances_name_offsets),
    ("GET", INSTANCE + "/offsets", get_consumers_group_instances_name_offsets),
]
