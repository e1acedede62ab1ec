"""Confluent REST Proxy API v3 (Kafka REST, `application/json`): clusters, brokers, topics
(list, create, get, delete), partitions and replicas, topic configs (list, get, set, reset, batch
alter), records produce, consumer groups with their consumers, lags and lag summary.

Every route is a function of its own taking the proxy and the request, named for its
method and its path below /v3/clusters/{cluster_id} (GET .../topics/{topic}/partitions is
`get_topics_topic_partitions`: the method, then the path's segments with each parameter by
its name); `ROUTES` is the one table of them (tests/rest_proxy/test_rest_route_names.py
holds the naming rule).

Resources carry Confluent's `kind`, `metadata.self` and `related` links built from the
request's base URL; refusals are `{"error_code", "message"}` with Confluent's v3 codes
(404 / 40403 unknown topic, 400 / 40002 invalid topic creation, 422 bad entity).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, OffsetSpec,
                                   ResourceType)
from starlette.requests import Request
from starlette.responses import Response

from rest_proxy import errors, formats
from rest_proxy.http import V3, JSONAnswer, content_type, no_content, raw_body
from rest_proxy.kafka import kafka_error, produce_sync
from rest_proxy.proxy import RestProxy

log = logging.getLogger("trafka.rest_proxy")

# v3's key/value "type" for each registry schema type
SCHEMA_KINDS = {"AVRO": formats.AVRO, "JSONSCHEMA": formats.JSONSCHEMA, "PROTOBUF": formats.PROTOBUF}


def _answer(content: Any, status: int = 200) -> Response:
    return JSONAnswer(content, status, V3)


def _resource(base: str, path: str, kind: str, crn_cluster: str, crn: str, **fields) -> dict:
    return {"kind": kind, "metadata": {"self": base + path, "resource_name": f"crn:///kafka={crn_cluster}{crn}"},
            **fields}


def _list(base: str, path: str, kind: str, data: list) -> dict:
    return {"kind": kind, "metadata": {"self": base + path, "next": None}, "data": data}


Endpoint = Callable[[RestProxy, Request], Awaitable[Response]]


def base(request: Request) -> str:
    return str(request.base_url).rstrip("/") + "/v3"


async def cluster_md(proxy: RestProxy, request: Request, *, recent_topic: bool = False):
    """The user and the cluster's metadata (404 for another cluster id). `recent_topic`:
    a metadata answer under a second old does when it holds the path's topic
    (produce requests in a row; a miss asks again, as for v2 produce)."""
    creds = await proxy.login(request)
    md = proxy.recent_metadata(creds, request.path_params["topic"]) if recent_topic else None
    if md is None:
        md = await proxy.metadata(creds)
    wanted = request.path_params.get("cluster_id")
    if wanted is not None and wanted != md.cluster_id:
        raise errors.cluster_not_found(wanted)
    return creds, md


async def _call(proxy: RestProxy, fn, *args):
    try:
        return await proxy.clients.run(fn, *args)
    except KafkaException as exc:
        raise kafka_error(exc) from None


def cluster_json(b: str, md) -> dict:
    c = f"/clusters/{md.cluster_id}"
    return _resource(b, c, "KafkaCluster", md.cluster_id, "", cluster_id=md.cluster_id,
                     controller={"related": f"{b}{c}/brokers/{md.controller_id}"},
                     acls={"related": f"{b}{c}/acls"}, brokers={"related": f"{b}{c}/brokers"},
                     broker_configs={"related": f"{b}{c}/broker-configs"},
                     consumer_groups={"related": f"{b}{c}/consumer-groups"},
                     topics={"related": f"{b}{c}/topics"},
                     partition_reassignments={"related": f"{b}{c}/topics/-/partitions/-/reassignment"})


async def get_clusters(proxy: RestProxy, request: Request) -> Response:
    _creds, md = await cluster_md(proxy, request)
    return _answer(_list(base(request), "/clusters", "KafkaClusterList", [cluster_json(base(request), md)]))


async def get_clusters_cluster_id(proxy: RestProxy, request: Request) -> Response:
    _creds, md = await cluster_md(proxy, request)
    return _answer(cluster_json(base(request), md))


def broker_json(b: str, md, broker) -> dict:
    c = f"/clusters/{md.cluster_id}/brokers/{broker.id}"
    return _resource(b, c, "KafkaBroker", md.cluster_id, f"/broker={broker.id}", cluster_id=md.cluster_id,
                     broker_id=broker.id, host=broker.host, port=broker.port, rack=None,
                     configs={"related": f"{b}{c}/configs"},
                     partition_replicas={"related": f"{b}{c}/partition-replicas"})


async def get_brokers(proxy: RestProxy, request: Request) -> Response:
    _creds, md = await cluster_md(proxy, request)
    b = base(request)
    return _answer(_list(b, f"/clusters/{md.cluster_id}/brokers", "KafkaBrokerList",
                         [broker_json(b, md, br) for _i, br in sorted(md.brokers.items())]))


async def get_brokers_broker_id(proxy: RestProxy, request: Request) -> Response:
    _creds, md = await cluster_md(proxy, request)
    found = md.brokers.get(request.path_params["broker_id"])
    if found is None:
        raise errors.not_found(f"Broker {request.path_params['broker_id']} cannot be found.")
    return _answer(broker_json(base(request), md, found))


# ---- topics --------------------------------------------------------------------
def topic_json(b: str, md, t) -> dict:
    c = f"/clusters/{md.cluster_id}/topics/{t.topic}"
    first = t.partitions.get(0)
    return _resource(b, c, "KafkaTopic", md.cluster_id, f"/topic={t.topic}", cluster_id=md.cluster_id,
                     topic_name=t.topic, is_internal=t.topic.startswith("__"),
                     replication_factor=len(first.replicas) if first else 0,
                     partitions_count=len(t.partitions),
                     partitions={"related": f"{b}{c}/partitions"}, configs={"related": f"{b}{c}/configs"},
                     partition_reassignments={"related": f"{b}{c}/partitions/-/reassignment"},
                     authorized_operations=[])


def _topic(md, request: Request):
    name = request.path_params["topic"]
    found = md.topics.get(name)
    if found is None or (found.error is not None and not found.partitions):
        raise errors.unknown_topic_or_partition()
    return found


async def get_topics(proxy: RestProxy, request: Request) -> Response:
    _creds, md = await cluster_md(proxy, request)
    b = base(request)
    return _answer(_list(b, f"/clusters/{md.cluster_id}/topics", "KafkaTopicList",
                         [topic_json(b, md, t) for _n, t in sorted(md.topics.items())]))


async def get_topics_topic(proxy: RestProxy, request: Request) -> Response:
    _creds, md = await cluster_md(proxy, request)
    return _answer(topic_json(base(request), md, _topic(md, request)))


async def post_topics(proxy: RestProxy, request: Request) -> Response:
    creds, md = await cluster_md(proxy, request)
    body = await _json(request)
    name = body.get("topic_name")
    if not isinstance(name, str) or not name:
        raise errors.unprocessable("topic_name is required")
    partitions = body.get("partitions_count", -1)
    replication = body.get("replication_factor", -1)
    # int32 / int16 as in CreateTopics (librdkafka's NewTopic overflows beyond); -1 is the
    # broker's default
    if not _int_between(partitions, -1, 2 ** 31 - 1) or not _int_between(replication, -1, 2 ** 15 - 1):
        raise errors.unprocessable("partitions_count (int32) and replication_factor (int16) must be integers "
                                   "from -1 (the broker's default)")
    configs = body.get("configs") or []
    if not isinstance(configs, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str)
                                                for c in configs):
        raise errors.unprocessable("configs must be a list of {name, value}")
    new = NewTopic(name, num_partitions=partitions, replication_factor=replication,
                   config={c["name"]: str(c.get("value")) for c in configs})
    admin = proxy.clients.admin(creds)
    try:
        await _call(proxy, lambda: admin.create_topics([new], request_timeout=15)[name].result(timeout=20))
    except ValueError as exc:  # librdkafka's own checks of a NewTopic (replication_factor -1..10000)
        raise errors.RestError(400, 40002, str(exc)) from None
    log.info("rest proxy: topic %s created", name)
    md = await proxy.metadata(creds)
    found = md.topics.get(name)
    if found is None:
        return _answer({"kind": "KafkaTopic", "cluster_id": md.cluster_id, "topic_name": name}, 201)
    return _answer(topic_json(base(request), md, found), 201)


async def delete_topics_topic(proxy: RestProxy, request: Request) -> Response:
    creds, md = await cluster_md(proxy, request)
    name = _topic(md, request).topic
    admin = proxy.clients.admin(creds)
    await _call(proxy, lambda: admin.delete_topics([name], request_timeout=15)[name].result(timeout=20))
    log.info("rest proxy: topic %s deleted", name)
    return no_content()


def partition_json(b: str, md, topic_name: str, p) -> dict:
    c = f"/clusters/{md.cluster_id}/topics/{topic_name}/partitions/{p.id}"
    return _resource(b, c, "KafkaPartition", md.cluster_id, f"/topic={topic_name}/partition={p.id}",
                     cluster_id=md.cluster_id, topic_name=topic_name, partition_id=p.id,
                     leader={"related": f"{b}{c}/replicas/{p.leader}"}, replicas={"related": f"{b}{c}/replicas"},
                     reassignment={"related": f"{b}{c}/reassignment"})


async def get_topics_topic_partitions(proxy: RestProxy, request: Request) -> Response:
    _creds, md = await cluster_md(proxy, request)
    t = _topic(md, request)
    b = base(request)
    return _answer(_list(b, f"/clusters/{md.cluster_id}/topics/{t.topic}/partitions", "KafkaPartitionList",
                         [partition_json(b, md, t.topic, p) for _i, p in sorted(t.partitions.items())]))


async def get_topics_topic_partitions_partition_id(proxy: RestProxy, request: Request) -> Response:
    _creds, md = await cluster_md(proxy, request)
    t = _topic(md, request)
    p = t.partitions.get(request.path_params["partition_id"])
    if p is None:
        raise errors.unknown_topic_or_partition()
    return _answer(partition_json(base(request), md, t.topic, p))


def replica_json(b: str, md, topic_name: str, p, broker_id: int) -> dict:
    c = f"/clusters/{md.cluster_id}/topics/{topic_name}/partitions/{p.id}/replicas/{broker_id}"
    return _resource(b, c, "KafkaReplica", md.cluster_id,
                     f"/topic={topic_name}/partition={p.id}/replica={broker_id}", cluster_id=md.cluster_id,
                     topic_name=topic_name, partition_id=p.id, broker_id=broker_id,
                     is_leader=broker_id == p.leader, is_in_sync=broker_id in p.isrs,
                     broker={"related": f"{b}/clusters/{md.cluster_id}/brokers/{broker_id}"})


def _partition_of(md, request: Request):
    t = _topic(md, request)
    p = t.partitions.get(request.path_params["partition_id"])
    if p is None:
        raise errors.unknown_topic_or_partition()
    return t, p


async def get_topics_topic_partitions_partition_id_replicas(proxy: RestProxy, request: Request) -> Response:
    _creds, md = await cluster_md(proxy, request)
    t, p = _partition_of(md, request)
    b = base(request)
    return _answer(_list(b, f"/clusters/{md.cluster_id}/topics/{t.topic}/partitions/{p.id}/replicas",
                         "KafkaReplicaList", [replica_json(b, md, t.topic, p, r) for r in p.replicas]))


async def get_topics_topic_partitions_partition_id_replicas_broker_id(proxy: RestProxy, request: Request) -> Response:
    _creds, md = await cluster_md(proxy, request)
    t, p = _partition_of(md, request)
    broker_id = request.path_params["broker_id"]
    if broker_id not in p.replicas:
        raise errors.not_found(f"Replica {broker_id} of {t.topic}-{p.id} cannot be found.")
    return _answer(replica_json(base(request), md, t.topic, p, broker_id))


# ---- configs -------------------------------------------------------------------
def config_json(b: str, md, topic_name: str, entry) -> dict:
    c = f"/clusters/{md.cluster_id}/topics/{topic_name}/configs/{entry.name}"
    return _resource(b, c, "KafkaTopicConfig", md.cluster_id, f"/topic={topic_name}/config={entry.name}",
                     cluster_id=md.cluster_id, topic_name=topic_name, name=entry.name,
                     value=None if entry.is_sensitive else entry.value, is_default=entry.is_default,
                     is_read_only=entry.is_read_only, is_sensitive=entry.is_sensitive,
                     source=str(entry.source_name if hasattr(entry, "source_name") else entry.source),
                     synonyms=[{"name": s.name, "value": s.value,
                                "source": str(getattr(s, "source_name", s.source))}
                               for s in (entry.synonyms or {}).values()])


async def get_topics_topic_configs(proxy: RestProxy, request: Request) -> Response:
    creds, md = await cluster_md(proxy, request)
    t = _topic(md, request)
    entries = await proxy.topic_configs(creds, t.topic)
    b = base(request)
    return _answer(_list(b, f"/clusters/{md.cluster_id}/topics/{t.topic}/configs", "KafkaTopicConfigList",
                         [config_json(b, md, t.topic, e) for _n, e in sorted(entries.items())]))


async def get_topics_topic_configs_name(proxy: RestProxy, request: Request) -> Response:
    creds, md = await cluster_md(proxy, request)
    t = _topic(md, request)
    entries = await proxy.topic_configs(creds, t.topic)
    entry = entries.get(request.path_params["name"])
    if entry is None:
        raise errors.not_found(f"Config {request.path_params['name']} cannot be found.")
    return _answer(config_json(base(request), md, t.topic, entry))


async def _alter(proxy: RestProxy, creds, topic_name: str, changes: list[tuple[str, str | None]]) -> None:
    entries = [ConfigEntry(name, value or "", incremental_operation=AlterConfigOpType.SET if value is not None
                           else AlterConfigOpType.DELETE) for name, value in changes]
    resource = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=entries)
    admin = proxy.clients.admin(creds)
    try:
        await _call(proxy, lambda: admin.incremental_alter_configs([resource], request_timeout=15)[resource]
                    .result(timeout=20))
    except ValueError as exc:  # librdkafka's own checks of the entries (an empty config name)
        raise errors.RestError(400, 40002, str(exc)) from None
    log.info("rest proxy: topic %s configs altered: %s", topic_name, [c[0] for c in changes])


async def put_topics_topic_configs_name(proxy: RestProxy, request: Request) -> Response:
    creds, md = await cluster_md(proxy, request)
    t = _topic(md, request)
    body = await _json(request)
    if "value" not in body:
        raise errors.unprocessable("value is required")
    await _alter(proxy, creds, t.topic, [(request.path_params["name"], None if body["value"] is None
                                   else str(body["value"]))])
    return no_content()


async def delete_topics_topic_configs_name(proxy: RestProxy, request: Request) -> Response:
    creds, md = await cluster_md(proxy, request)
    t = _topic(md, request)
    await _alter(proxy, creds, t.topic, [(request.path_params["name"], None)])
    return no_content()


async def post_topics_topic_configs_alter(proxy: RestProxy, request: Request) -> Response:
    creds, md = await cluster_md(proxy, request)
    t = _topic(md, request)
    body = await _json(request)
    data = body.get("data")
    if not isinstance(data, list) or not all(isinstance(d, dict) and isinstance(d.get("name"), str) for d in data):
        raise errors.unprocessable("data must be a list of {name, value, operation}")
    changes = []
    for d in data:
        op = str(d.get("operation") or "SET").upper()
        if op not in ("SET", "DELETE"):
            raise errors.unprocessable(f"operation {op!r} is not SET or DELETE")
        changes.append((d["name"], None if op == "DELETE" else str(d.get("value"))))
    await _alter(proxy, creds, t.topic, changes)
    return no_content()


# ---- records -------------------------------------------------------------------
async def post_topics_topic_records(proxy: RestProxy, request: Request) -> Response:
    """One record per JSON object; several objects in one body (Confluent's streaming
    mode) are answered with one result per line, in order."""
    creds, md = await cluster_md(proxy, request, recent_topic=True)
    if content_type(request) not in ("application/json", ""):
        raise errors.unsupported_media_type()
    t = _topic(md, request)
    data = (await raw_body(request)).decode("utf-8", "replace")
    bodies = _json_stream(data)
    if not bodies:
        raise errors.unprocessable("the request body holds no record")
    named = [b.get("partition_id") for b in bodies if isinstance(b, dict)]
    if any(p is not None and (not isinstance(p, int) or p not in t.partitions) for p in named):
        creds, md = await cluster_md(proxy, request)  # a partition added meanwhile: ask again
        t = _topic(md, request)
    items, shapes = [], []
    for body in bodies:
        if not isinstance(body, dict):
            raise errors.unprocessable("each record must be a JSON object")
        p = body.get("partition_id")
        if p is not None and (not isinstance(p, int) or p not in t.partitions):
            raise errors.unknown_topic_or_partition()
        key, key_shape = await _data(proxy, body.get("key"), t.topic, "key")
        value, value_shape = await _data(proxy, body.get("value"), t.topic, "value")
        headers = []
        if not isinstance(body.get("headers") or [], list):
            raise errors.unprocessable("headers must be a list of {name, value (base64)}")
        for h in body.get("headers") or []:
            if not isinstance(h, dict) or not isinstance(h.get("name"), str):
                raise errors.unprocessable("headers must be a list of {name, value (base64)}")
            headers.append((h["name"], None if h.get("value") is None
                            else formats.to_bytes(formats.BINARY, h["value"], what="header")))
        timestamp = body.get("timestamp")
        ts_ms = None
        if timestamp is not None:
            try:
                ts_ms = int(datetime.fromisoformat(str(timestamp).replace("Z", "+00:00")).timestamp() * 1000)
            except ValueError:
                raise errors.unprocessable(f"timestamp {timestamp!r} is not an ISO 8601 date") from None
            if ts_ms < 0:  # as Kafka's ProducerRecord: a record before 1970 cannot be told from "none"
                raise errors.unprocessable(f"Invalid timestamp: {timestamp!r}. Timestamp should always be "
                                           "non-negative or null.")
        items.append((t.topic, p, key, value, headers, ts_ms))
        shapes.append((key_shape, value_shape))
    results = await proxy.clients.run(produce_sync, proxy.clients.producer(creds), items)
    answers = []
    for (partition_id, offset, ts, err), (key_shape, value_shape) in zip(results, shapes):
        if err is not None:
            e = kafka_error(err)
            answers.append({"error_code": e.status if e.status != 500 else 500, "message": err.str()})
            continue
        answers.append({"error_code": 200, "cluster_id": md.cluster_id, "topic_name": t.topic,
                        "partition_id": partition_id, "offset": offset,
                        "timestamp": _iso_time(ts) if ts else None,
                        "key": key_shape, "value": value_shape})
    if len(bodies) == 1:
        answer = answers[0]
        status = answer["error_code"]
        return _answer(answer, status)
    return Response("".join(json.dumps(a, separators=(",", ":")) + "\n" for a in answers),
                    media_type=V3)


async def _data(proxy: RestProxy, spec: Any, topic: str, part: str) -> tuple[bytes | None, dict | None]:
    if spec is None:
        return None, None
    if not isinstance(spec, dict):
        raise errors.unprocessable(f"{part} must be an object with type and data")
    kind = str(spec.get("type") or "").upper()
    data = spec.get("data")
    schema = None
    version = subject = None
    if not kind and any(k in spec for k in ("schema_id", "schema", "subject", "schema_version")):
        # no type: the registry's schema says which (a schema text without one is AVRO,
        # or its schema_type)
        kind = "SCHEMA" if "schema" not in spec else str(spec.get("schema_type") or "AVRO").upper()
    if kind == "BINARY":
        raw = formats.to_bytes(formats.BINARY, data, what=part)
    elif kind == "JSON":
        raw = formats.to_bytes(formats.JSON, data, what=part)
    elif kind == "STRING":
        if data is not None and not isinstance(data, str):
            raise errors.unprocessable(f"a STRING {part} must be a string")
        raw = None if data is None else data.encode()
    elif kind in ("AVRO", "JSONSCHEMA", "PROTOBUF", "SCHEMA"):
        fmt = SCHEMA_KINDS.get(kind)
        subject = spec.get("subject") or f"{topic}-{part}"
        if not isinstance(subject, str):
            raise errors.unprocessable(f"{part} subject must be a string")
        if "schema_id" in spec:
            schema = await proxy.schemas.by_id(spec["schema_id"])
            subject = spec.get("subject")
        elif "schema_version" in spec or ("subject" in spec and "schema" not in spec):
            schema, version = await proxy.schemas.by_version(subject, spec.get("schema_version", "latest"))
        elif "schema" in spec and fmt is not None:
            schema = await proxy.schemas.register(subject, fmt, spec["schema"])
        else:
            raise errors.key_schema_missing() if part == "key" else errors.value_schema_missing()
        found = {"AVRO": "AVRO", "JSON": "JSONSCHEMA", "PROTOBUF": "PROTOBUF"}.get(schema.type)
        if fmt is not None and found != kind:
            raise errors.invalid_schema(f"the {part} schema {schema.id} is {schema.type}, not {kind}")
        kind = found
        raw = None if data is None else schema.encode(data)
    else:
        raise errors.unprocessable(f"{part} type {kind!r} is not BINARY, JSON, STRING, AVRO, JSONSCHEMA "
                                   "or PROTOBUF")
    shape = {"type": kind, "size": 0 if raw is None else len(raw)}
    if schema is not None:
        shape.update({"subject": subject, "schema_id": schema.id, "schema_version": version})
    return raw, shape


# ---- consumer groups -----------------------------------------------------------
def group_json(b: str, md, g) -> dict:
    c = f"/clusters/{md.cluster_id}/consumer-groups/{g.group_id}"
    state = getattr(g.state, "name", str(g.state))
    return _resource(b, c, "KafkaConsumerGroup", md.cluster_id, f"/consumer-group={g.group_id}",
                     cluster_id=md.cluster_id, consumer_group_id=g.group_id, is_simple=g.is_simple_consumer_group,
                     partition_assignor=g.partition_assignor, state=state,
                     coordinator={"related": f"{b}/clusters/{md.cluster_id}/brokers/{g.coordinator.id}"},
                     consumers={"related": f"{b}{c}/consumers"}, lag_summary={"related": f"{b}{c}/lag-summary"})


async def _describe_groups(proxy: RestProxy, creds, ids: list[str]) -> list:
    if not ids:
        return []
    admin = proxy.clients.admin(creds)
    futures = await _call(proxy, lambda: admin.describe_consumer_groups(ids, request_timeout=15))
    out = []
    for gid in ids:
        out.append(await _call(proxy, lambda f=futures[gid]: f.result(timeout=20)))
    return out


async def get_consumer_groups(proxy: RestProxy, request: Request) -> Response:
    creds, md = await cluster_md(proxy, request)
    admin = proxy.clients.admin(creds)
    listed = await _call(proxy, lambda: admin.list_consumer_groups(request_timeout=15).result(timeout=20))
    ids = sorted(g.group_id for g in listed.valid)
    described = await _describe_groups(proxy, creds, ids)
    b = base(request)
    return _answer(_list(b, f"/clusters/{md.cluster_id}/consumer-groups", "KafkaConsumerGroupList",
                         [group_json(b, md, g) for g in described]))


async def _group(proxy: RestProxy, request: Request):
    creds, md = await cluster_md(proxy, request)
    gid = request.path_params["group"]
    (g,) = await _describe_groups(proxy, creds, [gid])
    if getattr(g.state, "name", "") == "DEAD" or (not g.members and getattr(g.state, "name", "") == "UNKNOWN"):
        raise errors.not_found(f"Consumer group {gid} cannot be found.")
    return creds, md, g


async def get_consumer_groups_group(proxy: RestProxy, request: Request) -> Response:
    _creds, md, g = await _group(proxy, request)
    return _answer(group_json(base(request), md, g))


def consumer_json(b: str, md, gid: str, m) -> dict:
    c = f"/clusters/{md.cluster_id}/consumer-groups/{gid}/consumers/{m.member_id}"
    return _resource(b, c, "KafkaConsumer", md.cluster_id, f"/consumer-group={gid}/consumer={m.member_id}",
                     cluster_id=md.cluster_id, consumer_group_id=gid, consumer_id=m.member_id,
                     instance_id=m.group_instance_id, client_id=m.client_id,
                     assignments={"related": f"{b}{c}/assignments"})


async def get_consumer_groups_group_consumers_consumer(proxy: RestProxy, request: Request) -> Response:
    _creds, md, g = await _group(proxy, request)
    for m in g.members:
        if m.member_id == request.path_params["consumer"]:
            return _answer(consumer_json(base(request), md, g.group_id, m))
    raise errors.not_found(f"Consumer {request.path_params['consumer']} cannot be found.")


async def get_consumer_groups_group_consumers(proxy: RestProxy, request: Request) -> Response:
    _creds, md, g = await _group(proxy, request)
    b = base(request)
    return _answer(_list(b, f"/clusters/{md.cluster_id}/consumer-groups/{g.group_id}/consumers",
                         "KafkaConsumerList", [consumer_json(b, md, g.group_id, m) for m in g.members]))


async def _lags(proxy: RestProxy, creds, md, g) -> list[dict]:
    admin = proxy.clients.admin(creds)
    from confluent_kafka import ConsumerGroupTopicPartitions

    request_ = [ConsumerGroupTopicPartitions(g.group_id)]
    fut = await _call(proxy, lambda: admin.list_consumer_group_offsets(request_, request_timeout=15))
    committed = await _call(proxy, lambda: fut[g.group_id].result(timeout=20))
    tps = [tp for tp in committed.topic_partitions if tp.offset >= 0]
    if not tps:
        return []
    ends = await _call(proxy, lambda: {tp: f.result(timeout=20) for tp, f in admin.list_offsets(
        {TopicPartition(tp.topic, tp.partition): OffsetSpec.latest() for tp in tps}, request_timeout=15).items()})
    end_of = {(tp.topic, tp.partition): r.offset for tp, r in ends.items()}
    owner = {}
    for m in g.members:
        for tp in (m.assignment.topic_partitions if m.assignment else []):
            owner[(tp.topic, tp.partition)] = m
    out = []
    for tp in sorted(tps, key=lambda x: (x.topic, x.partition)):
        end = end_of.get((tp.topic, tp.partition), tp.offset)
        m = owner.get((tp.topic, tp.partition))
        out.append({"topic_name": tp.topic, "partition_id": tp.partition, "current_offset": tp.offset,
                    "log_end_offset": end, "lag": max(0, end - tp.offset),
                    "consumer_id": m.member_id if m else "", "instance_id": m.group_instance_id if m else None,
                    "client_id": m.client_id if m else ""})
    return out


def lag_json(b: str, md, g, lag: dict) -> dict:
    c = f"/clusters/{md.cluster_id}/consumer-groups/{g.group_id}/lags"
    return _resource(b, f"{c}/{lag['topic_name']}/partitions/{lag['partition_id']}", "KafkaConsumerLag",
                     md.cluster_id, f"/consumer-group={g.group_id}/lag={lag['topic_name']}/partition="
                     f"{lag['partition_id']}", cluster_id=md.cluster_id, consumer_group_id=g.group_id, **lag)


async def get_consumer_groups_group_lags(proxy: RestProxy, request: Request) -> Response:
    creds, md, g = await _group(proxy, request)
    b = base(request)
    data = [lag_json(b, md, g, lag) for lag in await _lags(proxy, creds, md, g)]
    return _answer(_list(b, f"/clusters/{md.cluster_id}/consumer-groups/{g.group_id}/lags",
                         "KafkaConsumerLagList", data))


async def get_consumer_groups_group_lags_topic_partitions_partition_id(proxy: RestProxy, request: Request) -> Response:
    creds, md, g = await _group(proxy, request)
    wanted = (request.path_params["topic"], request.path_params["partition_id"])
    for found in await _lags(proxy, creds, md, g):
        if (found["topic_name"], found["partition_id"]) == wanted:
            return _answer(lag_json(base(request), md, g, found))
    raise errors.not_found(f"Consumer lag of {wanted[0]}-{wanted[1]} in group {g.group_id} cannot be found.")


async def get_consumer_groups_group_lag_summary(proxy: RestProxy, request: Request) -> Response:
    creds, md, g = await _group(proxy, request)
    b = base(request)
    all_lags = await _lags(proxy, creds, md, g)
    top = max(all_lags, key=lambda x: x["lag"], default=None)
    c = f"/clusters/{md.cluster_id}/consumer-groups/{g.group_id}/lag-summary"
    fields = {"cluster_id": md.cluster_id, "consumer_group_id": g.group_id,
              "max_lag_consumer_id": top["consumer_id"] if top else "",
              "max_lag_instance_id": top["instance_id"] if top else None,
              "max_lag_client_id": top["client_id"] if top else "",
              "max_lag_topic_name": top["topic_name"] if top else "",
              "max_lag_partition_id": top["partition_id"] if top else 0,
              "max_lag": top["lag"] if top else 0, "total_lag": sum(x["lag"] for x in all_lags)}
    if top:
        fields["max_lag_partition"] = {"related": f"{b}/clusters/{md.cluster_id}/topics/{top['topic_name']}"
                                                  f"/partitions/{top['partition_id']}"}
    return _answer(_resource(b, c, "KafkaConsumerGroupLagSummary", md.cluster_id,
                             f"/consumer-group={g.group_id}/lag-summary", **fields))


async def _json(request: Request) -> dict:
    if content_type(request) not in ("application/json", ""):
        raise errors.unsupported_media_type()
    data = (await raw_body(request)).strip()
    try:
        body = json.loads(data) if data else {}
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
        raise errors.bad_request(f"Unexpected character in the JSON request body: {exc}") from None
    if not isinstance(body, dict):
        raise errors.unprocessable("the request body must be a JSON object")
    return body


# ---- the table -------------------------------------------------------------------------
# (method, path, function), in matching order: one starlette route each (server.build_app).
CLUSTER = "/v3/clusters/{cluster_id}"
TOPIC = CLUSTER + "/topics/{topic}"
GROUP = CLUSTER + "/consumer-groups/{group}"
ROUTES: list[tuple[str, str, Endpoint]] = [
    ("GET", "/v3/clusters", get_clusters),
    ("GET", CLUSTER, get_clusters_cluster_id),
    ("GET", CLUSTER + "/brokers", get_brokers),
    ("GET", CLUSTER + "/brokers/{broker_id:int}", get_brokers_broker_id),
    ("GET", CLUSTER + "/topics", get_topics),
    ("POST", CLUSTER + "/topics", post_topics),
    ("GET", TOPIC, get_topics_topic),
    ("DELETE", TOPIC, delete_topics_topic),
    ("GET", TOPIC + "/partitions", get_topics_topic_partitions),
    ("GET", TOPIC + "/partitions/{partition_id:int}", get_topics_topic_partitions_partition_id),
    ("GET", TOPIC + "/partitions/{partition_id:int}/replicas", get_topics_topic_partitions_partition_id_replicas),
    ("GET", TOPIC + "/partitions/{partition_id:int}/replicas/{broker_id:int}",
     get_topics_topic_partitions_partition_id_replicas_broker_id),
    ("GET", TOPIC + "/configs", get_topics_topic_configs),
    ("POST", TOPIC + "/configs:alter", post_topics_topic_configs_alter),
    ("GET", TOPIC + "/configs/{name}", get_topics_topic_configs_name),
    ("PUT", TOPIC + "/configs/{name}", put_topics_topic_configs_name),
    ("DELETE", TOPIC + "/configs/{name}", delete_topics_topic_configs_name),
    ("POST", TOPIC + "/records", post_topics_topic_records),
    ("GET", CLUSTER + "/consumer-groups", get_consumer_groups),
    ("GET", GROUP, get_consumer_groups_group),
    ("GET", GROUP + "/consumers", get_consumer_groups_group_consumers),
    ("GET", GROUP + "/consumers/{consumer}", get_consumer_groups_group_consumers_consumer),
    ("GET", GROUP + "/lags", get_consumer_groups_group_lags),
    ("GET", GROUP + "/lags/{topic}/partitions/{partition_id:int}",
     get_consumer_groups_group_lags_topic_partitions_partition_id),
    ("GET", GROUP + "/lag-summary", get_consumer_groups_group_lag_summary),
]


def _int_between(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


@functools.lru_cache(maxsize=1024)
def _iso_time(ms: int) -> str:
    """A record timestamp as v3 answers it (records of one request mostly share a few)."""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _json_stream(text: str) -> list:
    """Every JSON value in `text`, one after another (whitespace between); 400 for garbage."""
    decoder = json.JSONDecoder()
    out, i = [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        try:
            value, i = decoder.raw_decode(text, i)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
            raise errors.bad_request(f"Unexpected character in the JSON request body: {exc}") from None
        out.append(value)
