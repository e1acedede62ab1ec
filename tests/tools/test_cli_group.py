"""`trafka group ...` against a real broker process: a group that consumed part of a topic
shows the committed offsets and lag that match what was produced; `seek` changes nothing
without --execute, moves the offsets with it, and refuses while the group has members."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.tools.clikit import popen, trafka

pytestmark = pytest.mark.timeout(300)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def offsets(broker, group: str) -> dict[tuple[str, int], tuple]:
    data = trafka("group", "describe", group, "--format", "json", bootstrap=broker.bootstrap).json()
    return {(o["topic"], o["partition"]): (o["committed_offset"], o["log_end_offset"], o["lag"])
            for o in data["offsets"]}


@pytest.fixture
def consumed(broker):
    """A topic of 2 partitions (6 + 4 records); a group that read 4 of partition 0's (-p 0 -n 4)
    and all of partition 1."""
    b = broker.bootstrap
    topic, group = unique("lag"), unique("grp")
    trafka("topic", "create", topic, "-p", "2", bootstrap=b).ok()
    trafka("topic", "produce", topic, "-p", "0", stdin="".join(f"v{i}\n" for i in range(6)), bootstrap=b).ok()
    trafka("topic", "produce", topic, "-p", "1", stdin="".join(f"w{i}\n" for i in range(4)), bootstrap=b).ok()
    out = trafka("topic", "consume", topic, "-g", group, "-p", "0", "-n", "4", bootstrap=b).ok().out
    assert out == "v0\nv1\nv2\nv3\n"
    assert trafka("topic", "consume", topic, "-g", group, "-p", "1", bootstrap=b).ok().out == "w0\nw1\nw2\nw3\n"
    return topic, group


def test_describe_shows_committed_offsets_and_lag(broker, consumed):
    topic, group = consumed
    assert offsets(broker, group) == {(topic, 0): (4, 6, 2), (topic, 1): (4, 4, 0)}
    data = trafka("group", "describe", group, "--format", "json", bootstrap=broker.bootstrap).json()
    assert (data["state"], data["members"], data["total_lag"]) == ("Empty", [], 2)
    text = trafka("group", "describe", group, bootstrap=broker.bootstrap).ok().out
    assert "TOTAL-LAG    2" in text
    assert [topic, "0", "4", "6", "2", "-"] in [line.split() for line in text.splitlines()]

    # The group resumes where it committed: the two records it has not read, then no lag.
    assert trafka("topic", "consume", topic, "-g", group, bootstrap=broker.bootstrap).ok().out == "v4\nv5\n"
    assert offsets(broker, group) == {(topic, 0): (6, 6, 0), (topic, 1): (4, 4, 0)}
    assert group in trafka("group", "list", bootstrap=broker.bootstrap).ok().out


def test_seek_dry_run_then_execute(broker, consumed):
    topic, group = consumed
    b = broker.bootstrap
    before = offsets(broker, group)
    dry = trafka("group", "seek", group, "--to", "earliest", bootstrap=b).ok().out
    assert "dry run: nothing changed" in dry
    assert [topic, "0", "4", "0"] in [line.split() for line in dry.splitlines()]
    assert offsets(broker, group) == before

    trafka("group", "seek", group, "--to", "earliest", "--execute", bootstrap=b).ok()
    assert offsets(broker, group) == {(topic, 0): (0, 6, 6), (topic, 1): (0, 4, 4)}

    plan = trafka("group", "seek", group, "--to", "offset:5", "--topic", topic, "--execute", "--format", "json",
                  bootstrap=b).json()
    assert plan["executed"] and [(r["partition"], r["new_offset"]) for r in plan["plan"]] == [(0, 5), (1, 4)]
    assert offsets(broker, group) == {(topic, 0): (5, 6, 1), (topic, 1): (4, 4, 0)}  # offset:N stays in the log

    trafka("group", "seek", group, "--to", f"timestamp:{int(time.time() * 1000) + 3_600_000}", "--execute",
           bootstrap=b).ok()
    assert offsets(broker, group) == {(topic, 0): (6, 6, 0), (topic, 1): (4, 4, 0)}
    trafka("group", "seek", group, "--to", "timestamp:0", "--execute", bootstrap=b).ok()
    assert offsets(broker, group) == {(topic, 0): (0, 6, 6), (topic, 1): (0, 4, 4)}

    assert trafka("group", "seek", group, "--to", "somewhere", bootstrap=b).one_line_error("--to: expected")


def test_seek_refuses_while_the_group_has_members(broker, consumed):
    topic, group = consumed
    b = broker.bootstrap
    follower = popen("topic", "consume", topic, "-g", group, "--follow", bootstrap=b)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            data = trafka("group", "describe", group, "--format", "json", bootstrap=b).json()
            if data["state"] == "Stable" and data["members"]:
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"the --follow consumer never joined: {data}")
        member = data["members"][0]
        assert member["client_id"] == "trafka-cli" and member["host"]
        assert sorted((a["topic"], a["partition"]) for a in member["assignment"]) == [(topic, 0), (topic, 1)]
        before = offsets(broker, group)
        refused = trafka("group", "seek", group, "--to", "earliest", "--execute", bootstrap=b)
        refused.one_line_error("active member", "stop its consumers first")
        assert offsets(broker, group) == before
        assert trafka("group", "delete", group, bootstrap=b).one_line_error("NON_EMPTY_GROUP")
    finally:
        follower.terminate()
        out, _err = follower.communicate(timeout=60)
    assert out == "v4\nv5\n"  # what it read before SIGTERM, then it left the group
    assert trafka("group", "describe", group, "--format", "json", bootstrap=b).json()["state"] == "Empty"


def test_delete(broker, consumed):
    _topic, group = consumed
    b = broker.bootstrap
    assert trafka("group", "delete", group, bootstrap=b).ok().out == f"deleted group {group}\n"
    assert group not in trafka("group", "list", bootstrap=b).ok().out
    trafka("group", "describe", group, bootstrap=b).one_line_error("GROUP_ID_NOT_FOUND")
    trafka("group", "delete", group, bootstrap=b).one_line_error("GROUP_ID_NOT_FOUND")
