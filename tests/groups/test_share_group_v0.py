"""Share groups at v0, Kafka 3.9's early-access versions that kafka-clients 3.9's
KafkaShareConsumer sends, over real sockets.

Why apart from the v1 tests: v0 differs where a 3.9 client depends on it — a join with an
empty MemberId gets its member id from the coordinator, ShareFetch v0 bounds each
partition by PartitionMaxBytes and has no MaxRecords, and the v0 ShareFetch response
has no AcquisitionLockTimeoutMs.
"""

from __future__ import annotations

import base64

import pytest

from tests.brokerproc import BrokerProcess, raw_request
from tests.groups.share_wire import ShareClient, create_topic, offsets, produce
from wire.errors import ErrorCode as E
from wire.registry import ApiKey as K

pytest.importorskip("confluent_kafka")

ACCEPT = 1


@pytest.fixture
def broker(tmp_path):
    with BrokerProcess(tmp_path / "data", "--set", "group.share.record.lock.duration.ms=1000") as b:
        yield b


def test_api_versions_advertise_v0_and_v1(broker):
    versions = raw_request("127.0.0.1", broker.port, K.API_VERSIONS, 3,
                           {"client_software_name": "t", "client_software_version": "1"})
    ranges = {v["api_key"]: (v["min_version"], v["max_version"]) for v in versions["api_keys"]}
    for key in (K.SHARE_GROUP_HEARTBEAT, K.SHARE_GROUP_DESCRIBE, K.SHARE_FETCH, K.SHARE_ACKNOWLEDGE):
        assert ranges[key] == (0, 1)


def test_v0_join_gets_a_member_id_fetch_and_acknowledge(broker):
    tid = create_topic(broker.bootstrap, "q0")
    client = ShareClient(broker, "g0", member="", version=0)
    joined = client.heartbeat(0, ["q0"])
    assert joined["error_code"] == 0, joined
    # A Kafka Uuid string: 3.9's client parses it with Uuid.fromString.
    assert len(joined["member_id"]) == 22 and joined["member_epoch"] == 1
    assert base64.urlsafe_b64decode(joined["member_id"] + "==")
    client.member = joined["member_id"]
    client.member_epoch = joined["member_epoch"]
    assert client.heartbeat()["error_code"] == 0
    # v1 keeps KIP-1082: a v1 join with an empty member id is still INVALID_REQUEST.
    v1 = ShareClient(broker, "g0", member="")
    assert v1.heartbeat(0, ["q0"])["error_code"] == E.INVALID_REQUEST

    produce(broker.bootstrap, "q0", 6, one_per_batch=True)
    first = client.fetch(tid, partition_max_bytes=1)  # one batch at least, no more
    assert first["error_code"] == 0 and "acquisition_lock_timeout_ms" not in first
    got = offsets(first)
    assert len(got) == 1
    rest = []
    while len(got) + len(rest) < 6:
        r = client.fetch(tid, max_wait_ms=500)
        assert r["error_code"] == 0, r
        rest += offsets(r)
    assert sorted(got + rest) == list(range(6))
    ack = client.acknowledge(tid, {0: [(0, 5, [ACCEPT])]})
    assert ack["error_code"] == 0
    assert ack["responses"][0]["partitions"][0]["error_code"] == 0
    described = client.describe()["groups"][0]
    assert described["error_code"] == 0 and [m["member_id"] for m in described["members"]] == [client.member]
    assert offsets(client.fetch(tid, max_wait_ms=100)) == []
