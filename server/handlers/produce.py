"""Produce (0): validate record batches and append them, as opaque bytes.

Implements v0-11 (v0-2 carry legacy magic 0/1 message sets, which are converted to
magic 2 before they are stored; v3+ carry magic 2 batches). Per partition:
- unknown topic/partition → UNKNOWN_TOPIC_OR_PARTITION; internal topic →
  INVALID_TOPIC_EXCEPTION (clients may not write __consumer_offsets);
- batches are checked by header and CRC32C only (CORRUPT_MESSAGE), never decoded per
  record — except on compacted topics, where every record needs a key (INVALID_RECORD);
- a batch over the topic's max.message.bytes → MESSAGE_TOO_LARGE;
- idempotent batches pass the sequence checks of `server.producers`; a retried batch gets
  its original offsets back and is not written twice;
- transactional batches → INVALID_TXN_STATE (transactions are not implemented).
acks 0, 1 and -1 behave alike on one broker except that acks=0 gets no response — and,
as Kafka does, an error under acks=0 closes the connection, the producer's only signal.
"""

from __future__ import annotations

import logging

from wire.errors import CorruptRecords, ErrorCode, ProtocolError
from wire.records import iter_headers
from wire.registry import ApiKey

from server.broker import INTERNAL_TOPICS
from server.context import RequestContext
from server.errors import KafkaError, error_code_for
from server.producers import DuplicateBatch

API_KEY = ApiKey.PRODUCE
MAY_BLOCK = False

log = logging.getLogger("trafka.produce")


class AcksZeroError(ProtocolError):
    """An acks=0 produce failed: closing the connection is how Kafka tells the producer."""


def _partition_response(index: int, code: ErrorCode, message: str | None = None, base_offset: int = -1,
                        log_append_time: int = -1, log_start_offset: int = -1) -> dict:
    return {
        "index": index,
        "error_code": code,
        "base_offset": base_offset,
        "log_append_time_ms": log_append_time,
        "log_start_offset": log_start_offset,
        "record_errors": [],
        "error_message": message,
    }


def _to_magic2(records: bytearray, version: int) -> bytearray:
    """Legacy (magic 0/1) message sets from old producers become magic-2 batches."""
    if len(records) > 16 and records[16] in (0, 1):
        from wire.legacy import legacy_to_batches

        return legacy_to_batches(bytes(records), base_offset=0)
    return records


def _check_keys(records: bytearray) -> None:
    from wire.records import iter_records

    for record in iter_records(records):
        if record.key is None:
            raise KafkaError("compacted topics need a key on every record", ErrorCode.INVALID_RECORD)


async def _produce_partition(ctx: RequestContext, topic: str, index: int, records) -> dict:
    broker = ctx.broker
    meta = broker.topics.get(topic)
    if meta is None or not 0 <= index < meta.partitions:
        return _partition_response(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if topic in INTERNAL_TOPICS:
        return _partition_response(index, ErrorCode.INVALID_TOPIC_EXCEPTION, "cannot write to an internal topic")
    if not records:
        return _partition_response(index, ErrorCode.INVALID_RECORD, "no record batch in the request")
    tp = (topic, index)
    try:
        if ctx.api_version <= 2 or records[16] != 2:
            records = _to_magic2(records, ctx.api_version)
        config = broker.logs.config(topic)
        headers = list(iter_headers(records))
        record_count = 0
        for _pos, header in headers:
            if header.size > config.max_message_bytes:
                raise KafkaError(f"batch of {header.size} bytes exceeds max.message.bytes={config.max_message_bytes}",
                                 ErrorCode.MESSAGE_TOO_LARGE)
            if header.compression > 4:
                raise KafkaError(f"compression codec {header.compression} is unknown",
                                 ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
            if header.is_transactional or header.is_control:
                raise KafkaError("transactional batches are not supported", ErrorCode.INVALID_TXN_STATE)
            record_count += header.record_count
        if "compact" in config.cleanup_policy:
            _check_keys(records)
        if len(headers) == 1 and headers[0][1].producer_id >= 0:
            header = headers[0][1]
            try:
                broker.producers.check(tp, header)
            except DuplicateBatch as dup:
                cached = dup.cached
                log.info("duplicate batch from producer %d seq %d on %s-%d: answered with offset %d",
                         header.producer_id, header.base_sequence, topic, index, cached.base_offset)
                plog = broker.logs.log(topic, index)
                return _partition_response(index, ErrorCode.NONE, None, cached.base_offset, cached.log_append_time,
                                           plog.log_start_offset)
        else:
            for _pos, header in headers:
                broker.producers.check(tp, header)
        outcome = await broker.append(tp, records, record_count)
        offset = outcome.base_offset
        for pos, header in headers:
            if header.producer_id >= 0:
                broker.producers.record(tp, header, offset, outcome.log_append_time)
            offset += header.last_offset_delta + 1
        return _partition_response(index, ErrorCode.NONE, None, outcome.base_offset, outcome.log_append_time,
                                   outcome.log_start_offset)
    except CorruptRecords as exc:
        log.warning("produce to %s-%d from %s rejected: %s", topic, index, ctx.client_id, exc)
        return _partition_response(index, ErrorCode.CORRUPT_MESSAGE, str(exc))
    except Exception as exc:  # mapped in one place; unknown errors are logged with a trace
        code = error_code_for(exc)
        if code == ErrorCode.UNKNOWN_SERVER_ERROR:
            log.exception("produce to %s-%d failed", topic, index)
        else:
            log.warning("produce to %s-%d from %s: %s (%s)", topic, index, ctx.client_id, code.name, exc)
        return _partition_response(index, code, str(exc))


async def handle(ctx: RequestContext, request: dict) -> dict | None:
    acks = request["acks"]
    if request.get("transactional_id") is not None:
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        responses = [
            {"name": t["name"], "partition_responses": [_partition_response(p["index"], code, "transactions are not supported")
                                                        for p in t["partition_data"]]}
            for t in request["topic_data"]
        ]
    elif acks not in (-1, 0, 1):
        responses = [
            {"name": t["name"], "partition_responses": [_partition_response(p["index"], ErrorCode.INVALID_REQUIRED_ACKS)
                                                        for p in t["partition_data"]]}
            for t in request["topic_data"]
        ]
    else:
        responses = []
        for topic_data in request["topic_data"]:
            name = topic_data["name"]
            partitions = [await _produce_partition(ctx, name, p["index"], p["records"])
                          for p in topic_data["partition_data"]]
            responses.append({"name": name, "partition_responses": partitions})
    if acks == 0:
        failed = [p for t in responses for p in t["partition_responses"] if p["error_code"] != ErrorCode.NONE]
        if failed:
            raise AcksZeroError(f"acks=0 produce failed with {ErrorCode(failed[0]['error_code']).name}; closing",
                                api_key=API_KEY, api_version=ctx.api_version, correlation_id=ctx.correlation_id)
        return None
    return {"responses": responses, "throttle_time_ms": 0}
