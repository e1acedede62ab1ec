"""Kafka's simple share assignor (KIP-932 `SimpleAssignor`), per topic.

Why not the consumer-group assignors: in a share group a partition may go to several
members at once — records, not partitions, are what members divide. So each topic's
partitions are spread round-robin over the members subscribed to it, and when members
outnumber partitions every member still gets one (partitions are then shared), which is
how more consumers than partitions all get work: queue semantics.
"""

from __future__ import annotations

import zlib


def assign(subscriptions: dict[str, frozenset[str]], partitions: dict[str, int]) -> dict[str, dict[str, list[int]]]:
    """member id -> {topic: sorted partitions}; `partitions`: topic -> partition count of
    the subscribed topics that exist."""
    out: dict[str, dict[str, list[int]]] = {member: {} for member in subscriptions}
    for topic in sorted(partitions):
        count = partitions[topic]
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members or count <= 0:
            continue
        # Start each topic at another member, so many single-partition topics spread too.
        shift = zlib.crc32(topic.encode()) % len(members)
        members = members[shift:] + members[:shift]
        if len(members) <= count:
            for p in range(count):
                out[members[p % len(members)]].setdefault(topic, []).append(p)
        else:
            for i, member in enumerate(members):
                out[member].setdefault(topic, []).append(i % count)
    for assignment in out.values():
        for parts in assignment.values():
            parts.sort()
    return out
