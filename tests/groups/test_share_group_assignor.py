"""The simple share assignor (server/groups/share/assignor.py): partitions spread over the
members subscribed to their topic, shared when members outnumber partitions."""

from __future__ import annotations

from server.groups.share.assignor import assign


def _owners(result: dict, topic: str) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for member, topics in result.items():
        for p in topics.get(topic, []):
            out.setdefault(p, []).append(member)
    return out


def test_fewer_members_than_partitions_each_partition_once():
    result = assign({"a": frozenset({"t"}), "b": frozenset({"t"})}, {"t": 5})
    owners = _owners(result, "t")
    assert sorted(owners) == [0, 1, 2, 3, 4] and all(len(m) == 1 for m in owners.values())
    assert sorted(len(r["t"]) for r in result.values()) == [2, 3]


def test_more_members_than_partitions_every_member_works_partitions_shared():
    members = {m: frozenset({"t"}) for m in "abcde"}
    result = assign(members, {"t": 2})
    assert all(len(r["t"]) == 1 for r in result.values())
    owners = _owners(result, "t")
    assert sorted(len(m) for m in owners.values()) == [2, 3]


def test_only_subscribers_get_a_topic_and_missing_topics_are_skipped():
    result = assign({"a": frozenset({"t", "u"}), "b": frozenset({"u", "gone"})}, {"t": 2, "u": 1})
    assert result["a"]["t"] == [0, 1]
    assert "t" not in result["b"] and "gone" not in result["b"]
    assert sorted(_owners(result, "u")[0]) == ["a", "b"]  # two subscribers, one partition: shared
    assert assign({}, {"t": 3}) == {}
