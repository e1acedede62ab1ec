"""`trafka group ...`: list, describe (members, committed offsets, lag), seek (reset
offsets: a dry run unless --execute) and delete consumer groups — kafka-consumer-groups.sh's
verbs, shaped like rpk's."""

from __future__ import annotations

import argparse
from typing import Any

from cli.tools.common import (CliError, add_output_format, admin_client, emit, report_futures, result, table,
                                 timeout)


def register(sub: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add `group` and its verbs to the root parser."""
    group = sub.add_parser("group", help="list, describe, seek and delete consumer groups")
    verbs = group.add_subparsers(dest="verb", required=True, metavar="VERB")

    lister = verbs.add_parser("list", parents=[parent], help="list consumer groups")
    add_output_format(lister)
    lister.set_defaults(handler=list_groups)

    describe = verbs.add_parser("describe", parents=[parent],
                                help="state, members and, per partition, committed offset, log end offset and lag")
    describe.add_argument("name", metavar="NAME")
    add_output_format(describe)
    describe.set_defaults(handler=describe_group)

    seek = verbs.add_parser("seek", parents=[parent],
                            help="move a group's committed offsets (prints the plan; --execute applies it)")
    seek.add_argument("name", metavar="NAME")
    seek.add_argument("--to", required=True, metavar="TARGET",
                      help="earliest, latest, timestamp:MS (first offset at or after MS) or offset:N")
    seek.add_argument("--topic", action="append", metavar="TOPIC",
                      help="only this topic, all its partitions (repeatable; default: the topics the group "
                           "has committed offsets for)")
    seek.add_argument("--execute", action="store_true",
                      help="apply the plan (the group must have no members, as with Kafka's tool)")
    add_output_format(seek)
    seek.set_defaults(handler=seek_group)

    delete = verbs.add_parser("delete", parents=[parent], help="delete consumer groups (they must be empty)")
    delete.add_argument("names", nargs="+", metavar="NAME")
    add_output_format(delete)
    delete.set_defaults(handler=delete_groups)


# ------------------------------------------------------------------ verbs

def list_groups(args: argparse.Namespace) -> int:
    listed = result(admin_client(args).list_consumer_groups(request_timeout=timeout()))
    if listed.errors:
        from confluent_kafka import KafkaException

        raise KafkaException(listed.errors[0])
    rows = sorted(({"name": g.group_id, "state": _state(g.state)} for g in listed.valid), key=lambda r: r["name"])
    emit(args, rows, lambda rows: table(["NAME", "STATE"], [(r["name"], r["state"]) for r in rows]))
    return 0


def describe_group(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    description = result(admin.describe_consumer_groups([args.name], request_timeout=timeout())[args.name])
    committed = committed_offsets(admin, args.name)
    if _state(description.state) == "Dead" and not committed:
        raise CliError(f"GROUP_ID_NOT_FOUND: consumer group {args.name!r} does not exist")
    ends = end_offsets(admin, list(committed))
    owners: dict[tuple[str, int], str] = {}
    members = []
    for member in description.members:
        parts = sorted((tp.topic, tp.partition) for tp in member.assignment.topic_partitions)
        for part in parts:
            owners[part] = member.member_id
        members.append({"member_id": member.member_id, "client_id": member.client_id, "host": member.host,
                        "group_instance_id": member.group_instance_id,
                        "assignment": [{"topic": t, "partition": p} for t, p in parts]})
    for part in owners:
        committed.setdefault(part, None)
    missing = [part for part in committed if part not in ends]
    ends.update(end_offsets(admin, missing))
    offsets = []
    for (topic, partition) in sorted(committed):
        offset = committed[(topic, partition)]
        end = ends.get((topic, partition))
        lag = None if offset is None or end is None else max(0, end - offset)
        offsets.append({"topic": topic, "partition": partition, "committed_offset": offset,
                        "log_end_offset": end, "lag": lag, "member_id": owners.get((topic, partition))})
    data: dict[str, Any] = {
        "name": description.group_id, "state": _state(description.state),
        "coordinator": description.coordinator.id if description.coordinator is not None else None,
        "protocol": description.partition_assignor, "members": members, "offsets": offsets,
        "total_lag": sum(o["lag"] or 0 for o in offsets)}
    emit(args, data, _describe_text)
    return 0


def _describe_text(data: dict[str, Any]) -> str:
    lines = [f"GROUP        {data['name']}", f"STATE        {data['state']}",
             f"COORDINATOR  {data['coordinator']}", f"ASSIGNOR     {data['protocol'] or '-'}",
             f"MEMBERS      {len(data['members'])}", f"TOTAL-LAG    {data['total_lag']}", ""]
    if data["members"]:
        lines.append(table(["MEMBER-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"],
                           [(m["member_id"], m["client_id"], m["host"],
                             _assignment(m["assignment"])) for m in data["members"]]))
        lines.append("")
    lines.append(table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID"],
                       [(o["topic"], o["partition"], _dash(o["committed_offset"]), _dash(o["log_end_offset"]),
                         _dash(o["lag"]), o["member_id"] or "-") for o in data["offsets"]]))
    return "\n".join(lines)


def _assignment(parts: list[dict]) -> str:
    by_topic: dict[str, list[int]] = {}
    for part in parts:
        by_topic.setdefault(part["topic"], []).append(part["partition"])
    return " ".join(f"{t}[{','.join(str(p) for p in ps)}]" for t, ps in by_topic.items()) or "-"


def _dash(value: Any) -> Any:
    return "-" if value is None else value


def seek_group(args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    target = parse_target(args.to)
    admin = admin_client(args)
    committed = committed_offsets(admin, args.name)
    if args.topic:
        parts = partitions_of(admin, args.topic)
    else:
        parts = sorted(committed)
        if not parts:
            raise CliError(f"group {args.name} has no committed offsets: name the topics with --topic", 2)
    plan_offsets = new_offsets(admin, parts, target)
    plan = [{"topic": t, "partition": p, "current_offset": committed.get((t, p)),
             "new_offset": plan_offsets[(t, p)]} for t, p in parts]
    if args.execute:
        description = result(admin.describe_consumer_groups([args.name], request_timeout=timeout())[args.name])
        if description.members:
            raise CliError(f"group {args.name} has {len(description.members)} active member(s) (state "
                           f"{_state(description.state)}): offsets can be moved only while it has none; "
                           f"stop its consumers first")
        request = ConsumerGroupTopicPartitions(
            args.name, [TopicPartition(row["topic"], row["partition"], row["new_offset"]) for row in plan])
        done = result(admin.alter_consumer_group_offsets([request], request_timeout=timeout())[args.name])
        for tp in done.topic_partitions:
            if tp.error is not None:
                from confluent_kafka import KafkaException

                raise KafkaException(tp.error)
    data = {"group": args.name, "executed": args.execute, "plan": plan}
    emit(args, data, _seek_text)
    return 0


def _seek_text(data: dict[str, Any]) -> str:
    rows = table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                 [(r["topic"], r["partition"], _dash(r["current_offset"]), r["new_offset"]) for r in data["plan"]])
    note = ("offsets moved" if data["executed"]
            else "dry run: nothing changed; add --execute to apply")
    return f"{rows}\n\n{note}"


def delete_groups(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    futures = admin.delete_consumer_groups(args.names, request_timeout=timeout())
    return report_futures(args, futures, "deleted group")


# ------------------------------------------------------------------ helpers

def parse_target(value: str) -> tuple[str, int]:
    """--to: ('earliest'|'latest', 0), ('timestamp', MS) or ('offset', N)."""
    if value in ("earliest", "latest"):
        return value, 0
    kind, sep, number = value.partition(":")
    if sep and kind in ("timestamp", "offset"):
        try:
            return kind, int(number)
        except ValueError:
            pass
    raise CliError(f"--to: expected earliest, latest, timestamp:MS or offset:N, got {value!r}", 2)


def committed_offsets(admin, group: str) -> dict[tuple[str, int], int | None]:
    """The group's committed offsets, all topics (OffsetFetch with no partitions named)."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    answer = result(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                      request_timeout=timeout())[group])
    return {(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in answer.topic_partitions}


def end_offsets(admin, parts: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    if not parts:
        return {}
    specs = {TopicPartition(t, p): OffsetSpec.latest() for t, p in parts}
    futures = admin.list_offsets(specs, request_timeout=timeout())
    return {(tp.topic, tp.partition): result(f).offset for tp, f in futures.items()}


def partitions_of(admin, topics: list[str]) -> list[tuple[str, int]]:
    from confluent_kafka import TopicCollection

    parts = []
    for name, future in admin.describe_topics(TopicCollection(topics)).items():
        parts += [(name, p.id) for p in result(future).partitions]
    return sorted(parts)


def new_offsets(admin, parts: list[tuple[str, int]], target: tuple[str, int]) -> dict[tuple[str, int], int]:
    """Where each partition's offset goes: ListOffsets for earliest/latest/timestamp (a
    timestamp past the last record gives the log end), clamped to the log for offset:N."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    kind, number = target

    def ask(spec) -> dict[tuple[str, int], int]:
        futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in parts}, request_timeout=timeout())
        return {(tp.topic, tp.partition): result(f).offset for tp, f in futures.items()}

    if kind == "earliest":
        return ask(OffsetSpec.earliest())
    if kind == "latest":
        return ask(OffsetSpec.latest())
    latest = ask(OffsetSpec.latest())
    if kind == "timestamp":
        found = ask(OffsetSpec.for_timestamp(number))
        return {part: (offset if offset >= 0 else latest[part]) for part, offset in found.items()}
    earliest = ask(OffsetSpec.earliest())
    return {part: min(max(number, earliest[part]), latest[part]) for part in parts}


def _state(state: Any) -> str:
    name = getattr(state, "name", str(state))
    return {"PREPARING_REBALANCING": "PreparingRebalance", "COMPLETING_REBALANCING": "CompletingRebalance",
            "STABLE": "Stable", "DEAD": "Dead", "EMPTY": "Empty", "UNKNOWN": "Unknown"}.get(name, name)
