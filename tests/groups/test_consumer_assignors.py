"""The KIP-848 server-side assignors (server/groups/consumer/assignors.py).

Property tests over random groups (members, subscriptions, topics, stale or conflicting
current assignments), then examples from Kafka's own unit tests with their expected outputs
(group-coordinator/src/test/java/org/apache/kafka/coordinator/group/assignor/).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from server.groups.consumer.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    MemberSubscription,
    PartitionAssignor,
    RangeAssignor,
    TopicInfo,
    UniformAssignor,
    _assign_uniform_heterogeneous,
    _current_assignment,
    _subscriptions,
)

Result = dict[str, dict[uuid.UUID, frozenset[int]]]
TOPIC_IDS = [uuid.UUID(int=i * 0x1111) for i in range(1, 6)]
MEMBER_IDS = [f"m{i}" for i in range(10)]

uniform = UniformAssignor()
range_ = RangeAssignor()


# --------------------------------------------------------------------------- strategies


@st.composite
def topic_maps(draw: st.DrawFn) -> dict[uuid.UUID, TopicInfo]:
    ids = draw(st.lists(st.sampled_from(TOPIC_IDS), min_size=1, max_size=4, unique=True))
    return {t: TopicInfo(f"topic-{t.int:x}", draw(st.integers(0, 12))) for t in ids}


@st.composite
def current_assignments(draw: st.DrawFn, topic_pool: list[uuid.UUID]) -> dict[uuid.UUID, frozenset[int]]:
    """Possibly stale: partitions beyond the count, topics not subscribed, claimed twice."""
    topics = draw(st.lists(st.sampled_from(topic_pool), max_size=3, unique=True))
    return {t: frozenset(draw(st.sets(st.integers(0, 14), max_size=6))) for t in topics}


@st.composite
def groups(
    draw: st.DrawFn, homogeneous: bool | None = None
) -> tuple[dict[str, MemberSubscription], dict[uuid.UUID, TopicInfo]]:
    topics = draw(topic_maps())
    ids = draw(st.lists(st.sampled_from(MEMBER_IDS), min_size=1, max_size=7, unique=True))
    # Subscriptions may name a topic that does not exist (it is ignored).
    pool = sorted(topics) + [TOPIC_IDS[-1]] * (TOPIC_IDS[-1] not in topics)
    subset = st.frozensets(st.sampled_from(pool), min_size=0 if homogeneous is None else 1)
    shared = draw(subset)
    if homogeneous is None:
        homogeneous = draw(st.booleans())
    members = {}
    for member_id in ids:
        members[member_id] = MemberSubscription(
            topic_ids=shared if homogeneous else draw(subset),
            assigned=draw(current_assignments(pool)),
            instance_id=draw(st.none() | st.sampled_from(["i1", "i2", "i3", "i4"])),
        )
    return members, topics


assignors = st.sampled_from([uniform, range_])


# --------------------------------------------------------------------------- helpers


def subscribed(
    members: Mapping[str, MemberSubscription], topics: Mapping[uuid.UUID, TopicInfo]
) -> dict[str, frozenset[uuid.UUID]]:
    return {m: frozenset(t for t in s.topic_ids if t in topics) for m, s in members.items()}


def count(assignment: Mapping[uuid.UUID, frozenset[int]]) -> int:
    return sum(len(ps) for ps in assignment.values())


def check_valid(
    members: Mapping[str, MemberSubscription], topics: Mapping[uuid.UUID, TopicInfo], result: Result
) -> None:
    """Every member has an entry; partitions only of subscribed, existing topics; each
    subscribed partition owned by exactly one subscriber."""
    assert set(result) == set(members)
    subs = subscribed(members, topics)
    owners: dict[tuple[uuid.UUID, int], str] = {}
    for member_id, assignment in result.items():
        for topic_id, partitions in assignment.items():
            assert topic_id in subs[member_id]
            assert partitions, "no empty topic entries"
            for p in partitions:
                assert 0 <= p < topics[topic_id].partitions
                assert (topic_id, p) not in owners, f"{topic_id}/{p} assigned twice"
                owners[(topic_id, p)] = member_id
    wanted = {(t, p) for ts in subs.values() for t in ts for p in range(topics[t].partitions)}
    assert set(owners) == wanted


def with_assigned(members: Mapping[str, MemberSubscription], result: Result) -> dict[str, MemberSubscription]:
    return {
        m: MemberSubscription(s.topic_ids, s.rack_id, result.get(m, {}), s.instance_id)
        for m, s in members.items()
    }


# --------------------------------------------------------------------------- properties


@given(groups(), assignors)
def test_complete_exclusive_subscribed_only(group, assignor: PartitionAssignor) -> None:
    members, topics = group
    check_valid(members, topics, assignor.assign(members, topics))


@given(groups(), assignors)
def test_deterministic_whatever_the_input_order(group, assignor: PartitionAssignor) -> None:
    members, topics = group
    first = assignor.assign(members, topics)
    assert assignor.assign(members, topics) == first
    reversed_members = dict(reversed(list(members.items())))
    reversed_topics = dict(reversed(list(topics.items())))
    assert assignor.assign(reversed_members, reversed_topics) == first


@given(groups(homogeneous=True))
def test_uniform_homogeneous_is_balanced(group) -> None:
    members, topics = group
    counts = [count(a) for a in uniform.assign(members, topics).values()]
    assert max(counts) - min(counts) <= 1


@given(groups(homogeneous=True), st.data())
def test_uniform_homogeneous_member_leaves_nobody_loses(group, data) -> None:
    members, topics = group
    before = uniform.assign(members, topics)
    leaver = data.draw(st.sampled_from(sorted(members)))
    rest = {m: s for m, s in with_assigned(members, before).items() if m != leaver}
    after = uniform.assign(rest, topics)
    check_valid(rest, topics, after)
    for member_id, assignment in after.items():
        for topic_id, partitions in before[member_id].items():
            assert partitions <= assignment.get(topic_id, frozenset())


@given(groups(homogeneous=True), st.sampled_from(["new-a", "n0", "zz"]))
def test_uniform_homogeneous_member_joins_minimal_movement(group, joiner: str) -> None:
    members, topics = group
    before = uniform.assign(members, topics)
    grown = with_assigned(members, before)
    shared = next(iter(members.values())).topic_ids
    grown[joiner] = MemberSubscription(shared)
    after = uniform.assign(grown, topics)
    check_valid(grown, topics, after)

    total = sum(count(a) for a in before.values())
    min_quota, extras = divmod(total, len(grown))
    kept = {
        m: sum(len(ps & after[m].get(t, frozenset())) for t, ps in before[m].items()) for m in before
    }
    for member_id, assignment in before.items():
        # Nobody drops below what the smaller quota lets it keep...
        assert kept[member_id] >= min(count(assignment), min_quota)
    # ...and the extra slots go to members that would otherwise lose a partition.
    over = sum(1 for a in before.values() if count(a) > min_quota)
    best = sum(min(count(a), min_quota) for a in before.values()) + min(extras, over)
    assert sum(kept.values()) == best


@given(groups(homogeneous=True))
def test_uniform_homogeneous_is_a_fixpoint(group) -> None:
    members, topics = group
    once = uniform.assign(members, topics)
    assert uniform.assign(with_assigned(members, once), topics) == once


@given(groups(homogeneous=False))
def test_uniform_heterogeneous_balanced_as_subscriptions_allow(group) -> None:
    """No partition could move to another subscriber of its topic and improve balance:
    whoever holds a partition of topic t has at most one more than any subscriber of t."""
    members, topics = group
    result = uniform.assign(members, topics)
    subs = subscribed(members, topics)
    counts = {m: count(a) for m, a in result.items()}
    for member_id, assignment in result.items():
        for topic_id in assignment:
            for other in subs:
                if topic_id in subs[other]:
                    assert counts[member_id] - counts[other] <= 1


@given(groups(homogeneous=False))
def test_uniform_heterogeneous_keeps_what_balance_allows(group) -> None:
    """Rerunning on its own output moves nothing (it is balanced, so nothing must move)."""
    members, topics = group
    once = uniform.assign(members, topics)
    assert uniform.assign(with_assigned(members, once), topics) == once


@given(groups())
def test_range_contiguous_in_member_order(group) -> None:
    members, topics = group
    result = range_.assign(members, topics)
    subs = subscribed(members, topics)
    order = sorted(members, key=lambda m: (members[m].instance_id is None, members[m].instance_id or "", m))
    for topic_id, info in topics.items():
        takers = [m for m in order if topic_id in subs[m]]
        expected_start = 0
        for i, member_id in enumerate(takers):
            size = info.partitions // len(takers) + (i < info.partitions % len(takers))
            got = result[member_id].get(topic_id, frozenset())
            assert got == frozenset(range(expected_start, expected_start + size))
            expected_start += size


@given(groups(homogeneous=True))
def test_range_co_partitions_topics_of_equal_size(group) -> None:
    members, topics = group
    result = range_.assign(members, topics)
    shared = subscribed(members, topics)[next(iter(members))]
    for a in shared:
        for b in shared:
            if topics[a].partitions == topics[b].partitions:
                for assignment in result.values():
                    assert assignment.get(a, frozenset()) == assignment.get(b, frozenset())


@given(groups())
@settings(max_examples=50)
def test_range_ignores_current_assignment(group) -> None:
    members, topics = group
    cleared = {m: MemberSubscription(s.topic_ids, instance_id=s.instance_id) for m, s in members.items()}
    assert range_.assign(members, topics) == range_.assign(cleared, topics)


def test_pure_python() -> None:
    """The coordinator may call the assignors anywhere: they import only the standard library."""
    import ast
    import sys

    import server.groups.consumer.assignors as module

    tree = ast.parse(open(module.__file__, encoding="utf-8").read())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert {name.split(".")[0] for name in imported} <= set(sys.stdlib_module_names) - {"socket", "select"}


def test_registry() -> None:
    assert DEFAULT_ASSIGNOR == "uniform"
    assert {name: a.name for name, a in ASSIGNORS.items()} == {"uniform": "uniform", "range": "range"}


def test_no_members_and_no_topics() -> None:
    t = TOPIC_IDS[0]
    for assignor in (uniform, range_):
        assert assignor.assign({}, {t: TopicInfo("t", 3)}) == {}
        assert assignor.assign({"A": MemberSubscription(frozenset())}, {}) == {"A": {}}
        # A subscription to a topic that does not exist gets nothing (Kafka throws).
        assert assignor.assign({"A": MemberSubscription(frozenset({t}))}, {}) == {"A": {}}


def test_stale_current_assignment_is_cleaned() -> None:
    t1, t2 = TOPIC_IDS[:2]
    members = {
        "A": MemberSubscription(frozenset({t1}), assigned={t1: frozenset({0, 1, 7}), t2: frozenset({0})}),
        "B": MemberSubscription(frozenset({t1}), assigned={t1: frozenset({1, 2})}),
    }
    topics = {t1: TopicInfo("t1", 4), t2: TopicInfo("t2", 1)}
    subs = _subscriptions(members, topics)
    assert _current_assignment(members, topics, subs) == {"A": {t1: [0, 1]}, "B": {t1: [2]}}
    assert uniform.assign(members, topics) == {"A": {t1: frozenset({0, 1})}, "B": {t1: frozenset({2, 3})}}


# --------------------------------------------------------------------------- Kafka's examples


def kafka_uuid(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString: url-safe base64 of the 16 bytes."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


T1 = kafka_uuid("T1-A4s3VTwiI5CTbEp6POw")
T2 = kafka_uuid("T2-B4s3VTwiI5YHbPp6YUe")
T3 = kafka_uuid("T3-CU8fVTLCz5YMkLoDQsa")
T4 = kafka_uuid("T4-Tw9fVTLCz5HbPp6YQsa")


def topic_infos(**partitions: int) -> dict[uuid.UUID, TopicInfo]:
    ids = {"t1": T1, "t2": T2, "t3": T3, "t4": T4}
    return {ids[name]: TopicInfo(name, n) for name, n in partitions.items()}


def sub(
    *topics: uuid.UUID, assigned: Mapping[uuid.UUID, set[int]] | None = None, instance: str | None = None
) -> MemberSubscription:
    return MemberSubscription(
        frozenset(topics),
        assigned={t: frozenset(ps) for t, ps in (assigned or {}).items()},
        instance_id=instance,
    )


def expect(**members: dict[uuid.UUID, set[int]]) -> Result:
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in members.items()}


# OptimizedUniformAssignmentBuilderTest (homogeneous). Kafka's builder walks its topic ids in
# HashSet order, which for T1/T2 happens to be T2 first; ours walks them sorted. Where that
# order shows in the expected output, the test swaps the ids so that "T2" sorts first.


def test_kafka_uniform_homogeneous_more_members_than_partitions() -> None:
    members = {m: sub(T3) for m in "ABC"}
    got = uniform.assign(members, topic_infos(t3=2))
    assert got == expect(A={T3: {0}}, B={T3: {1}}, C={})


def test_kafka_uniform_homogeneous_unbalanced_previous_assignment() -> None:
    members = {
        "A": sub(T1, T2, assigned={T1: {0, 1}, T2: {0, 1}}),
        "B": sub(T1, T2, assigned={T1: {2}, T2: {2}}),
    }
    got = uniform.assign(members, topic_infos(t1=3, t2=3))
    assert got == expect(A={T1: {0, 1}, T2: {0}}, B={T1: {2}, T2: {1, 2}})


def test_kafka_uniform_homogeneous_partitions_added() -> None:
    t1, t2 = T2, T1  # Kafka visits T2 before T1 (see above)
    members = {
        "A": sub(t1, t2, assigned={t1: {0, 2}, t2: {0}}),
        "B": sub(t1, t2, assigned={t1: {1}, t2: {1, 2}}),
    }
    got = uniform.assign(members, {t1: TopicInfo("t1", 6), t2: TopicInfo("t2", 5)})
    assert got == expect(A={t1: {0, 2, 3}, t2: {0, 3, 4}}, B={t1: {1, 4, 5}, t2: {1, 2}})


def test_kafka_uniform_homogeneous_member_added() -> None:
    members = {
        "A": sub(T1, T2, assigned={T1: {0, 2}, T2: {0}}),
        "B": sub(T1, T2, assigned={T1: {1}, T2: {1, 2}}),
        "C": sub(T1, T2),
    }
    got = uniform.assign(members, topic_infos(t1=3, t2=3))
    assert got == expect(A={T1: {0, 2}}, B={T1: {1}, T2: {1}}, C={T2: {0, 2}})


def test_kafka_uniform_homogeneous_member_removed() -> None:
    t1, t2 = T2, T1  # Kafka visits T2 before T1 (see above)
    members = {
        "A": sub(t1, t2, assigned={t1: {0}, t2: {0}}),
        "B": sub(t1, t2, assigned={t1: {1}, t2: {1}}),
    }
    got = uniform.assign(members, {t1: TopicInfo("t1", 3), t2: TopicInfo("t2", 3)})
    assert got == expect(A={t1: {0}, t2: {0, 2}}, B={t1: {1, 2}, t2: {1}})


# UniformHeterogeneousAssignmentBuilderTest: deterministic in Kafka too (sorted members,
# topics ordered by partitions per subscriber, then subscribers, then id).


def test_kafka_uniform_heterogeneous_first_assignment() -> None:
    members = {"A": sub(T1, T3), "B": sub(T3)}
    got = uniform.assign(members, topic_infos(t1=3, t3=6))
    assert got == expect(A={T1: {0, 1, 2}, T3: {4}}, B={T3: {0, 1, 2, 3, 5}})


def test_kafka_uniform_heterogeneous_more_members_than_partitions() -> None:
    members = {"A": sub(T3), "B": sub(T3), "C": sub(T1)}
    got = uniform.assign(members, topic_infos(t3=1, t1=2))
    assert got == expect(A={T3: {0}}, B={}, C={T1: {0, 1}})


def test_kafka_uniform_heterogeneous_unbalanced_previous_assignment() -> None:
    members = {
        "A": sub(T1, assigned={T1: {0, 1, 2}}),
        "B": sub(T1, T2, assigned={T1: {3}, T2: {0}}),
        "C": sub(T1, T2, T3, assigned={T1: {4, 5}, T2: {1, 2, 3}, T3: {0, 1, 2, 3}}),
    }
    got = uniform.assign(members, topic_infos(t1=6, t2=4, t3=4))
    assert got == expect(
        A={T1: {0, 1, 2, 5}}, B={T1: {3}, T2: {0, 1, 2, 3}}, C={T1: {4}, T3: {0, 1, 2, 3}}
    )


def test_kafka_uniform_heterogeneous_partitions_added() -> None:
    members = {
        "A": sub(T1, T3, assigned={T1: {0, 1, 2, 3}, T3: {0, 1}}),
        "B": sub(T1, T2, T3, T4, assigned={T2: {0, 1, 2}, T4: {0, 1, 2}}),
    }
    got = uniform.assign(members, topic_infos(t1=6, t2=5, t3=3, t4=3))
    assert got == expect(
        A={T1: {0, 1, 2, 3, 4, 5}, T3: {0, 1, 2}}, B={T2: {0, 1, 2, 3, 4}, T4: {0, 1, 2}}
    )


def test_kafka_uniform_heterogeneous_member_and_partitions_added() -> None:
    members = {
        "A": sub(T1, assigned={T1: {0, 2}, T2: {0}}),
        "B": sub(T1, T2, assigned={T1: {1}, T2: {1, 2}}),
        "C": sub(T1, T2),
    }
    got = uniform.assign(members, topic_infos(t1=6, t2=7))
    assert got == expect(
        A={T1: {0, 2, 3, 4, 5}}, B={T1: {1}, T2: {1, 2, 6}}, C={T2: {0, 3, 4, 5}}
    )


def test_kafka_uniform_heterogeneous_member_removed() -> None:
    members = {
        "A": sub(T1, T3, assigned={T1: {0, 1, 2}, T3: {0, 1}}),
        "B": sub(T2, assigned={T2: {3, 4, 5, 6}}),
    }
    got = uniform.assign(members, topic_infos(t1=3, t2=8, t3=3))
    assert got == expect(A={T1: {0, 1, 2}, T3: {0, 1, 2}}, B={T2: {0, 1, 2, 3, 4, 5, 6, 7}})


def test_kafka_uniform_heterogeneous_subscription_removed() -> None:
    members = {
        "A": sub(T1, assigned={T1: {0, 2}, T2: {1, 3}}),
        "B": sub(T1, T2, assigned={T1: {1}, T2: {0, 2, 4}}),
    }
    got = uniform.assign(members, topic_infos(t1=3, t2=5))
    assert got == expect(A={T1: {0, 1, 2}}, B={T2: {0, 1, 2, 3, 4}})


def test_kafka_uniform_heterogeneous_topic_partitions_run_out() -> None:
    """Kafka forces the heterogeneous builder onto identical subscriptions here."""
    members = {
        "A": sub(T1, T2, T3, assigned={T1: {0, 1}, T2: {0, 1}, T3: {0, 1}}),
        "B": sub(T1, T2, T3),
    }
    topics = topic_infos(t1=2, t2=2, t3=2)
    subs = _subscriptions(members, topics)
    got = _assign_uniform_heterogeneous(subs, _current_assignment(members, topics, subs), topics)
    assert got == expect(A={T2: {0}, T3: {0, 1}}, B={T1: {0, 1}, T2: {1}})


# RangeAssignorTest


def test_kafka_range_two_members_same_subscriptions() -> None:
    members = {"A": sub(T1, T3), "B": sub(T1, T3)}
    got = range_.assign(members, topic_infos(t1=3, t3=2))
    assert got == expect(A={T1: {0, 1}, T3: {0}}, B={T1: {2}, T3: {1}})


def test_kafka_range_three_members_different_subscriptions() -> None:
    members = {"A": sub(T1, T2), "B": sub(T3), "C": sub(T2, T3)}
    got = range_.assign(members, topic_infos(t1=3, t2=3, t3=2))
    assert got == expect(A={T1: {0, 1, 2}, T2: {0, 1}}, B={T3: {0}}, C={T2: {2}, T3: {1}})


def test_kafka_range_more_members_than_partitions() -> None:
    members = {m: sub(T1, T3) for m in "ABC"}
    got = range_.assign(members, topic_infos(t1=3, t3=2))
    assert got == expect(A={T1: {0}, T3: {0}}, B={T1: {1}, T3: {1}}, C={T1: {2}})


def test_kafka_range_member_added_after_initial_assignment() -> None:
    members = {
        "A": sub(T1, T2, assigned={T1: {0, 1}, T2: {0, 1}}),
        "B": sub(T1, T2, assigned={T1: {2}, T2: {2}}),
        "C": sub(T1, T2),
    }
    got = range_.assign(members, topic_infos(t1=3, t2=3))
    assert got == expect(A={T1: {0}, T2: {0}}, B={T1: {1}, T2: {1}}, C={T1: {2}, T2: {2}})


def test_kafka_range_mixed_static_membership() -> None:
    """A static member that rejoins under a new member id keeps its range."""
    topics = topic_infos(t1=5)
    members = {"A": sub(T1, instance="instanceA"), "C": sub(T1, instance="instanceC"), "B": sub(T1)}
    first = range_.assign(members, topics)
    assert first == expect(A={T1: {0, 1}}, C={T1: {2, 3}}, B={T1: {4}})
    del members["A"]
    members["memberA1"] = sub(T1, instance="instanceA")
    again = range_.assign(members, topics)
    assert again["memberA1"] == first["A"]
    assert again["B"] == first["B"] and again["C"] == first["C"]
