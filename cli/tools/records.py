"""`trafka topic produce` and `trafka topic consume`: records in and out of a topic from a
shell, the way kafka-console-producer/consumer and kcat do it (kcat's format templates)."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import Any

from cli.tools.common import CliError, client_config, key_values, timeout

COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")
DEFAULT_TEMPLATE = "%v\\n"
TEMPLATE_HELP = ("output: 'text' (the value, one per line), 'json' (one object per record) or a kcat-style "
                 "template: %%t topic, %%p partition, %%o offset, %%k key, %%v value, %%T timestamp (ms), "
                 "%%h headers (k=v,k2=v2), %%%% a percent sign; \\n and \\t escapes (default %%v\\n); keys and values are "
                 "written as stored bytes, in 'json' as UTF-8 text (undecodable bytes replaced)")


def register(verbs: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    produce = verbs.add_parser("produce", parents=[parent], help="produce stdin's lines as records")
    produce.add_argument("name", metavar="NAME")
    produce.add_argument("-k", "--key-delimiter", metavar="DELIM",
                         help="split each line at the first DELIM into key and value")
    produce.add_argument("-H", "--header", action="append", default=[], metavar="KEY=VALUE",
                         help="a header on every record (repeatable)")
    produce.add_argument("-p", "--partition", type=int, help="partition (default: the key's hash, or sticky)")
    produce.add_argument("-z", "--compression", choices=COMPRESSION, default="none", help="compression codec")
    produce.add_argument("--acks", choices=("0", "1", "all", "-1"), default="all", help="acks (default all)")
    produce.add_argument("--format", choices=("text", "json"), default="text", help="summary format (default text)")
    produce.set_defaults(handler=produce_records)

    consume = verbs.add_parser("consume", parents=[parent],
                               help="print records; stops at the end of the partitions unless --follow")
    consume.add_argument("name", metavar="NAME")
    consume.add_argument("-g", "--group", help="consume as this consumer group (commits offsets)")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="same as -o start")
    start.add_argument("-o", "--offset", default=None,
                       help="start at: start, end, N (an offset; one past the end starts at the end, one before "
                            "the log start at the log start) or -N (N before the end); with a group, start/end "
                            "apply only where the group has no committed offset (default: end with --follow, "
                            "else start; a group's committed offsets first)")
    consume.add_argument("-p", "--partition", type=int, action="append", help="only this partition (repeatable)")
    consume.add_argument("-n", "--num", type=int, help="exit after N records")
    consume.add_argument("--follow", action="store_true", help="keep waiting for new records (Ctrl-C stops)")
    consume.add_argument("-f", "--format", default=DEFAULT_TEMPLATE, metavar="TEMPLATE", help=TEMPLATE_HELP)
    consume.set_defaults(handler=consume_records)


# ------------------------------------------------------------------ produce

def produce_records(args: argparse.Namespace) -> int:
    from confluent_kafka import Producer

    headers = list(key_values(args.header, "-H/--header").items())
    conf = client_config(args, **{"compression.type": args.compression, "acks": args.acks,
                                  "message.timeout.ms": int(timeout() * 1000), "linger.ms": 5})
    producer = Producer(conf)
    delivered: list[tuple[int, int]] = []
    errors: list[Any] = []

    def report(err, msg) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset()))

    stdin = sys.stdin.buffer
    delimiter = args.key_delimiter.encode() if args.key_delimiter else None
    for raw in stdin:
        line = raw[:-1] if raw.endswith(b"\n") else raw
        key = None
        if delimiter is not None:
            key, sep, value = line.partition(delimiter)
            if not sep:
                key, value = None, line
        else:
            value = line
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": report}
        if headers:
            kwargs["headers"] = headers
        if args.partition is not None:
            kwargs["partition"] = args.partition
        while True:
            try:
                producer.produce(args.name, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
        if errors:
            break
    remaining = producer.flush(timeout())
    if errors:
        from confluent_kafka import KafkaException

        raise KafkaException(errors[0])
    if remaining:
        raise CliError(f"{remaining} records not delivered within {timeout():g} s")
    summary = {"topic": args.name, "records": len(delivered),
               "offsets": [{"partition": p, "offset": o} for p, o in delivered]}
    if args.format == "json":
        print(json.dumps(summary))
    else:
        print(f"produced {len(delivered)} records to {args.name}", file=sys.stderr)
    return 0


# ------------------------------------------------------------------ consume

def render(template: str, msg) -> bytes:
    """One record through a kcat-style template (see TEMPLATE_HELP), as bytes: keys, values and
    header values are written as they are stored, as kcat does, so a binary payload piped to a
    file is the payload (decoding it as UTF-8 would replace what is not text)."""
    out: list[bytes] = []
    i = 0
    while i < len(template):
        c = template[i]
        nxt = template[i + 1] if i + 1 < len(template) else ""
        if c == "\\" and nxt in ("n", "t", "\\"):
            out.append({"n": b"\n", "t": b"\t", "\\": b"\\"}[nxt])
            i += 2
            continue
        if c == "%" and nxt:
            i += 2
            if nxt == "t":
                out.append(msg.topic().encode())
            elif nxt == "p":
                out.append(str(msg.partition()).encode())
            elif nxt == "o":
                out.append(str(msg.offset()).encode())
            elif nxt == "k":
                out.append(_raw(msg.key()))
            elif nxt == "v":
                out.append(_raw(msg.value()))
            elif nxt == "T":
                out.append(str(msg.timestamp()[1]).encode())
            elif nxt == "h":
                out.append(b",".join(k.encode() + b"=" + _raw(v) for k, v in (msg.headers() or [])))
            elif nxt == "%":
                out.append(b"%")
            else:
                raise CliError(f"unknown template field %{nxt} (known: %t %p %o %k %v %T %h %%)", 2)
            continue
        out.append(c.encode())
        i += 1
    return b"".join(out)


def as_json(msg) -> str:
    return json.dumps({"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(),
                       "timestamp": msg.timestamp()[1], "key": _nullable(msg.key()), "value": _nullable(msg.value()),
                       "headers": [[k, _nullable(v)] for k, v in (msg.headers() or [])]})


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data


def _raw(data: bytes | str | None) -> bytes:
    if data is None:
        return b""
    return data if isinstance(data, bytes) else data.encode()


def _nullable(data: bytes | None) -> str | None:
    return None if data is None else _text(data)


def start_offset(value: str | None, follow: bool, low: int, high: int) -> int:
    """Where one partition starts for -o (without a group): an absolute offset within the
    partition's [log start, end]. An offset N out of that range starts at the nearer end,
    as rpk does (franz-go: "the client chooses the nearest of either the log start offset or
    the high watermark"); past the end is the end, as for Kafka's console consumer (its
    --offset out of range resets to latest): never the start unasked."""
    if value is None:
        value = "end" if follow else "start"
    if value in ("start", "beginning", "earliest"):
        return low
    if value in ("end", "latest"):
        return high
    try:
        number = int(value)
    except ValueError:
        raise CliError(f"-o/--offset: expected start, end, N or -N, got {value!r}", 2) from None
    return max(low, high + number) if number < 0 else min(max(number, low), high)


def consume_records(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    template = args.format
    if template == "text":
        template = DEFAULT_TEMPLATE
    if template != "json":
        render(template, _Probe())  # a bad template is a bad argument, before connecting
    offset = "start" if args.from_beginning else args.offset
    if offset is not None:
        start_offset(offset, args.follow, 0, 0)  # validates
    reset = "earliest"
    if offset in ("end", "latest") or (offset is None and args.follow):
        reset = "latest"
    conf = client_config(args, **{"group.id": args.group or f"trafka-cli-{uuid.uuid4().hex[:12]}",
                                  "enable.auto.commit": bool(args.group), "auto.offset.reset": reset,
                                  "enable.partition.eof": True})
    consumer = Consumer(conf)
    _stop_on_sigterm()
    assigned: set[tuple[str, int]] = set()
    at_end: set[tuple[str, int]] = set()
    explicit = offset is not None and offset not in ("start", "end", "beginning", "earliest", "latest")
    try:
        metadata = consumer.list_topics(args.name, timeout=timeout())
        topic = metadata.topics.get(args.name)
        if topic is None or topic.error is not None:
            raise KafkaException(topic.error if topic is not None else KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
        partitions = sorted(topic.partitions)
        if args.partition:
            missing = sorted(set(args.partition) - set(partitions))
            if missing:
                raise CliError(f"{args.name} has no partition {missing[0]} (partitions 0-{len(partitions) - 1})", 2)
            partitions = sorted(set(args.partition))

        def place(parts: list) -> list:
            for tp in parts:
                low, high = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=timeout())
                tp.offset = start_offset(offset, args.follow, low, high)
                if explicit and offset.isdigit() and int(offset) != tp.offset:
                    where = "past the end" if int(offset) > high else "before the log start"
                    print(f"{args.prog}: {tp.topic} partition {tp.partition}: offset {offset} is {where} "
                          f"(offsets {low}..{high}): starting at {tp.offset}", file=sys.stderr)
            return parts

        if args.group and not args.partition:
            def on_assign(c, parts) -> None:
                assigned.update((tp.topic, tp.partition) for tp in parts)
                if explicit:
                    c.assign(place(parts))

            def on_revoke(c, parts) -> None:
                for tp in parts:
                    assigned.discard((tp.topic, tp.partition))
                    at_end.discard((tp.topic, tp.partition))

            consumer.subscribe([args.name], on_assign=on_assign, on_revoke=on_revoke)
        else:
            parts = [TopicPartition(args.name, p) for p in partitions]
            if args.group:
                committed = {tp.partition: tp.offset for tp in consumer.committed(parts, timeout=timeout())}
            else:
                committed = {}
            for tp in parts:
                if not explicit and committed.get(tp.partition, -1) >= 0:
                    tp.offset = committed[tp.partition]
                else:
                    place([tp])
            consumer.assign(parts)
            assigned.update((args.name, tp.partition) for tp in parts)
        count = 0
        while args.num is None or count < args.num:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add((msg.topic(), msg.partition()))
                    if not args.follow and args.num is None and assigned and at_end >= assigned:
                        break
                    continue
                if err.fatal() or not err.retriable():
                    raise KafkaException(err)
                continue
            at_end.discard((msg.topic(), msg.partition()))
            sys.stdout.buffer.write((as_json(msg) + "\n").encode() if template == "json" else render(template, msg))
            count += 1
        sys.stdout.buffer.flush()
        if args.group:
            try:
                consumer.commit(asynchronous=False)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError._NO_OFFSET:
                    raise
    finally:
        consumer.close()
    return 0


def _stop_on_sigterm() -> None:
    """SIGTERM ends a --follow like Ctrl-C does: the consumer leaves its group and commits."""
    import signal

    def stop(signum, frame) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


class _Probe:
    """A stand-in record for checking a template before connecting."""

    def topic(self) -> str:
        return ""

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return 0

    def key(self) -> None:
        return None

    def value(self) -> None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return (0, 0)

    def headers(self) -> None:
        return None

