"""Invalid operations get the error code a real Kafka broker gives, and change nothing.

Driven through real clients where the client surfaces the broker's code (confluent-kafka's
AdminClient and delivery reports, kafka-python's admin exceptions), and with raw frames
where no client can send the request (negative fetch offsets, corrupt CRCs, odd acks).
Codes are Kafka's: INVALID_TOPIC_EXCEPTION 17, INVALID_PARTITIONS 37,
INVALID_REPLICATION_FACTOR 38, INVALID_CONFIG 40, OFFSET_OUT_OF_RANGE 1, CORRUPT_MESSAGE 2,
MESSAGE_TOO_LARGE 10, INVALID_REQUIRED_ACKS 21.
"""

from __future__ import annotations

import uuid

import pytest

from hardening_kit import (
    alive,
    closed_by_peer,
    connect,
    create_topic,
    fetch,
    fetch_body,
    make_batch,
    produce,
    produce_body,
    roundtrip,
)
from tests.brokerproc import BrokerProcess
from wire import ApiKey, encode_request
from wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("invalid") / "data") as proc:
        yield proc
        assert alive(proc)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


BAD_TOPICS = [
    # (description, name, partitions, replication factor, configs, expected code)
    ("bad characters", "bad name!", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("slash", "a/b", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("non-ascii", "caf\u00e9", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("dot", ".", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("dot dot", "..", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("250 characters", "a" * 250, 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("zero partitions", None, 0, 1, {}, ErrorCode.INVALID_PARTITIONS),
    ("replication factor 3", None, 1, 3, {}, ErrorCode.INVALID_REPLICATION_FACTOR),
    ("unknown config", None, 1, 1, {"foo.bar": "1"}, ErrorCode.INVALID_CONFIG),
    ("config value not a number", None, 1, 1, {"retention.ms": "abc"}, ErrorCode.INVALID_CONFIG),
    ("config value not allowed", None, 1, 1, {"cleanup.policy": "shred"}, ErrorCode.INVALID_CONFIG),
]
RAW_ONLY = [  # names and numbers the clients refuse to send
    ("NUL", "nul\x00byte", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("empty name", "", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("negative partitions", None, -5, 1, {}, ErrorCode.INVALID_PARTITIONS),
    ("replication factor 0", None, 1, 0, {}, ErrorCode.INVALID_REPLICATION_FACTOR),
    ("replication factor -2", None, 1, -2, {}, ErrorCode.INVALID_REPLICATION_FACTOR),
]


KP_CASES = [c for c in BAD_TOPICS if c[0] in ("bad characters", "zero partitions", "replication factor 3",
                                              "unknown config")]


def _topic_exists(port: int, name: str) -> bool:
    meta = roundtrip(port, ApiKey.METADATA, 9, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
    return meta["topics"][0]["error_code"] == ErrorCode.NONE


@pytest.mark.parametrize("case", BAD_TOPICS, ids=[c[0] for c in BAD_TOPICS])
def test_create_topic_errors_confluent_admin(broker, case):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    _desc, name, partitions, replication, configs, code = case
    name = name if name is not None else _name("cf")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    future = admin.create_topics([NewTopic(name, partitions, replication, config=configs)],
                                 request_timeout=10)[name]
    with pytest.raises(KafkaException) as info:
        future.result(15)
    assert info.value.args[0].code() == code
    if code != ErrorCode.INVALID_TOPIC_EXCEPTION:
        assert not _topic_exists(broker.port, name)


@pytest.mark.parametrize("case", KP_CASES, ids=[c[0] for c in KP_CASES])
def test_create_topic_errors_kafka_python_admin(broker, case):
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import KafkaError

    _desc, name, partitions, replication, configs, code = case
    name = name if name is not None else _name("kp")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        with pytest.raises(KafkaError) as info:
            admin.create_topics([NewTopic(name, partitions, replication, topic_configs=configs)])
        assert info.value.errno == code
    finally:
        admin.close()


@pytest.mark.parametrize("version", [2, 5, 7])
@pytest.mark.parametrize("case", BAD_TOPICS + RAW_ONLY, ids=[c[0] for c in BAD_TOPICS + RAW_ONLY])
def test_create_topic_errors_raw(broker, case, version):
    _desc, name, partitions, replication, configs, code = case
    name = name if name is not None else _name("raw")
    for validate_only in (True, False):
        body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": replication,
                            "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                "timeout_ms": 5000, "validate_only": validate_only}
        result = roundtrip(broker.port, ApiKey.CREATE_TOPICS, version, body)["topics"][0]
        assert result["error_code"] == code, result
        if version >= 1:
            assert result["error_message"], "an error without a message"


def test_longest_topic_name_works(broker):
    """249 characters is legal in Kafka: create, produce, fetch and delete all work."""
    name = "b" * 249
    result = roundtrip(broker.port, ApiKey.CREATE_TOPICS, 5,
                       {"topics": [{"name": name, "num_partitions": 12, "replication_factor": 1}],
                        "timeout_ms": 5000})["topics"][0]
    assert result["error_code"] == ErrorCode.NONE, result
    assert _topic_exists(broker.port, name)
    assert produce(broker.port, name, 11, bytes(make_batch([b"long"])))["error_code"] == ErrorCode.NONE
    assert fetch(broker.port, name, 11, 0)["high_watermark"] == 1
    deleted = roundtrip(broker.port, ApiKey.DELETE_TOPICS, 4, {"topic_names": [name], "timeout_ms": 5000})
    assert deleted["responses"][0]["error_code"] == ErrorCode.NONE
    assert not _topic_exists(broker.port, name)


def test_create_partitions_cannot_shrink(broker):
    name = _name("shrink")
    create_topic(broker.port, name, partitions=3)
    for count in (3, 2, 0, -1):
        result = roundtrip(broker.port, ApiKey.CREATE_PARTITIONS, 1,
                           {"topics": [{"name": name, "count": count, "assignments": None}],
                            "timeout_ms": 5000, "validate_only": False})["results"][0]
        assert result["error_code"] == ErrorCode.INVALID_PARTITIONS, (count, result)


# --------------------------------------------------------------------------- produce


def _hw(port: int, topic: str, partition: int = 0) -> int:
    return fetch(port, topic, partition, 0)["high_watermark"]


def test_produce_to_internal_topic(broker):
    import confluent_kafka as ck

    reports = []
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 10000})
    producer.produce("__consumer_offsets", b"x", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(15)
    assert len(reports) == 1 and reports[0] is not None
    assert reports[0].code() == ErrorCode.INVALID_TOPIC_EXCEPTION

    hw = _hw(broker.port, "__consumer_offsets")
    part = produce(broker.port, "__consumer_offsets", 0, bytes(make_batch([b"x"])))
    assert part["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert _hw(broker.port, "__consumer_offsets") == hw

    # acks=0 has no response: the broker tells the producer by closing the connection.
    with connect(broker.port) as sock:
        sock.sendall(encode_request(ApiKey.PRODUCE, 9, 1,
                                    produce_body("__consumer_offsets", 0, bytes(make_batch([b"x"])), acks=0)))
        assert closed_by_peer(sock, 5)


def _corruptions() -> list[tuple[str, bytes]]:
    good = make_batch([b"value-%d" % i for i in range(5)])
    flipped = bytearray(good)
    flipped[-3] ^= 0x40  # inside the last record: covered by the CRC
    bad_crc = bytearray(good)
    bad_crc[17:21] = b"\x00\x00\x00\x00"
    attributes = bytearray(good)
    attributes[22] ^= 0x01  # attributes byte is under the CRC too
    truncated = bytes(good[:-4])
    return [("record byte flipped", bytes(flipped)), ("crc zeroed", bytes(bad_crc)),
            ("attributes changed", bytes(attributes)), ("batch cut short", truncated)]


@pytest.mark.parametrize("what,records", _corruptions(), ids=[c[0] for c in _corruptions()])
def test_produce_corrupt_batch(broker, what, records):
    topic = _name("crc")
    create_topic(broker.port, topic)
    part = produce(broker.port, topic, 0, records)
    assert part["error_code"] == ErrorCode.CORRUPT_MESSAGE, (what, part)
    assert _hw(broker.port, topic) == 0
    # The partition is unharmed: a good batch lands at offset 0.
    ok = produce(broker.port, topic, 0, bytes(make_batch([b"good"])))
    assert ok["error_code"] == ErrorCode.NONE and ok["base_offset"] == 0


def test_produce_batch_over_max_message_bytes(broker):
    topic = _name("small")
    create_topic(broker.port, topic, configs={"max.message.bytes": "1024"})
    part = produce(broker.port, topic, 0, bytes(make_batch([b"x" * 2000])))
    assert part["error_code"] == ErrorCode.MESSAGE_TOO_LARGE
    assert _hw(broker.port, topic) == 0

    import confluent_kafka as ck

    reports = []
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 10000, "linger.ms": 0})
    producer.produce(topic, b"y" * 5000, on_delivery=lambda err, msg: reports.append(err))
    producer.flush(15)  # alone in its batch: a batch holding both would be refused whole
    producer.produce(topic, b"small", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(15)
    codes = sorted(err.code() if err is not None else 0 for err in reports)
    assert codes == [0, ErrorCode.MESSAGE_TOO_LARGE]


@pytest.mark.parametrize("acks", [2, 5, -2, 32767, -32768])
def test_produce_invalid_acks(broker, acks):
    topic = _name("acks")
    create_topic(broker.port, topic)
    part = produce(broker.port, topic, 0, bytes(make_batch([b"x"])), acks=acks)
    assert part["error_code"] == ErrorCode.INVALID_REQUIRED_ACKS
    assert _hw(broker.port, topic) == 0


def test_produce_invalid_acks_confluent(broker):
    import confluent_kafka as ck

    topic = _name("acks-cf")
    create_topic(broker.port, topic)
    reports = []
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": 2, "message.timeout.ms": 10000})
    producer.produce(topic, b"x", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(15)
    assert len(reports) == 1 and reports[0] is not None
    assert reports[0].code() == ErrorCode.INVALID_REQUIRED_ACKS


def test_produce_unknown_partition(broker):
    topic = _name("parts")
    create_topic(broker.port, topic, partitions=2)
    for index in (2, 99, -1):
        part = produce(broker.port, topic, index, bytes(make_batch([b"x"])))
        assert part["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, (index, part)


# --------------------------------------------------------------------------- fetch


@pytest.mark.parametrize("offset", [-1, -2, -1000, -(1 << 63), 4, 1 << 40])
def test_fetch_out_of_range(broker, offset):
    topic = _name("oor")
    create_topic(broker.port, topic)
    assert produce(broker.port, topic, 0, bytes(make_batch([b"a", b"b", b"c"])))["error_code"] == 0
    body = roundtrip(broker.port, ApiKey.FETCH, 12, fetch_body(topic, 0, offset, max_wait_ms=0))
    part = body["responses"][0]["partitions"][0]
    assert part["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    # Kafka 4.4 answers a consumer's failed read with no offsets at all (ReplicaManager's
    # failed LogReadResult: high watermark, last stable offset and log start all -1).
    offsets = (part["high_watermark"], part["last_stable_offset"], part["log_start_offset"])
    assert offsets == (-1, -1, -1)
    assert not part["records"]
    # The refused read changed nothing: the partition still holds its three records.
    part = fetch(broker.port, topic, 0, 0)
    assert (part["error_code"], part["high_watermark"], part["log_start_offset"]) == (ErrorCode.NONE, 3, 0)


def test_fetch_at_log_end_is_not_an_error(broker):
    topic = _name("end")
    create_topic(broker.port, topic)
    produce(broker.port, topic, 0, bytes(make_batch([b"a"])))
    part = fetch(broker.port, topic, 0, 1)
    assert part["error_code"] == ErrorCode.NONE and not part["records"]
