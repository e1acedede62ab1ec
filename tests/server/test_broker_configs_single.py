"""Dynamic broker configs (KIP-226) on a single broker: AlterConfigs and
IncrementalAlterConfigs on BROKER resources (this broker's id, and "" for the cluster-wide
default) are accepted as Kafka accepts them, applied at once, kept in the data directory
(`config/brokers/<id>`, `config/brokers/<default>`, ZooKeeper mode's JSON) and applied
again after a restart; DescribeConfigs shows their sources and synonyms. The answers were
compared with a Kafka 4.4 node given the same requests (see README: dynamic broker
configs). Before: every BROKER alter on a single broker was INVALID_REQUEST "dynamic broker
configs are not supported", which failed librdkafka's own 0081_admin test."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.brokerproc import REPO, BrokerProcess, raw_request
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)

BROKER = 4
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 3, 4, 5
NONE, INVALID_CONFIG, INVALID_REQUEST = 0, 40, 42
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def alter(broker, name: str, configs: dict[str, str | None], validate_only: bool = False) -> tuple[int, str | None]:
    """Legacy AlterConfigs v2 of one BROKER resource: the whole set of its overrides."""
    body = {"resources": [{"resource_type": BROKER, "resource_name": name,
                           "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "validate_only": validate_only}
    [response] = raw_request("127.0.0.1", broker.port, ApiKey.ALTER_CONFIGS, 2, body)["responses"]
    return response["error_code"], response["error_message"]


def incremental(broker, name: str, ops: list[tuple[str, int, str | None]],
                validate_only: bool = False) -> tuple[int, str | None]:
    body = {"resources": [{"resource_type": BROKER, "resource_name": name, "configs": [
        {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}], "validate_only": validate_only}
    [response] = raw_request("127.0.0.1", broker.port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"]
    return response["error_code"], response["error_message"]


def describe(broker, name: str, keys: list[str] | None) -> dict[str, dict]:
    body = {"resources": [{"resource_type": BROKER, "resource_name": name, "configuration_keys": keys}],
            "include_synonyms": True, "include_documentation": False}
    [result] = raw_request("127.0.0.1", broker.port, ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
    assert result["error_code"] == NONE, result
    return {c["name"]: c for c in result["configs"]}


def chain(entry: dict) -> list[tuple[str | None, int]]:
    return [(s["value"], s["source"]) for s in entry["synonyms"]]


def topic_value(broker, topic: str, key: str) -> tuple[str, int]:
    body = {"resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": [key]}],
            "include_synonyms": False, "include_documentation": False}
    [result] = raw_request("127.0.0.1", broker.port, ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
    [entry] = result["configs"]
    return entry["value"], entry["config_source"]


def produce_error(broker, topic: str, size: int) -> KafkaError | None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 10_000_000,
                         "message.send.max.retries": 0})
    errors: list = []
    producer.produce(topic, value=b"x" * size, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    return errors[0]


@pytest.fixture
def broker(tmp_path):
    with BrokerProcess(tmp_path / "data", "--set", "log.segment.bytes=50000000") as b:
        yield b


def test_alters_apply_at_once_survive_a_restart_and_are_described_as_kafka(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"dyn-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    assert topic_value(broker, topic, "retention.ms") == ("604800000", DEFAULT_CONFIG)

    # the cluster-wide default, then this broker's own value on top
    assert incremental(broker, "", [("log.retention.ms", SET, "3600000"), ("message.max.bytes", SET, "2000")]) \
        == (NONE, None)
    assert incremental(broker, "1", [("log.retention.ms", SET, "7200000")]) == (NONE, None)
    # applied without a restart: the topic inherits it, a produce over the new limit fails
    assert topic_value(broker, topic, "retention.ms") == ("7200000", DYNAMIC_BROKER_CONFIG)
    assert produce_error(broker, topic, 5000).code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert produce_error(broker, topic, 100) is None

    own = describe(broker, "1", ["log.retention.ms", "log.segment.bytes", "message.max.bytes", "log.dirs"])
    assert (own["log.retention.ms"]["value"], own["log.retention.ms"]["config_source"]) == (
        "7200000", DYNAMIC_BROKER_CONFIG)
    assert chain(own["log.retention.ms"]) == [("7200000", DYNAMIC_BROKER_CONFIG),
                                              ("3600000", DYNAMIC_DEFAULT_BROKER_CONFIG),
                                              ("604800000", DEFAULT_CONFIG)]
    assert (own["message.max.bytes"]["value"], own["message.max.bytes"]["config_source"]) == (
        "2000", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert own["log.segment.bytes"]["config_source"] == STATIC_BROKER_CONFIG
    # Kafka: a dynamic setting is read-write, a static one read-only
    assert not own["log.retention.ms"]["read_only"] and not own["log.segment.bytes"]["read_only"]
    assert own["log.dirs"]["read_only"]
    default = describe(broker, "", None)
    assert {n: (c["value"], c["config_source"]) for n, c in default.items()} == {
        "log.retention.ms": ("3600000", DYNAMIC_DEFAULT_BROKER_CONFIG),
        "message.max.bytes": ("2000", DYNAMIC_DEFAULT_BROKER_CONFIG)}

    # kept in the data directory as ZooKeeper mode keeps /config/brokers/<entity>
    stored = broker.data_dir / "config" / "brokers"
    assert json.loads((stored / "1").read_text()) == {"version": 1, "config": {"log.retention.ms": "7200000"}}
    assert json.loads((stored / "<default>").read_text()) == {
        "version": 1, "config": {"log.retention.ms": "3600000", "message.max.bytes": "2000"}}

    broker.restart()
    assert topic_value(broker, topic, "retention.ms") == ("7200000", DYNAMIC_BROKER_CONFIG)
    assert produce_error(broker, topic, 5000).code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert describe(broker, "", None)["message.max.bytes"]["value"] == "2000"

    # DELETE falls back a layer; legacy AlterConfigs replaces the entity's whole set
    assert incremental(broker, "1", [("log.retention.ms", DELETE, None)]) == (NONE, None)
    assert topic_value(broker, topic, "retention.ms") == ("3600000", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert alter(broker, "", {"log.retention.ms": "1800000"}) == (NONE, None)
    assert json.loads((stored / "<default>").read_text())["config"] == {"log.retention.ms": "1800000"}
    assert produce_error(broker, topic, 5000) is None  # message.max.bytes is back to its default
    # validate_only changes nothing
    assert alter(broker, "", {"log.retention.ms": "1000"}, validate_only=True) == (NONE, None)
    assert topic_value(broker, topic, "retention.ms") == ("1800000", DYNAMIC_DEFAULT_BROKER_CONFIG)

    # what the confluent-kafka AdminClient sees (librdkafka's 0081 sets this Kerberos setting)
    resource = ConfigResource(ConfigResource.Type.BROKER, "1",
                              set_config={"sasl.kerberos.min.time.before.relogin": "58000"})
    assert admin.alter_configs([resource])[resource].result(30) is None
    resource = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry("log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    assert admin.incremental_alter_configs([resource])[resource].result(30) is None
    assert describe(broker, "1", ["log.cleanup.policy"])["log.cleanup.policy"]["value"] == "delete,compact"


def test_what_kafka_refuses_and_what_it_keeps(broker):
    # static settings: Kafka's INVALID_REQUEST "Cannot update these configs dynamically"
    for name, value in (("log.dirs", "/tmp/elsewhere"), ("broker.id", "7"), ("num.partitions", "3")):
        code, message = incremental(broker, "1", [(name, SET, value)])
        assert code == INVALID_REQUEST and "Cannot update these configs dynamically" in message, message
        assert alter(broker, "", {name: value})[0] == INVALID_REQUEST
    assert incremental(broker, "1", [("log.dirs", DELETE, None)]) == (NONE, None)  # nothing to delete, as Kafka
    assert incremental(broker, "1", [("log.retention.ms", SET, "soon")]) == (
        INVALID_REQUEST, "Invalid value soon for configuration log.retention.ms: Not a number of type LONG")
    assert incremental(broker, "1", [("log.retention.ms", SET, None)]) == (
        INVALID_REQUEST, "Null value not supported for : log.retention.ms")
    assert incremental(broker, "1", [("log.retention.ms", APPEND, "5")]) == (
        INVALID_CONFIG, "Config value append is not allowed for config key: log.retention.ms")
    assert incremental(broker, "7", [("log.retention.ms", SET, "5")])[0] == INVALID_REQUEST  # another broker
    stored = broker.data_dir / "config" / "brokers" / "1"
    assert json.loads(stored.read_text())["config"] == {}  # only the DELETE was stored

    # a name the broker has no setting for is kept as a custom config, as Kafka keeps it:
    # described read-only and sensitive, its value hidden
    assert incremental(broker, "1", [("custom.plugin.setting", SET, "secret-ish")]) == (NONE, None)
    entry = describe(broker, "1", ["custom.plugin.setting"])["custom.plugin.setting"]
    assert (entry["value"], entry["config_source"], entry["read_only"], entry["is_sensitive"]) == (
        None, DYNAMIC_BROKER_CONFIG, True, True)
    assert "custom.plugin.setting" in describe(broker, "1", None)
    assert incremental(broker, "1", [("custom.plugin.setting", DELETE, None)]) == (NONE, None)
    assert "custom.plugin.setting" not in describe(broker, "1", None)


def test_an_unreadable_store_stops_the_start(tmp_path):
    """The stored settings were acknowledged: a broker does not quietly start without them."""
    data = tmp_path / "data"
    (data / "config" / "brokers").mkdir(parents=True)
    (data / "config" / "brokers" / "<default>").write_text("{not json")
    done = subprocess.run([sys.executable, "-m", "server", "serve", "--listen", "127.0.0.1:0", "--data-dir", str(data),
                           "--set", "http.listeners="], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr, done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("trafka: ")]
    assert line.startswith(f"trafka: log.dirs={data}: its dynamic broker configs ") and "<default>" in line, line
