"""Request versions Kafka 4.0 removed, answered by Trafka as Apache Kafka 3.9 answers them.

The same requests go to a Kafka 3.9.2 broker (KRaft, one combined node: tests/old_clients/
kafka39.py) and to a single Trafka broker, the stored data made identical (the same record
batches, produced raw), and the two answers are compared field by field after decoding:
message sets message by message (offset, magic, attributes, timestamp, key, value, and for a
compressed wrapper its own header and inner messages: compressed bytes differ between
zlib and java.util.zip), uncompressed message sets byte for byte. What may differ is said
where it is allowed (a read's size where Kafka's file slice ends inside a batch and Trafka's
stops at the last whole one; times).
"""

from __future__ import annotations

import time

import pytest

from compat_tests.brokers import started
from tests.brokerproc import BrokerProcess, raw_request
from tests.old_clients.kafka39 import Kafka39KRaftBroker
from wire import compression
from wire.legacy import iter_entries, unwrap
from wire.records import Record, build_batch
from wire.registry import API_VERSIONS, ApiKey as K

E_NONE, E_UNKNOWN_TOPIC, E_UNSUPPORTED_VERSION, E_UNSUPPORTED_COMPRESSION = 0, 3, 35, 76
T0 = 1_700_000_000_000  # record timestamps: fixed, so both brokers store the same bytes

# topic -> (partitions, configs): created on both brokers. The topics holding T0-dated records
# keep them (retention.ms=-1): Kafka, and Trafka as Kafka, delete segments whose newest record
# is older than retention.ms (7 days) from the first retention check on, 30 s after start-up,
# the active segment included, which a module running past 30 s would see half-way.
KEEP = {"retention.ms": "-1"}
TOPICS = {
    "plain": (1, KEEP),
    "mixed": (1, KEEP),
    "append-time": (1, {"message.timestamp.type": "LogAppendTime"}),
    "zstd-topic": (1, {"compression.type": "zstd", **KEEP}),
    "no-downconversion": (1, {"message.downconversion.enable": "false", **KEEP}),
    "zstd-batches": (1, KEEP),
}


def _records(base: int, n: int, tag: str, with_keys: bool = True) -> list[Record]:
    """`n` records that will land at offsets base.. (a producer numbers a batch from 0: Kafka
    3.9.2 refuses any other base offset from a client)."""
    return [Record(i, T0 + base + i, f"k{base + i}".encode() if with_keys and i % 3 else None,
                   f"{tag}-{base + i}".encode() * (1 + i % 4), [("h", b"v")] if i % 2 else [])
            for i in range(n)]


def _batches() -> dict[str, list[bytearray]]:
    """What each topic holds: batches built here, produced as they are (v3+ keeps them)."""
    mixed = []
    offset = 0
    for codec, n in [(compression.NONE, 5), (compression.GZIP, 4), (compression.SNAPPY, 3), (compression.LZ4, 6),
                     (compression.NONE, 1), (compression.GZIP, 7), (compression.NONE, 8)]:
        mixed.append(build_batch(_records(offset, n, "mixed"), compression=codec))
        offset += n
    return {
        "plain": [build_batch(_records(0, 10, "plain")),
                  build_batch(_records(10, 10, "plain", with_keys=False))],
        "mixed": mixed,
        "append-time": [build_batch(_records(0, 4, "lat")),
                        build_batch(_records(4, 3, "lat"), compression=compression.GZIP)],
        "zstd-topic": [build_batch(_records(0, 3, "z"))],
        "no-downconversion": [build_batch(_records(0, 3, "nd"))],
        "zstd-batches": [build_batch(_records(0, 3, "zb")),
                         build_batch(_records(3, 3, "zb"), compression=compression.ZSTD),
                         build_batch(_records(6, 3, "zb"))],
    }


def _setup(port: int) -> None:
    body = {"topics": [{"name": name, "num_partitions": n, "replication_factor": 1, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in configs.items()]}
                       for name, (n, configs) in TOPICS.items()], "timeout_ms": 30000, "validate_only": False}
    created = raw_request("127.0.0.1", port, K.CREATE_TOPICS, 4, body)
    assert all(t["error_code"] == 0 for t in created["topics"]), created
    for topic, batches in _batches().items():
        for batch in batches:
            answer = _produce(port, topic, bytes(batch))
            code = answer["responses"][0]["partition_responses"][0]["error_code"]
            assert code == 0, (topic, answer)


def _produce(port: int, topic: str, records: bytes, version: int = 7) -> dict:
    deadline = time.monotonic() + 30
    while True:
        answer = raw_request("127.0.0.1", port, K.PRODUCE, version, {
            "transactional_id": None, "acks": -1, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
        code = answer["responses"][0]["partition_responses"][0]["error_code"]
        if code not in (3, 5, 6) or time.monotonic() > deadline:  # a new topic's leader may not be known yet
            return answer
        time.sleep(0.2)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(Kafka 3.9 port, Trafka port), the same topics and batches on both."""
    kafka = started(lambda: Kafka39KRaftBroker(tmp_path_factory.mktemp("kafka39")))
    trafka = BrokerProcess(tmp_path_factory.mktemp("trafka"), "--set", "group.initial.rebalance.delay.ms=0")
    try:
        trafka.start()
        _setup(kafka.port)
        _setup(trafka.port)
        yield kafka.port, trafka.port
    finally:
        trafka.kill()
        kafka.stop()


def _both(pair, api_key: int, version: int, body: dict) -> tuple[dict, dict]:
    return tuple(raw_request("127.0.0.1", port, api_key, version, body) for port in pair)


# ------------------------------------------------------------------ message sets


def _messages(data: bytes | None) -> tuple[list, int]:
    """The whole messages of a magic-0/1 set, wrappers opened, as comparable tuples, and the
    bytes after the last whole one (a partial message or overflow entries)."""
    if not data:
        return [], 0
    out = []
    pos = 0
    while len(data) - pos >= 12:
        size = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
        end = pos + 12 + size
        if size < 14 or end > len(data):
            break
        entry = next(iter_entries(data[pos:end]))
        head = (entry.offset, entry.magic, entry.attributes, entry.timestamp)
        if entry.compression:
            inner = [(m.offset, m.magic, m.attributes, m.timestamp, m.key, m.value) for m in unwrap(entry)]
            out.append(("wrapper", head, inner))
        else:
            out.append(("message", head, entry.key, entry.value))
        pos = end
    return out, len(data) - pos


def _fetch_body(version: int, topic: str, offset: int, partition_max: int = 1 << 20, max_bytes: int = 1 << 24):
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes, "isolation_level": 0,
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset,
                                                        "partition_max_bytes": partition_max}]}]}


def _fetched(answer: dict) -> dict:
    return answer["responses"][0]["partitions"][0]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@pytest.mark.parametrize("topic,offset", [("plain", 0), ("plain", 4), ("plain", 13), ("mixed", 0), ("mixed", 7),
                                          ("mixed", 10), ("mixed", 26), ("append-time", 0), ("append-time", 5)])
def test_fetch_down_converts_like_kafka_39(pair, version, topic, offset):
    """Everything fits: the answers are the same message sets, of the same size; uncompressed
    ones byte for byte. Records of an uncompressed batch before the fetch offset are left
    out, compressed wrappers keep theirs; magic 0 for v0-1, 1 for v2-3."""
    kafka, trafka = (_fetched(a) for a in _both(pair, K.FETCH, version, _fetch_body(version, topic, offset)))
    assert (trafka["error_code"], trafka["high_watermark"]) == (kafka["error_code"], kafka["high_watermark"])
    k_msgs, k_tail = _messages(kafka["records"])
    t_msgs, t_tail = _messages(trafka["records"])
    assert k_msgs, "Kafka sent messages"
    if topic == "append-time":  # the brokers' clocks stamped them: compare all but the time
        if version >= 2:
            assert all(m[1][2] & 0x08 for m in t_msgs), "LogAppendTime bit on every message"
        k_msgs, t_msgs = _without_times(k_msgs), _without_times(t_msgs)
    assert t_msgs == k_msgs
    if topic != "append-time" or all(m[0] == "message" for m in k_msgs):
        # A compressed wrapper of append-time messages holds each broker's own clock readings,
        # and gzip of different bytes may differ in length by a byte: sizes compared elsewhere.
        assert len(trafka["records"]) == len(kafka["records"])
    if all(m[0] == "message" for m in k_msgs):  # compressed bytes differ, so do the sizes after them
        assert t_tail == k_tail
        if topic != "append-time":
            assert trafka["records"] == kafka["records"]
    assert {m[1][1] for m in t_msgs} == {0 if version <= 1 else 1}


def _without_times(msgs: list) -> list:
    out = []
    for m in msgs:
        head = m[1][:3]
        if m[0] == "wrapper":
            out.append(("wrapper", head, [i[:3] + i[4:] for i in m[2]]))
        else:
            out.append(("message", head) + m[2:])
    return out


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@pytest.mark.parametrize("partition_max", [60, 200, 700])
def test_fetch_size_limits_like_kafka_39(pair, version, partition_max):
    """A partition limit below the first batch: v0-2 have a hard limit (nothing whole fits:
    no messages), v3 sends the first batch whole. Above it, the converted answer is cut at
    the read's size: Trafka's messages are Kafka's, possibly fewer at the end (Kafka's read
    ends inside a batch and counts its bytes; Trafka reads whole batches)."""
    kafka, trafka = (_fetched(a) for a in _both(pair, K.FETCH, version,
                                                 _fetch_body(version, "mixed", 0, partition_max)))
    assert trafka["error_code"] == kafka["error_code"] == E_NONE
    k_msgs, _ = _messages(kafka["records"])
    t_msgs, _ = _messages(trafka["records"])
    assert t_msgs == k_msgs[:len(t_msgs)]
    assert bool(t_msgs) == bool(k_msgs)


@pytest.mark.parametrize("version", [0, 2, 3, 10])
def test_fetch_of_zstd_topic_like_kafka_39(pair, version):
    """compression.type=zstd: a reader before v4 cannot know zstd (UNSUPPORTED_COMPRESSION_TYPE,
    no data, high watermark -1); v10 is served. (Kafka 3.9 refuses v4-9 too; Kafka 4 serves
    them, and Trafka follows the current Kafka for the versions it still has: not compared.)"""
    kafka, trafka = (_fetched(a) for a in _both(pair, K.FETCH, version, _fetch_body(version, "zstd-topic", 0)))
    assert (trafka["error_code"], trafka["high_watermark"]) == (kafka["error_code"], kafka["high_watermark"])
    assert trafka["error_code"] == (E_UNSUPPORTED_COMPRESSION if version < 10 else E_NONE)
    assert bool(trafka["records"]) == bool(kafka["records"])


@pytest.mark.parametrize("version", [1, 3])
@pytest.mark.parametrize("offset", [0, 3, 6])
def test_fetch_of_zstd_batches_like_kafka_39(pair, version, offset):
    """zstd batches cannot be down-converted: first in the read → UNSUPPORTED_COMPRESSION_TYPE;
    after converted ones → those, then overflow entries up to the fixed size."""
    kafka, trafka = (_fetched(a) for a in _both(pair, K.FETCH, version, _fetch_body(version, "zstd-batches", offset)))
    assert trafka["error_code"] == kafka["error_code"]
    assert _messages(trafka["records"]) == _messages(kafka["records"])
    assert trafka["records"] == kafka["records"]


def test_fetch_without_down_conversion_like_kafka_39(pair):
    """message.downconversion.enable=false: an old reader is told UNSUPPORTED_VERSION."""
    for version in (0, 3, 4):
        kafka, trafka = (_fetched(a) for a in _both(pair, K.FETCH, version,
                                                     _fetch_body(version, "no-downconversion", 0)))
        assert (trafka["error_code"], trafka["high_watermark"]) == (kafka["error_code"], kafka["high_watermark"])
        assert trafka["error_code"] == (E_UNSUPPORTED_VERSION if version < 4 else E_NONE)


def test_fetch_unknown_topic_like_kafka_39(pair):
    for version in (0, 3):
        kafka, trafka = (_fetched(a) for a in _both(pair, K.FETCH, version, _fetch_body(version, "nope", 0)))
        assert trafka["error_code"] == kafka["error_code"] == E_UNKNOWN_TOPIC


# ------------------------------------------------------------------ ListOffsets v0


def _list_offsets_v0(topic: str, timestamp: int, max_num: int, partition: int = 0) -> dict:
    return {"replica_id": -1, "topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "timestamp": timestamp, "max_num_offsets": max_num}]}]}


@pytest.mark.parametrize("timestamp,max_num", [(-1, 1), (-1, 10), (-2, 1), (-2, 10), (0, 5),
                                               (4_000_000_000_000, 1), (4_000_000_000_000, 10), (-3, 1)])
def test_list_offsets_v0_like_kafka_39(pair, timestamp, max_num):
    """Old-style offsets: segment boundaries before a time (one segment here: its base, and
    the log end offset stamped now), newest first, up to max_num_offsets."""
    kafka, trafka = (a["topics"][0]["partitions"][0] for a in _both(pair, K.LIST_OFFSETS, 0,
                                                                     _list_offsets_v0("plain", timestamp, max_num)))
    assert (trafka["error_code"], trafka["old_style_offsets"]) == (kafka["error_code"], kafka["old_style_offsets"])


def test_list_offsets_v0_unknown_partition_like_kafka_39(pair):
    kafka, trafka = (a["topics"][0]["partitions"][0] for a in _both(pair, K.LIST_OFFSETS, 0,
                                                                     _list_offsets_v0("plain", -1, 1, partition=7)))
    assert trafka["error_code"] == kafka["error_code"] == E_UNKNOWN_TOPIC


@pytest.mark.parametrize("version,timestamp", [(1, -3), (6, -3), (7, -4), (8, -5), (1, -7)])
def test_list_offsets_special_timestamp_before_its_version_like_kafka_39(pair, version, timestamp):
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "plain", "partitions": [
        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]}
    kafka, trafka = (a["topics"][0]["partitions"][0] for a in _both(pair, K.LIST_OFFSETS, version, body))
    assert trafka["error_code"] == kafka["error_code"] == E_UNSUPPORTED_VERSION


# ------------------------------------------------------------------ offsets of groups


def _commit_body(version: int, group: str, offsets: dict, commit_timestamp: int = -1, retention: int = -1) -> dict:
    return {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "retention_time_ms": retention,
            "topics": [{"name": t, "partitions": [{"partition_index": p, "committed_offset": o,
                                                   "committed_leader_epoch": -1, "commit_timestamp": commit_timestamp,
                                                   "committed_metadata": "m"} for (tt, p), o in offsets.items()
                                                  if tt == t]} for t in sorted({t for t, _ in offsets})]}


def _coordinate(pair, *groups: str) -> None:
    """FindCoordinator until both brokers coordinate the groups (Kafka creates the offsets
    topic on the first one, and answers NOT_COORDINATOR until it is loaded)."""
    for port in pair:
        for group in groups:
            deadline = time.monotonic() + 30
            while raw_request("127.0.0.1", port, K.FIND_COORDINATOR, 1, {"key": group, "key_type": 0})["error_code"]:
                assert time.monotonic() < deadline, f"no coordinator for {group} on {port}"
                time.sleep(0.2)


def _codes(answer: dict) -> dict:
    return {(t["name"], p["partition_index"]): p["error_code"] for t in answer["topics"] for p in t["partitions"]}


def test_offset_commit_v0_without_zookeeper_like_kafka_39(pair):
    """v0 stores in ZooKeeper; without it (KRaft, a single Trafka) a request with a partition
    to store fails whole with UNSUPPORTED_VERSION, one with none gets its per-partition errors."""
    kafka, trafka = _both(pair, K.OFFSET_COMMIT, 0, _commit_body(0, "g0", {("plain", 0): 5, ("nope", 0): 1}))
    assert _codes(trafka) == _codes(kafka) == {("plain", 0): E_UNSUPPORTED_VERSION, ("nope", 0): E_UNSUPPORTED_VERSION}
    kafka, trafka = _both(pair, K.OFFSET_COMMIT, 0, _commit_body(0, "g0", {("nope", 0): 1}))
    assert _codes(trafka) == _codes(kafka) == {("nope", 0): E_UNKNOWN_TOPIC}
    body = {"group_id": "g0", "topics": [{"name": "plain", "partition_indexes": [0]}]}
    kafka, trafka = _both(pair, K.OFFSET_FETCH, 0, body)
    assert trafka["topics"] == kafka["topics"]
    assert _codes(trafka) == {("plain", 0): E_UNSUPPORTED_VERSION}


def _offset_records(port: int) -> list[tuple]:
    """The offset commits in __consumer_offsets (value version, offset, metadata, commit
    and expire timestamps), read with a current Fetch."""
    from server.groups import records as rec
    from wire.records import iter_headers, iter_records

    answer = raw_request("127.0.0.1", port, K.FETCH, 11, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 24, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic": "__consumer_offsets", "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
             "partition_max_bytes": 1 << 20} for p in range(50)]}]})
    out = []
    for part in answer["responses"][0]["partitions"]:
        data = part["records"] or b""
        for pos, header in iter_headers(data):
            if header.is_control:
                continue
            for record in iter_records(data[pos:pos + header.size]):
                key = rec.decode_key(record.key)
                if isinstance(key, rec.OffsetKey) and key.group.startswith("old-") and record.value:
                    v = rec.decode_offset_value(record.value)
                    out.append((key.group, key.topic, key.partition, int.from_bytes(record.value[:2], "big"),
                                v.offset, v.metadata, v.commit_timestamp, v.expire_timestamp))
    return sorted(out)


def test_offset_commit_v1_timestamp_and_v2_retention_like_kafka_39(pair):
    """v1's commit_timestamp is stored as given (offset value v3); v2's retention_time_ms
    gives an expire timestamp of now + it (offset value v1). OffsetFetch v0-1 read them back."""
    given = 1_600_000_000_000
    _coordinate(pair, "old-v1", "old-v1-now", "old-v2", "old-v2-default")
    before = int(time.time() * 1000)
    for version, group, kwargs in [(1, "old-v1", {"commit_timestamp": given}), (1, "old-v1-now", {}),
                                   (2, "old-v2", {"retention": 3_600_000}), (2, "old-v2-default", {})]:
        kafka, trafka = _both(pair, K.OFFSET_COMMIT, version, _commit_body(version, group, {("plain", 0): 7}, **kwargs))
        assert _codes(trafka) == _codes(kafka) == {("plain", 0): E_NONE}
        body = {"group_id": group, "topics": [{"name": "plain", "partition_indexes": [0]}]}
        kafka, trafka = _both(pair, K.OFFSET_FETCH, 1, body)
        assert trafka["topics"] == kafka["topics"]
    after = int(time.time() * 1000)
    kafka, trafka = _offset_records(pair[0]), _offset_records(pair[1])
    assert [r[:6] for r in trafka] == [r[:6] for r in kafka] == [
        ("old-v1", "plain", 0, 3, 7, "m"), ("old-v1-now", "plain", 0, 3, 7, "m"),
        ("old-v2", "plain", 0, 1, 7, "m"), ("old-v2-default", "plain", 0, 3, 7, "m")]
    for records in (kafka, trafka):
        by_group = {r[0]: r[6:] for r in records}
        assert by_group["old-v1"] == (given, -1)
        assert before <= by_group["old-v1-now"][0] <= after and by_group["old-v1-now"][1] == -1
        commit, expire = by_group["old-v2"]
        assert before <= commit <= after and expire == commit + 3_600_000


# ------------------------------------------------------------------ admin


def test_create_and_delete_topics_v0_v1_like_kafka_39(pair):
    def create(version, names, validate_only=False):
        body = {"topics": [{"name": n, "num_partitions": 2, "replication_factor": 1, "assignments": [],
                            "configs": []} for n in names], "timeout_ms": 30000, "validate_only": validate_only}
        kafka, trafka = _both(pair, K.CREATE_TOPICS, version, body)
        codes = [{t["name"]: t["error_code"] for t in a["topics"]} for a in (kafka, trafka)]
        assert codes[1] == codes[0], (kafka, trafka)
        if version >= 1:
            assert [bool(t.get("error_message")) for t in trafka["topics"]] == \
                [bool(t.get("error_message")) for t in kafka["topics"]]
        return codes[1]

    assert create(0, ["old-created-0", "plain", "bad/name"]) == {"old-created-0": 0, "plain": 36, "bad/name": 17}
    assert create(1, ["old-created-1"], validate_only=True) == {"old-created-1": 0}
    assert create(1, ["old-created-1"]) == {"old-created-1": 0}
    for version in (0, 1):
        kafka, trafka = _both(pair, K.DELETE_TOPICS, version,
                              {"topic_names": [f"old-created-{version}", "never-was"], "timeout_ms": 30000})
        assert {r["name"]: r["error_code"] for r in trafka["responses"]} == \
            {r["name"]: r["error_code"] for r in kafka["responses"]} == {f"old-created-{version}": 0, "never-was": 3}


def test_describe_configs_v0_like_kafka_39(pair):
    keys = ["retention.ms", "cleanup.policy", "message.timestamp.type", "compression.type"]
    body = {"resources": [{"resource_type": 2, "resource_name": "append-time", "configuration_keys": keys}]}
    kafka, trafka = _both(pair, K.DESCRIBE_CONFIGS, 0, body)

    def entries(answer):
        result = answer["results"][0]
        return result["error_code"], sorted((c["name"], c["value"], c["read_only"], c["is_default"], c["is_sensitive"])
                                            for c in result["configs"])

    assert entries(trafka) == entries(kafka)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_offset_for_leader_epoch_old_versions_like_kafka_39(pair, version):
    body = {"replica_id": -2, "topics": [{"topic": "plain", "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}, {"partition": 9, "current_leader_epoch": -1,
                                                                        "leader_epoch": 0}]}]}
    kafka, trafka = _both(pair, K.OFFSET_FOR_LEADER_EPOCH, version, body)

    def ends(answer):
        return {p["partition"]: (p["error_code"], p["end_offset"]) for t in answer["topics"] for p in t["partitions"]}

    assert ends(trafka) == ends(kafka)


def test_describe_log_dirs_v0_like_kafka_39(pair):
    body = {"topics": [{"topic": "plain", "partitions": [0]}]}
    kafka, trafka = _both(pair, K.DESCRIBE_LOG_DIRS, 0, body)

    def sizes(answer):
        return [(r["error_code"], [(t["name"], [(p["partition_index"], p["partition_size"] > 0) for p in t["partitions"]])
                                   for t in r["topics"]]) for r in answer["results"]]

    assert sizes(trafka) == sizes(kafka)


# ------------------------------------------------------------------ ApiVersions


def test_every_version_kafka_39_serves_is_served(pair):
    """For every API Trafka implements, the advertised range covers Kafka 3.9's (a few go
    further, where a stock client needs a later version)."""
    body = {"client_software_name": "tests", "client_software_version": "1"}
    kafka, trafka = _both(pair, K.API_VERSIONS, 3, body)
    k_ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in kafka["api_keys"]}
    t_ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in trafka["api_keys"]}
    narrower = {key: (t_ranges[key], k_ranges[key]) for key in t_ranges if key in k_ranges
                and not (t_ranges[key][0] <= k_ranges[key][0] and t_ranges[key][1] >= k_ranges[key][1])}
    assert narrower == {}
    assert all(lo == 0 for lo, _hi in t_ranges.values())
    assert t_ranges == {k: v for k, v in API_VERSIONS.items()}


# ------------------------------------------------------------------ ZooKeeper mode: OffsetCommit/OffsetFetch v0


@pytest.fixture(scope="module")
def zk_pair(tmp_path_factory):
    """(Kafka 3.9 in ZooKeeper mode, Trafka in a one-broker cluster): ports and the
    ZooKeeper connect strings (chroots) they keep their znodes under."""
    from cli.zookeeper_server import ZooKeeperServer
    from tests.old_clients.kafka39 import Kafka39ZkBroker

    kafka = started(lambda: Kafka39ZkBroker(tmp_path_factory.mktemp("kafka39-zk")))
    zk = ZooKeeperServer(data_dir=tmp_path_factory.mktemp("zk"))
    trafka = None
    try:
        zk.start()
        trafka_zk = zk.chroot_connect_string("trafka")
        trafka = BrokerProcess(tmp_path_factory.mktemp("trafka-zk"), "--node-id", "1",
                               "--set", f"zookeeper.connect={trafka_zk}", "--set", "offsets.topic.num.partitions=1",
                               "--set", "offsets.topic.replication.factor=1", "--set", "default.replication.factor=1",
                               "--set", "min.insync.replicas=1")
        trafka.start()
        for port in (kafka.port, trafka.port):
            body = {"topics": [{"name": "zk-plain", "num_partitions": 2, "replication_factor": 1, "assignments": [],
                                "configs": []}], "timeout_ms": 30000, "validate_only": False}
            assert raw_request("127.0.0.1", port, K.CREATE_TOPICS, 4, body)["topics"][0]["error_code"] == 0
            deadline = time.monotonic() + 30
            while raw_request("127.0.0.1", port, K.METADATA, 1, {"topics": [{"name": "zk-plain"}]}
                              )["topics"][0]["partitions"][0]["leader_id"] < 0:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        yield (kafka.port, trafka.port), (kafka.zk_connect, trafka_zk)
    finally:
        if trafka is not None:
            trafka.kill()
        kafka.stop()
        zk.stop()


def _znode(connect: str, path: str) -> bytes | None:
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoNodeError

    client = KazooClient(hosts=connect)
    client.start(timeout=15)
    try:
        return client.get(path)[0]
    except NoNodeError:
        return None
    finally:
        client.stop()
        client.close()


def test_offset_commit_and_fetch_v0_in_zookeeper_like_kafka_39(zk_pair):
    """v0 keeps the offset in /consumers/<group>/offsets/<topic>/<partition> (decimal), apart
    from the group coordinator: OffsetFetch v0 reads it back, v1 does not see it; a partition
    without a znode reads UNKNOWN_TOPIC_OR_PARTITION, an unknown one too."""
    pair, connects = zk_pair
    kafka, trafka = _both(pair, K.OFFSET_COMMIT, 0, _commit_body(0, "zk-group", {("zk-plain", 0): 42, ("nope", 0): 1}))
    assert _codes(trafka) == _codes(kafka) == {("zk-plain", 0): E_NONE, ("nope", 0): E_UNKNOWN_TOPIC}
    kafka, trafka = _both(pair, K.OFFSET_COMMIT, 0, _commit_body(0, "zk-group", {("zk-plain", 0): 43}))
    assert _codes(trafka) == _codes(kafka) == {("zk-plain", 0): E_NONE}
    assert [_znode(c, "/consumers/zk-group/offsets/zk-plain/0") for c in connects] == [b"43", b"43"]

    body = {"group_id": "zk-group", "topics": [{"name": "zk-plain", "partition_indexes": [0, 1]},
                                               {"name": "nope", "partition_indexes": [0]}]}
    kafka, trafka = _both(pair, K.OFFSET_FETCH, 0, body)

    def fetched(answer):
        return {(t["name"], p["partition_index"]): (p["committed_offset"], p["metadata"], p["error_code"])
                for t in answer["topics"] for p in t["partitions"]}

    assert fetched(trafka) == fetched(kafka) == {("zk-plain", 0): (43, "", E_NONE),
                                                 ("zk-plain", 1): (-1, "", E_UNKNOWN_TOPIC),
                                                 ("nope", 0): (-1, "", E_UNKNOWN_TOPIC)}
    _coordinate(pair, "zk-group")
    kafka, trafka = _both(pair, K.OFFSET_FETCH, 1, body)
    assert {k: v[0] for k, v in fetched(trafka).items()} == {k: v[0] for k, v in fetched(kafka).items()} == {
        ("zk-plain", 0): -1, ("zk-plain", 1): -1, ("nope", 0): -1}


# ------------------------------------------------------------------ Produce v0-2


def _legacy_set(magic: int, codec: int, n: int, tag: str) -> bytes:
    """A producer's message set: placeholder offsets from 0; a compressed one as one wrapper
    (magic 1: relative inner offsets, the wrapper at the last), as Kafka's producers built them."""
    from wire.legacy import _compress_legacy, encode_message

    messages = [encode_message(i, magic, 0, T0 + i if magic else -1, f"k{i}".encode() if i % 2 else None,
                               f"{tag}-{i}".encode()) for i in range(n)]
    if not codec:
        return b"".join(messages)
    return encode_message(n - 1 if magic else 0, magic, codec, T0 + n - 1 if magic else -1, None,
                          _compress_legacy(codec, b"".join(messages), magic))


def _stored(port: int, topic: str) -> list[tuple]:
    """What the log holds, read with Fetch v4: each batch's header facts and its records."""
    from wire.records import iter_headers, iter_records

    answer = raw_request("127.0.0.1", port, K.FETCH, 4, _fetch_body(4, topic, 0))
    data = _fetched(answer)["records"] or b""
    out = []
    for pos, header in iter_headers(data):
        records = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(data[pos:pos + header.size])]
        out.append((header.base_offset, header.last_offset_delta, header.compression, header.is_log_append_time,
                    header.record_count, header.max_timestamp, header.producer_id, records))
    return out


@pytest.mark.parametrize("version,magic,codec", [(0, 0, 0), (0, 0, compression.GZIP), (1, 0, 0), (1, 1, 0),
                                                 (2, 1, 0), (2, 1, compression.GZIP), (2, 1, compression.SNAPPY),
                                                 (2, 1, compression.LZ4)])
def test_produce_legacy_message_sets_like_kafka_39(pair, version, magic, codec):
    """Produce v0-2 carry magic 0/1 message sets; Kafka 3.9 stores them as magic 2 batches,
    numbered from the log end. Same answers, same stored records."""
    topic = f"legacy-{version}-{magic}-{codec}"
    for port in pair:
        body = {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                            "configs": [{"name": k, "value": v} for k, v in KEEP.items()]}],
                "timeout_ms": 30000, "validate_only": False}
        assert raw_request("127.0.0.1", port, K.CREATE_TOPICS, 4, body)["topics"][0]["error_code"] == 0
    answers = [[_produce(port, topic, _legacy_set(magic, codec, 3 + i, f"p{i}"), version)
                ["responses"][0]["partition_responses"][0] for i in range(2)] for port in pair]
    facts = [[(a["error_code"], a["base_offset"], a.get("log_append_time_ms", -1)) for a in side] for side in answers]
    assert facts[1] == facts[0] == [(0, 0, -1), (0, 3, -1)]
    kafka, trafka = (_stored(port, topic) for port in pair)
    assert sum(len(b[7]) for b in kafka) == 7
    assert [b[7] for b in trafka] == [b[7] for b in kafka]
    assert [b[:7] for b in trafka] == [b[:7] for b in kafka]
