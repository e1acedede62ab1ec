"""`trafka topic ...`: create, list, describe, alter-config, add-partitions, delete, trim
(and produce / consume, in cli/tools/records.py) — the verbs of kafka-topics.sh,
kafka-configs.sh and kafka-delete-records.sh, shaped like rpk's."""

from __future__ import annotations

import argparse
from typing import Any

from cli.tools import records
from cli.tools.common import (CliError, add_output_format, admin_client, emit, key_values, report_futures, result,
                                 table, timeout)


def register(sub: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add `topic` and its verbs to the root parser."""
    topic = sub.add_parser("topic", help="create, inspect, change, produce to and consume from topics")
    verbs = topic.add_subparsers(dest="verb", required=True, metavar="VERB")

    create = verbs.add_parser("create", parents=[parent], help="create topics")
    create.add_argument("names", nargs="+", metavar="NAME")
    create.add_argument("-p", "--partitions", type=int, default=-1,
                        help="partition count (default: the broker's num.partitions)")
    create.add_argument("-r", "--replicas", type=int, default=-1,
                        help="replication factor (default: the broker's default.replication.factor)")
    create.add_argument("-c", "--config", action="append", default=[], metavar="KEY=VALUE",
                        help="topic setting, e.g. -c cleanup.policy=compact (repeatable)")
    add_output_format(create)
    create.set_defaults(handler=create_topics)

    lister = verbs.add_parser("list", parents=[parent], help="list topics")
    lister.add_argument("-i", "--internal", action="store_true", help="include internal topics (__consumer_offsets)")
    add_output_format(lister)
    lister.set_defaults(handler=list_topics)

    describe = verbs.add_parser("describe", parents=[parent],
                                help="partitions (leader, replicas, ISR, offsets) and non-default settings")
    describe.add_argument("name", metavar="NAME")
    add_output_format(describe)
    describe.set_defaults(handler=describe_topic)

    alter = verbs.add_parser("alter-config", parents=[parent], help="set or delete topic settings")
    alter.add_argument("name", metavar="NAME")
    alter.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="set a setting (repeatable)")
    alter.add_argument("--delete", action="append", default=[], metavar="KEY",
                       help="remove a setting: back to the broker's default (repeatable)")
    add_output_format(alter)
    alter.set_defaults(handler=alter_config)

    grow = verbs.add_parser("add-partitions", parents=[parent], help="raise a topic's partition count")
    grow.add_argument("name", metavar="NAME")
    grow.add_argument("--num", type=int, required=True, help="the new total partition count")
    add_output_format(grow)
    grow.set_defaults(handler=add_partitions)

    delete = verbs.add_parser("delete", parents=[parent], help="delete topics")
    delete.add_argument("names", nargs="+", metavar="NAME")
    add_output_format(delete)
    delete.set_defaults(handler=delete_topics)

    trim = verbs.add_parser("trim", parents=[parent],
                            help="delete records before an offset (moves the log start offset)")
    trim.add_argument("name", metavar="NAME")
    trim.add_argument("--offset", type=int, required=True,
                      help="records before this offset go; -1 means the high watermark (everything)")
    trim.add_argument("--partition", type=int, action="append",
                      help="partition to trim (repeatable; default: all partitions)")
    add_output_format(trim)
    trim.set_defaults(handler=trim_topic)

    records.register(verbs, parent)


# ------------------------------------------------------------------ verbs

def create_topics(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic

    configs = key_values(args.config, "-c/--config")
    admin = admin_client(args)
    new = [NewTopic(name, num_partitions=args.partitions, replication_factor=args.replicas, config=configs)
           for name in args.names]
    futures = admin.create_topics(new, request_timeout=timeout(), operation_timeout=timeout())
    return report_futures(args, futures, "created")


def list_topics(args: argparse.Namespace) -> int:
    metadata = admin_client(args).list_topics(timeout=timeout())
    rows = []
    for name, topic in sorted(metadata.topics.items()):
        if name.startswith("__") and not args.internal:
            continue
        if topic.error is not None:
            raise_for(topic.error)
        replicas = max((len(p.replicas) for p in topic.partitions.values()), default=0)
        rows.append({"name": name, "partitions": len(topic.partitions), "replicas": replicas})
    emit(args, rows, lambda rows: table(["NAME", "PARTITIONS", "REPLICAS"],
                                        [(r["name"], r["partitions"], r["replicas"]) for r in rows]))
    return 0


def describe_topic(args: argparse.Namespace) -> int:
    from confluent_kafka import TopicCollection, TopicPartition
    from confluent_kafka.admin import ConfigResource, ConfigSource, OffsetSpec, ResourceType

    admin = admin_client(args)
    description = result(admin.describe_topics(TopicCollection([args.name]))[args.name])
    partitions = sorted(description.partitions, key=lambda p: p.id)
    parts = [TopicPartition(args.name, p.id) for p in partitions]
    earliest = _offsets(admin, {tp: OffsetSpec.earliest() for tp in parts})
    latest = _offsets(admin, {tp: OffsetSpec.latest() for tp in parts})
    resource = ConfigResource(ResourceType.TOPIC, args.name)
    entries = result(admin.describe_configs([resource])[resource])
    configs = {name: entry.value for name, entry in sorted(entries.items())
               if getattr(entry.source, "value", entry.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    data: dict[str, Any] = {
        "name": args.name, "internal": description.is_internal,
        "partitions": [{"partition": p.id, "leader": p.leader.id if p.leader is not None else -1,
                        "replicas": [n.id for n in p.replicas], "isr": [n.id for n in p.isr],
                        "log_start_offset": earliest.get(p.id), "high_watermark": latest.get(p.id)}
                       for p in partitions],
        "configs": configs}
    emit(args, data, _describe_text)
    return 0


def _describe_text(data: dict[str, Any]) -> str:
    lines = [f"NAME        {data['name']}", f"PARTITIONS  {len(data['partitions'])}", ""]
    lines.append(table(["PARTITION", "LEADER", "REPLICAS", "ISR", "LOG-START-OFFSET", "HIGH-WATERMARK"],
                       [(p["partition"], p["leader"], _ids(p["replicas"]), _ids(p["isr"]),
                         p["log_start_offset"], p["high_watermark"]) for p in data["partitions"]]))
    lines.append("")
    if data["configs"]:
        lines.append(table(["CONFIG", "VALUE"], sorted(data["configs"].items())))
    else:
        lines.append("(no settings other than the defaults)")
    return "\n".join(lines)


def _ids(ids: list[int]) -> str:
    return "[" + ",".join(str(i) for i in ids) + "]"


def alter_config(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    sets = key_values(args.set, "--set")
    if not sets and not args.delete:
        raise CliError("nothing to change: give --set KEY=VALUE and/or --delete KEY", 2)
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sets.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in args.delete]
    resource = ConfigResource(ResourceType.TOPIC, args.name, incremental_configs=entries)
    admin = admin_client(args)
    result(admin.incremental_alter_configs([resource])[resource])
    emit(args, {"name": args.name, "set": sets, "deleted": args.delete},
         f"altered {args.name}: " + ", ".join([f"{k}={v}" for k, v in sets.items()]
                                             + [f"{k} deleted" for k in args.delete]))
    return 0


def add_partitions(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewPartitions

    admin = admin_client(args)  # kept referenced: a collected client cancels its futures
    futures = admin.create_partitions([NewPartitions(args.name, args.num)], request_timeout=timeout())
    return report_futures(args, futures, f"now has {args.num} partitions:")


def delete_topics(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    futures = admin.delete_topics(args.names, request_timeout=timeout(), operation_timeout=timeout())
    return report_futures(args, futures, "deleted")


def trim_topic(args: argparse.Namespace) -> int:
    from confluent_kafka import TopicCollection, TopicPartition

    admin = admin_client(args)
    partitions = args.partition
    if partitions is None:
        description = result(admin.describe_topics(TopicCollection([args.name]))[args.name])
        partitions = sorted(p.id for p in description.partitions)
    futures = admin.delete_records([TopicPartition(args.name, p, args.offset) for p in partitions],
                                   request_timeout=timeout())
    rows = []
    for tp, future in sorted(futures.items(), key=lambda item: item[0].partition):
        deleted = result(future)
        rows.append({"partition": tp.partition, "log_start_offset": deleted.low_watermark})
    emit(args, {"name": args.name, "partitions": rows},
         lambda data: table(["PARTITION", "LOG-START-OFFSET"],
                            [(r["partition"], r["log_start_offset"]) for r in data["partitions"]]))
    return 0


# ------------------------------------------------------------------ helpers

def _offsets(admin, specs: dict) -> dict[int, int]:
    if not specs:
        return {}
    return {tp.partition: result(f).offset for tp, f in admin.list_offsets(specs, request_timeout=timeout()).items()}


def raise_for(error) -> None:
    from confluent_kafka import KafkaException

    raise KafkaException(error)
