"""JoinGroup answered, and its group kept, as Apache Kafka 4.4 does (found by the protocol
differential):
- a new member's join creates the group before it is judged: a join Kafka refuses
  (empty protocol type or no protocols: INCONSISTENT_GROUP_PROTOCOL) leaves the group
  behind, Empty and written to __consumer_offsets, so ListGroups lists it, also after a
  restart;
- a rebalance timeout of -1 (v1+) is taken as sent: the join is answered, then the member
  is removed at once for not syncing in time, and the group is Empty again. JoinGroup v0,
  which has no rebalance timeout, uses the session timeout.
"""

from __future__ import annotations

import time

import pytest

from tests.brokerproc import BrokerProcess, raw_request
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-join-group") / "data") as proc:
        yield proc


def join(broker, version: int, group: str, **changes) -> dict:
    body = {"group_id": group, "session_timeout_ms": 30_000, "rebalance_timeout_ms": 10_000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}],
            "reason": None, **changes}
    return raw_request("127.0.0.1", broker.port, ApiKey.JOIN_GROUP, version, body)


def listed(broker) -> dict[str, tuple[str, str]]:
    answer = raw_request("127.0.0.1", broker.port, ApiKey.LIST_GROUPS, 4, {"states_filter": []})
    return {g["group_id"]: (g["protocol_type"], g["group_state"]) for g in answer["groups"]}


@pytest.mark.parametrize("version, change", [(5, {"protocol_type": ""}), (1, {"protocols": []})])
def test_a_refused_first_join_leaves_an_empty_group(broker, version, change):
    group = f"pjg-refused-v{version}"
    answer = join(broker, version, group, **change)
    assert answer["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert listed(broker)[group] == ("", "Empty")


def test_the_group_a_refused_join_created_outlives_a_restart(tmp_path):
    with BrokerProcess(tmp_path / "data") as proc:
        assert join(proc, 5, "pjg-kept", protocol_type="")["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        proc.restart()
        assert listed(proc)["pjg-kept"] == ("", "Empty")


def test_a_join_for_an_unknown_member_of_a_missing_group_creates_nothing(broker):
    answer = join(broker, 5, "pjg-nobody", member_id="pjg-made-up")
    assert answer["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    assert "pjg-nobody" not in listed(broker)


def test_a_rebalance_timeout_of_minus_one_gives_no_time_to_sync(broker):
    answer = join(broker, 1, "pjg-no-rebalance-time", rebalance_timeout_ms=-1)
    assert (answer["error_code"], answer["generation_id"]) == (ErrorCode.NONE, 1)
    deadline = time.monotonic() + 10
    while listed(broker)["pjg-no-rebalance-time"][1] != "Empty" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert listed(broker)["pjg-no-rebalance-time"] == ("consumer", "Empty")
    sync = raw_request("127.0.0.1", broker.port, ApiKey.SYNC_GROUP, 1, {
        "group_id": "pjg-no-rebalance-time", "generation_id": 1, "member_id": answer["member_id"],
        "assignments": []})
    assert sync["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID


def test_join_v0_takes_the_session_timeout_as_rebalance_timeout(broker):
    answer = join(broker, 0, "pjg-v0")
    assert (answer["error_code"], answer["generation_id"]) == (ErrorCode.NONE, 1)
    time.sleep(0.5)
    assert listed(broker)["pjg-v0"] == ("consumer", "CompletingRebalance")
