"""Partition directory names: `<topic>-<partition>`, as Kafka names them."""

from __future__ import annotations

import re


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    match = _PARTITION_DIR.match(name)
    if match is None:
        return None
    return match.group("topic"), int(match.group("partition"))
