"""Produce (0): validate record batches and append them, as opaque bytes.

Implements v0-11 (v0-2 carry legacy magic 0/1 message sets, which are converted to
magic 2 before they are stored; v3+ carry magic 2 batches). Per partition:
- the partition is looked up with `Broker.partition` (UNKNOWN_TOPIC_OR_PARTITION,
  NOT_LEADER_OR_FOLLOWER); internal topic → INVALID_TOPIC_EXCEPTION (clients may not
  write __consumer_offsets);
- batches are checked by header and CRC32C (CORRUPT_MESSAGE); records are decoded only
  where a topic rule needs them (server/validation.py: keys on compacted topics, KIP-937
  timestamp bounds; server/schema_validation.py: schema ids under
  confluent.value/key.schema.validation), and a rejection names each offending record
  (KIP-467 record_errors with INVALID_RECORD or INVALID_TIMESTAMP);
- a batch over the topic's max.message.bytes → MESSAGE_TOO_LARGE;
- idempotent batches pass the sequence checks inside the partition's append, under its
  lock; a retried batch gets its original offsets back and is not written twice;
- transactional batches (KIP-98): before a producer's first transactional batch on a
  partition, the transaction coordinator confirms the partition is in its transaction
  (KIP-890 part 1; in a cluster the coordinator may be another broker, asked with
  AddPartitionsToTxn verify_only; else INVALID_TXN_STATE, and CONCURRENT_TRANSACTIONS or
  an unreachable coordinator is answered NOT_ENOUGH_REPLICAS, which every client retries,
  as Kafka does); control batches come
  only from the coordinator's markers, never from clients (INVALID_RECORD).
A partition named twice is appended once, with its last records, and a topic entry
without partitions is not answered: Kafka reads the request into a map.
acks 0, 1 and -1 behave alike on one broker except that acks=0 gets no response — and,
as Kafka does, an error under acks=0 closes the connection, the producer's only signal.
In a cluster, acks=-1 on a replicated partition is refused with NOT_ENOUGH_REPLICAS before
the append when the ISR is smaller than min.insync.replicas, and answered only once the
high watermark — the smallest log end offset in the ISR — has passed the batch (Kafka's
DelayedProduce; woken by follower fetches): NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR
shrank below min.insync.replicas meanwhile, NOT_LEADER_OR_FOLLOWER if the leadership moved,
REQUEST_TIMED_OUT after the request's timeout_ms. All partitions of a request wait together,
as a `DelayedResponse` (server/delayed.py): the connection reads and appends its next
requests meanwhile, and the answers still leave in request order.
A NOT_LEADER_OR_FOLLOWER in a cluster carries the current leader (v10+, KIP-951;
server/cluster/leader_hints.py).
"""

from __future__ import annotations

import logging

import trio

from wire.errors import CorruptRecords, ErrorCode, ProtocolError
from wire.records import HEADER_SIZE, iter_headers, parse_header, peek_magic
from wire.registry import ApiKey

from server.modes import PRODUCE_HINT_CODES, PRODUCE_MIN_VERSION
from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType
from server.delayed import DelayedResponse
from server.topics import INTERNAL_TOPICS
from server.errors import InvalidRecord, InvalidTopic, KafkaError, logged_error_code
from server.schema_validation import validate_schema_ids
from server.validation import validate_records

API_KEY = ApiKey.PRODUCE
MAY_BLOCK = False

log = logging.getLogger("trafka.produce")


class AcksZeroError(ProtocolError):
    """An acks=0 produce failed: closing the connection is how Kafka tells the producer."""


def _partition_response(index: int, code: ErrorCode, message: str | None = None, base_offset: int = -1,
                        log_append_time: int = -1, log_start_offset: int = -1,
                        record_errors: list[tuple[int, str]] | None = None) -> dict:
    return {
        "index": index,
        "error_code": code,
        "base_offset": base_offset,
        "log_append_time_ms": log_append_time,
        "log_start_offset": log_start_offset,
        "record_errors": [{"batch_index": i, "batch_index_error_message": m} for i, m in record_errors]
        if record_errors else [],
        "error_message": message,
    }


def _to_magic2(records: bytearray, version: int) -> bytearray:
    """Legacy (magic 0/1) message sets from old producers become magic-2 batches."""
    if len(records) > 16 and records[16] in (0, 1):
        from wire.legacy import legacy_to_batches

        return legacy_to_batches(bytes(records), base_offset=0)
    return records


# Kafka's ReplicaManager: verification errors that are retriable but that older clients do
# not retry correctly become NOT_ENOUGH_REPLICAS, which every client retries (and which
# does not trigger a metadata refresh).
_RETRIED_AS_NOT_ENOUGH_REPLICAS = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
})


async def _verify(ctx: RequestContext, partition, header, transactional_id: str | None) -> None:
    """KIP-890 part 1: ask the transaction coordinator, once per producer transaction and
    partition, whether the partition was added to the transaction (in a cluster the
    coordinator may be another broker: server/txn/verification.py)."""
    producers = partition.producers
    pid, epoch = header.producer_id, header.producer_epoch
    if pid in producers.ongoing or producers.verified.get(pid) == epoch:
        return
    tp = (partition.topic, partition.index)
    code = await ctx.broker.txn.verifier.verify(transactional_id, pid, epoch, tp)
    if code == ErrorCode.NONE:
        producers.verified[pid] = epoch
        return
    if code in _RETRIED_AS_NOT_ENOUGH_REPLICAS:
        code = ErrorCode.NOT_ENOUGH_REPLICAS
    elif code == ErrorCode.PRODUCER_FENCED:
        code = ErrorCode.INVALID_PRODUCER_EPOCH  # what a partition says to a fenced producer
    raise KafkaError(f"transactional batch of producer {pid} epoch {epoch} for {partition.name} not verified "
                     f"for transactional id {transactional_id!r}", code)


async def _produce_partition(ctx: RequestContext, topic: str, index: int, records,
                             transactional_id: str | None = None, waits: list | None = None) -> dict:
    broker = ctx.broker
    try:
        partition = broker.partition(topic, index)
        if topic in INTERNAL_TOPICS:
            raise InvalidTopic("cannot write to an internal topic")
        if not records:
            raise KafkaError("no record batch in the request", ErrorCode.INVALID_RECORD)
        if ctx.api_version <= 2 or records[16] != 2:
            records = _to_magic2(records, ctx.api_version)
        config = partition.config
        headers = list(iter_headers(records))
        record_count = 0
        for _pos, header in headers:
            if header.size > config.max_message_bytes:
                raise KafkaError(f"batch of {header.size} bytes exceeds max.message.bytes={config.max_message_bytes}",
                                 ErrorCode.MESSAGE_TOO_LARGE)
            if header.compression > 4:
                raise KafkaError(f"compression codec {header.compression} is unknown",
                                 ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
            if header.is_control:
                raise KafkaError("control batches are written by transaction markers, not by clients",
                                 ErrorCode.INVALID_RECORD)
            record_count += header.record_count
        header = headers[0][1] if headers else None
        if header is not None and header.is_transactional and partition.verification:
            await _verify(ctx, partition, header, transactional_id)
        validate_records(records, headers, config, partition.name)
        validate_schema_ids(broker.schema_registry, topic, records, headers, config)
        replicated = waits is not None and bool(partition.followers)
        if replicated and len(partition.isr) < partition.min_insync_replicas:
            raise KafkaError(f"{partition.name}: ISR {partition.isr} is smaller than min.insync.replicas="
                             f"{partition.min_insync_replicas}", ErrorCode.NOT_ENOUGH_REPLICAS)
        outcome = await partition.append_records(records, headers, record_count)
        if replicated:
            last = headers[-1][1]
            required = outcome.base_offset + (last.base_offset + last.last_offset_delta - headers[0][1].base_offset) + 1
            answer = _partition_response(index, ErrorCode.NONE, None, outcome.base_offset, outcome.log_append_time,
                                         outcome.log_start_offset)
            waits.append((answer, partition, required, partition.leader_term))
            return answer
        return _partition_response(index, ErrorCode.NONE, None, outcome.base_offset, outcome.log_append_time,
                                   outcome.log_start_offset)
    except CorruptRecords as exc:
        log.warning("produce to %s-%d from %s rejected: %s", topic, index, ctx.client_id, exc)
        return _partition_response(index, ErrorCode.CORRUPT_MESSAGE, str(exc))
    except InvalidRecord as exc:
        log.warning("produce to %s-%d from %s: %s: %s", topic, index, ctx.client_id, exc.code.name, exc)
        return _partition_response(index, exc.code, str(exc), record_errors=exc.record_errors)
    except Exception as exc:  # mapped in one place; unknown errors are logged with a trace
        code = logged_error_code(exc, log, f"produce to {topic}-{index}", ctx.client_id, logging.WARNING)
        return _partition_response(index, code, str(exc))


async def _await_replication(ctx: RequestContext, waits: list, timeout_ms: int) -> None:
    """Kafka's DelayedProduce: each answer waits until its partition's high watermark passes
    the batch; the answers are edited in place."""
    deadline = trio.current_time() + max(timeout_ms, 0) / 1000
    broker = ctx.broker
    pending = list(waits)
    while pending:
        still = []
        for answer, partition, required, term in pending:
            if not partition.is_leader or partition.leader_term != term \
                    or broker.partitions.get((partition.topic, partition.index)) is not partition:
                answer.update(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER, base_offset=-1,
                              error_message=f"{partition.name}: leadership moved before the ISR had the batch")
            elif partition.high_watermark >= required:
                if len(partition.maximal_isr()) < partition.min_insync_replicas:
                    answer.update(error_code=ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                                  error_message=f"{partition.name}: ISR {partition.isr} below min.insync.replicas")
            else:
                still.append((answer, partition, required, term))
        pending = still
        remaining = deadline - trio.current_time()
        if not pending:
            return
        if remaining <= 0 or broker.shutting_down:
            for answer, partition, _required, _term in pending:
                log.info("produce to %s from %s: the ISR %s did not reach the batch within %d ms", partition.name,
                         ctx.client_id, partition.isr, timeout_ms)
                answer.update(error_code=ErrorCode.REQUEST_TIMED_OUT, error_message="replication timed out")
            return
        await broker.wait_for_data([p for _a, p, _r, _e in pending], remaining, purgatory="Produce")


def _has_transactional_records(request: dict) -> bool:
    """Kafka's RequestUtils.hasTransactionalRecords: does the first batch of any partition
    carry the transactional bit? Only then is WRITE on the transactional id checked — an
    idempotent producer may send a transactional_id with plain batches, and Kafka lets it."""
    for topic_data in request["topic_data"]:
        for p in topic_data["partition_data"]:
            records = p.get("records")
            if records and len(records) >= HEADER_SIZE and peek_magic(records) == 2:
                try:
                    if parse_header(records).is_transactional:
                        return True
                except CorruptRecords:
                    continue  # the append answers CORRUPT_MESSAGE
    return False


def _merged(topic_data: list[dict]) -> list[dict]:
    """The request's partitions as Kafka's KafkaApis reads them, into a map: a partition
    named twice (in one topic entry or two) is appended once, with its last records, and
    answered once; a topic entry without partitions is not answered."""
    merged: dict[str, dict[int, dict]] = {}
    for topic in topic_data:
        for partition in topic["partition_data"]:
            merged.setdefault(topic["name"], {})[partition["index"]] = partition
    return [{"name": name, "partition_data": list(partitions.values())} for name, partitions in merged.items()]


async def handle(ctx: RequestContext, request: dict) -> dict | None:
    request = {**request, "topic_data": _merged(request["topic_data"])}
    acks = request["acks"]
    transactional_id = request.get("transactional_id")
    if acks not in (-1, 0, 1):
        responses = [
            {"name": t["name"], "partition_responses": [_partition_response(p["index"], ErrorCode.INVALID_REQUIRED_ACKS)
                                                        for p in t["partition_data"]]}
            for t in request["topic_data"]
        ]
    elif _has_transactional_records(request) and (
            transactional_id is None
            or not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)):
        responses = [
            {"name": t["name"], "partition_responses": [
                _partition_response(p["index"], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                for p in t["partition_data"]]}
            for t in request["topic_data"]
        ]
    else:
        responses = []
        waits: list | None = [] if acks == -1 and ctx.broker.mode.acks_all_waits_for_replicas else None
        for topic_data in request["topic_data"]:
            name = topic_data["name"]
            if not ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, name):
                responses.append({"name": name, "partition_responses": [
                    _partition_response(p["index"], ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    for p in topic_data["partition_data"]]})
                continue
            partitions = [await _produce_partition(ctx, name, p["index"], p["records"], transactional_id, waits)
                          for p in topic_data["partition_data"]]
            responses.append({"name": name, "partition_responses": partitions})
        if waits:
            timeout_ms = request.get("timeout_ms", 30000)

            async def when_replicated() -> dict:
                await _await_replication(ctx, waits, timeout_ms)
                return _answer(ctx, responses)

            # The connection goes on with its next requests meanwhile (server/delayed.py).
            return DelayedResponse(when_replicated)
    if acks == 0:
        failed = [p for t in responses for p in t["partition_responses"] if p["error_code"] != ErrorCode.NONE]
        if failed:
            raise AcksZeroError(f"acks=0 produce failed with {ErrorCode(failed[0]['error_code']).name}; closing",
                                api_key=API_KEY, api_version=ctx.api_version, correlation_id=ctx.correlation_id)
        return None
    return _answer(ctx, responses)


def _answer(ctx: RequestContext, responses: list) -> dict:
    answer = {"responses": responses, "throttle_time_ms": 0}
    if ctx.api_version >= PRODUCE_MIN_VERSION:
        endpoints = ctx.broker.mode.leader_hints(responses, "partition_responses", PRODUCE_HINT_CODES,
                                                 lambda t: t["name"])
        if endpoints:
            answer["node_endpoints"] = endpoints
    return answer
