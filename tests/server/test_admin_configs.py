"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs against a real broker process.

Driven by kafka-python's KafkaAdminClient and confluent-kafka's AdminClient over loopback,
plus raw requests (built with wire/) for the versions and fields no client exposes
(DescribeConfigs v1-4 documentation/config_type, broker-logger resources, exact error
codes where kafka-python swallows them). The broker is started with two settings given
on the command line, so STATIC_BROKER_CONFIG and DEFAULT_CONFIG sources both show up.
"""

from __future__ import annotations

import uuid

import pytest

from tests.brokerproc import raw_request
from confluent_kafka import KafkaError as CKError
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KPConfigResource
from kafka.admin import ConfigResourceType, NewTopic as KPNewTopic

from compat_tests.brokers import TrafkaBroker

pytestmark = pytest.mark.timeout(120)

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, DYNAMIC_BROKER_LOGGER_CONFIG = 1, 4, 5, 6
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION = 0, 3, 17
INVALID_CONFIG, INVALID_REQUEST = 40, 42
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

STATIC_RETENTION = "86400000"  # given as --set log.retention.ms: STATIC_BROKER_CONFIG



@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    TrafkaBroker.check_available()
    b = TrafkaBroker(tmp_path_factory.mktemp("admin-configs"),
                     extra_args=["--set", f"log.retention.ms={STATIC_RETENTION}", "--set", "made.up.setting=7",
                                 "--log-level", "DEBUG"])
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def kp(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="admin-configs-kp",
                              request_timeout_ms=10000)
    yield client
    client.close()


@pytest.fixture(scope="module")
def ck(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap, "client.id": "admin-configs-ck"})


def raw(broker, api_key: int, version: int, body: dict) -> dict:
    return raw_request(broker.host, broker.port, api_key, version, body, client_id="admin-configs-raw")


def new_topic(ck, configs: dict[str, str] | None = None, partitions: int = 1) -> str:
    name = f"cfg-{uuid.uuid4().hex[:10]}"
    ck.create_topics([NewTopic(name, partitions, 1, config=configs or {})])[name].result(timeout=15)
    return name


def describe_raw(broker, resources: list[tuple[int, str, list[str] | None]], version: int = 4,
                 synonyms: bool = False, documentation: bool = False) -> list[dict]:
    body = {"resources": [{"resource_type": t, "resource_name": n, "configuration_keys": k} for t, n, k in resources],
            "include_synonyms": synonyms, "include_documentation": documentation}
    return raw(broker, DESCRIBE_CONFIGS, version, body)["results"]


def topic_configs(broker, name: str, keys: list[str] | None = None, **kw) -> dict[str, dict]:
    [result] = describe_raw(broker, [(TOPIC, name, keys)], **kw)
    assert result["error_code"] == NONE, result
    return {c["name"]: c for c in result["configs"]}


def ck_describe(ck, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    return ck.describe_configs([resource])[resource].result(timeout=15)


def ck_error(future) -> CKError:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=15)
    return info.value.args[0]


# ------------------------------------------------------------------ DescribeConfigs


def test_describe_topic_sources_kafka_python(broker, kp, ck):
    name = new_topic(ck, {"cleanup.policy": "compact", "min.insync.replicas": "1"})
    got = kp.describe_configs([KPConfigResource(ConfigResourceType.TOPIC, name)], include_synonyms=True,
                              config_filter="all")
    configs = got["topic"][name]
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["min.insync.replicas"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["retention.ms"]["value"] == STATIC_RETENTION
    assert configs["retention.ms"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert configs["segment.bytes"]["value"] == "1073741824"
    assert configs["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert configs["max.message.bytes"]["read_only"] is False
    # The synonym chain, most specific first: the topic override, then log.cleanup.policy's default.
    chain = [(s["name"], s["value"], s["source"]) for s in configs["cleanup.policy"]["synonyms"]]
    assert chain == [("cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG"),
                     ("log.cleanup.policy", "delete", "DEFAULT_CONFIG")]
    chain = [(s["name"], s["value"], s["source"]) for s in configs["retention.ms"]["synonyms"]]
    assert chain == [("log.retention.ms", STATIC_RETENTION, "STATIC_BROKER_CONFIG"),
                     ("log.retention.hours", "168", "DEFAULT_CONFIG")]  # Kafka 4.4: log.retention.ms's null default is no synonym
    # The default filter ("modified") keeps only what was set on the topic.
    modified = kp.describe_configs([KPConfigResource(ConfigResourceType.TOPIC, name)])["topic"][name]
    assert set(modified) == {"cleanup.policy", "min.insync.replicas"}


def test_describe_topic_confluent(broker, ck):
    name = new_topic(ck, {"retention.ms": "3600000"})
    configs = ck_describe(ck, name)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].value == "delete"
    assert not configs["retention.ms"].is_read_only
    assert not configs["retention.ms"].is_sensitive
    assert "trafka.fsync.policy" in configs


def test_describe_versions_types_and_documentation(broker, ck):
    name = new_topic(ck)
    for version in (1, 2, 3, 4):
        configs = topic_configs(broker, name, ["retention.ms", "cleanup.policy", "preallocate", "nonexistent"],
                                version=version, documentation=True)
        assert set(configs) == {"retention.ms", "cleanup.policy", "preallocate"}  # unknown keys are skipped
        assert configs["retention.ms"]["config_source"] == STATIC_BROKER_CONFIG
        assert configs["retention.ms"]["synonyms"] == []  # not asked for
        if version >= 3:
            assert configs["retention.ms"]["config_type"] == 5  # LONG
            assert configs["cleanup.policy"]["config_type"] == 7  # LIST
            assert configs["preallocate"]["config_type"] == 1  # BOOLEAN
            assert "segments" in configs["retention.ms"]["documentation"]
    # documentation only when asked for
    configs = topic_configs(broker, name, ["retention.ms"], version=4)
    assert configs["retention.ms"]["documentation"] is None


def test_describe_errors(broker):
    results = describe_raw(broker, [(TOPIC, "no-such-topic-here", None), (TOPIC, "bad/name", None),
                                    (BROKER, "77", None), (BROKER, "not-a-number", None), (99, "x", None),
                                    (BROKER_LOGGER, "", None)])
    codes = [r["error_code"] for r in results]
    assert codes == [UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION, INVALID_REQUEST, INVALID_REQUEST,
                     INVALID_REQUEST, INVALID_REQUEST]
    assert all(r["configs"] == [] for r in results)
    assert "77" in results[2]["error_message"]


def test_describe_unknown_topic_confluent(broker, ck):
    resource = ConfigResource(ConfigResource.Type.TOPIC, "no-such-topic-either")
    error = ck_error(ck.describe_configs([resource])[resource])
    assert error.code() == CKError.UNKNOWN_TOPIC_OR_PART


def test_describe_broker(broker, kp, ck):
    got = kp.describe_configs([KPConfigResource(ConfigResourceType.BROKER, "1")], include_synonyms=True,
                              config_filter="all")["broker"]["1"]
    assert got["log.retention.ms"]["value"] == STATIC_RETENTION
    assert got["log.retention.ms"]["config_source"] == "STATIC_BROKER_CONFIG"
    # a dynamic broker config (KIP-226) is read-write on a single broker too, as on Kafka
    assert got["log.retention.ms"]["read_only"] is False
    assert got["log.dirs"]["read_only"] is True
    assert got["num.partitions"]["config_source"] == "DEFAULT_CONFIG"
    assert got["log.dirs"]["value"] == str(broker.data_dir)
    assert got["node.id"]["value"] == "1"
    # a key Kafka does not know is kept and shown (Kafka warns and ignores it), never an error
    assert got["made.up.setting"]["value"] == "7"
    assert [(s["name"], s["source"]) for s in got["log.retention.ms"]["synonyms"]] == [
        ("log.retention.ms", "STATIC_BROKER_CONFIG"), ("log.retention.hours", "DEFAULT_CONFIG")]
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = ck.describe_configs([resource])[resource].result(timeout=15)
    assert configs["log.retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert not configs["log.retention.ms"].is_read_only
    assert configs["num.partitions"].is_read_only
    assert configs["message.max.bytes"].value == "1048588"
    assert configs["message.max.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    # raw: "" (cluster-wide dynamic defaults) is empty; types and docs at v4
    [default, own] = describe_raw(broker, [(BROKER, "", None), (BROKER, "1", ["num.partitions"])],
                                  documentation=True)
    assert default["error_code"] == NONE and default["configs"] == []
    [entry] = own["configs"]
    assert entry["name"] == "num.partitions" and entry["value"] == "1" and entry["config_type"] == 3  # INT, Kafka's ConfigDef type
    assert entry["documentation"]


def test_describe_broker_logger(broker, kp):
    [result] = describe_raw(broker, [(BROKER_LOGGER, "1", None)])
    assert result["error_code"] == NONE
    levels = {c["name"]: c for c in result["configs"]}
    assert levels["root"]["value"] == "DEBUG"  # the broker runs with --log-level DEBUG
    assert levels["root"]["config_source"] == DYNAMIC_BROKER_LOGGER_CONFIG
    assert "trafka.admin" in levels
    got = kp.describe_configs([KPConfigResource(ConfigResourceType.BROKER_LOGGER, "1", ["trafka.admin"])],
                              config_filter="all")
    assert got["broker_logger"]["1"]["trafka.admin"]["value"] == "DEBUG"


# ------------------------------------------------------------------ AlterConfigs (whole set)


def test_alter_configs_replaces_the_set_confluent(broker, ck):
    name = new_topic(ck, {"retention.ms": "3600000", "cleanup.policy": "compact"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, name, set_config={"segment.ms": "600000"})
    assert ck.alter_configs([resource])[resource].result(timeout=15) is None
    configs = ck_describe(ck, name)
    assert configs["segment.ms"].value == "600000"
    assert configs["segment.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # Left out of the request → back to the broker defaults.
    assert configs["retention.ms"].value == STATIC_RETENTION
    assert configs["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value


def test_alter_configs_kafka_python_legacy(broker, kp, ck):
    name = new_topic(ck, {"retention.ms": "3600000"})
    result = kp.alter_configs([KPConfigResource(ConfigResourceType.TOPIC, name, {"max.message.bytes": "2000000"})],
                              incremental=False)
    assert result == {"topic": {name: "OK"}}
    configs = topic_configs(broker, name)
    assert configs["max.message.bytes"]["value"] == "2000000"
    # kafka-python re-sends the other modified settings with the legacy API, so they stay.
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["config_source"] == DYNAMIC_TOPIC_CONFIG


def test_alter_configs_validate_only_and_errors(broker, ck):
    name = new_topic(ck, {"retention.ms": "3600000"})
    ok = ConfigResource(ConfigResource.Type.TOPIC, name, set_config={"retention.ms": "1000"})
    assert ck.alter_configs([ok], validate_only=True)[ok].result(timeout=15) is None
    assert ck_describe(ck, name)["retention.ms"].value == "3600000"

    def legacy(resource_type: int, resource_name: str, configs: dict[str, str | None]) -> dict:
        body = {"resources": [{"resource_type": resource_type, "resource_name": resource_name,
                               "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                "validate_only": False}
        [response] = raw(broker, ALTER_CONFIGS, 2, body)["responses"]
        return response

    for configs in ({"no.such.config": "1"}, {"retention.ms": "soon"}, {"cleanup.policy": "shred"},
                    {"segment.bytes": "1"}):
        response = legacy(TOPIC, name, configs)
        assert response["error_code"] == INVALID_CONFIG, configs
        assert next(iter(configs)) in response["error_message"]
    # Kafka 4.4: a null value is INVALID_REQUEST (ConfigAdminManager.preprocess), not INVALID_CONFIG
    assert legacy(TOPIC, name, {"retention.ms": None})["error_code"] == INVALID_REQUEST
    assert legacy(TOPIC, "no-such-topic-3", {"retention.ms": "1"})["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    # static broker settings cannot change at runtime (dynamic ones can:
    # tests/server/test_broker_configs_single.py)
    assert legacy(BROKER, "1", {"num.partitions": "1"})["error_code"] == INVALID_REQUEST
    assert legacy(BROKER, "", {"log.dirs": "/tmp/x"})["error_code"] == INVALID_REQUEST
    assert legacy(BROKER_LOGGER, "1", {"root": "INFO"})["error_code"] == INVALID_REQUEST
    # Nothing above changed the topic.
    assert ck_describe(ck, name)["retention.ms"].value == "3600000"
    bad = ConfigResource(ConfigResource.Type.TOPIC, name, set_config={"retention.ms": "-5"})
    error = ck_error(ck.alter_configs([bad])[bad])
    assert error.code() == CKError.INVALID_CONFIG
    broker_resource = ConfigResource(ConfigResource.Type.BROKER, "1", set_config={"num.partitions": "3"})
    assert ck_error(ck.alter_configs([broker_resource])[broker_resource]).code() == CKError.INVALID_REQUEST


def test_alter_configs_duplicate_resource(broker, ck):
    name = new_topic(ck)
    resource = {"resource_type": TOPIC, "resource_name": name, "configs": [{"name": "retention.ms", "value": "5"}]}
    responses = raw(broker, ALTER_CONFIGS, 0, {"resources": [resource, resource], "validate_only": False})["responses"]
    assert [r["error_code"] for r in responses] == [INVALID_REQUEST, INVALID_REQUEST]


# ------------------------------------------------------------------ IncrementalAlterConfigs


def test_incremental_set_delete_append_subtract_confluent(broker, ck):
    name = new_topic(ck, {"retention.ms": "3600000", "segment.ms": "600000"})

    def alter(*entries: ConfigEntry) -> None:
        resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=list(entries))
        assert ck.incremental_alter_configs([resource])[resource].result(timeout=15) is None

    alter(ConfigEntry("max.message.bytes", "3000000", incremental_operation=AlterConfigOpType.SET),
          ConfigEntry("segment.ms", None, incremental_operation=AlterConfigOpType.DELETE))
    configs = ck_describe(ck, name)
    assert configs["max.message.bytes"].value == "3000000"
    assert configs["retention.ms"].value == "3600000"  # untouched
    assert configs["segment.ms"].value == "604800000"
    assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    # APPEND to an unset list config starts from its default ("delete").
    alter(ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND))
    assert ck_describe(ck, name)["cleanup.policy"].value == "compact,delete"
    alter(ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND))
    assert ck_describe(ck, name)["cleanup.policy"].value == "compact,delete"  # no duplicates
    alter(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT))
    configs = ck_describe(ck, name)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def test_incremental_errors_confluent(broker, ck):
    name = new_topic(ck, {"retention.ms": "3600000"})

    def error_of(*entries: ConfigEntry, validate_only: bool = False) -> int:
        resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=list(entries))
        return ck_error(ck.incremental_alter_configs([resource], validate_only=validate_only)[resource]).code()

    assert error_of(ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)) \
        == CKError.INVALID_CONFIG
    assert error_of(ConfigEntry("retention.ms", "x", incremental_operation=AlterConfigOpType.SET)) \
        == CKError.INVALID_CONFIG
    assert error_of(ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND)) \
        == CKError.INVALID_CONFIG
    # Removing the only policy leaves an empty list, which is not a valid cleanup.policy.
    assert error_of(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)) \
        == CKError.INVALID_CONFIG
    # One bad entry rejects the whole resource: the good SET next to it is not applied.
    assert error_of(ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET),
                    ConfigEntry("segment.ms", "0", incremental_operation=AlterConfigOpType.SET)) \
        == CKError.INVALID_CONFIG
    assert ck_describe(ck, name)["retention.ms"].value == "3600000"
    missing = ConfigResource(ConfigResource.Type.TOPIC, "no-such-topic-4", incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    assert ck_error(ck.incremental_alter_configs([missing])[missing]).code() == CKError.UNKNOWN_TOPIC_OR_PART
    broker_resource = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)])
    assert ck_error(ck.incremental_alter_configs([broker_resource])[broker_resource]).code() \
        == CKError.INVALID_REQUEST


def test_incremental_validate_only_kafka_python(broker, kp, ck):
    name = new_topic(ck, {"retention.ms": "3600000"})
    resource = KPConfigResource(ConfigResourceType.TOPIC, name, {"retention.ms": "1000"})
    assert kp.alter_configs([resource], validate_only=True, incremental=True) == {"topic": {name: "OK"}}
    assert topic_configs(broker, name, ["retention.ms"])["retention.ms"]["value"] == "3600000"
    resource = KPConfigResource(ConfigResourceType.TOPIC, name, {"retention.ms": ("DELETE", None),
                                                                  "cleanup.policy": ("APPEND", "compact")})
    assert kp.alter_configs([resource], incremental=True) == {"topic": {name: "OK"}}
    configs = topic_configs(broker, name, ["retention.ms", "cleanup.policy"])
    assert configs["retention.ms"]["value"] == STATIC_RETENTION
    assert configs["retention.ms"]["config_source"] == STATIC_BROKER_CONFIG
    assert configs["cleanup.policy"]["value"] == "compact,delete"
    # reset_configs sends DELETE for every modified key
    assert kp.reset_configs([KPConfigResource(ConfigResourceType.TOPIC, name, {})], incremental=True) \
        == {"topic": {name: "OK"}}
    configs = topic_configs(broker, name)
    assert all(c["config_source"] != DYNAMIC_TOPIC_CONFIG for c in configs.values())
    assert configs["cleanup.policy"]["value"] == "delete"


def test_incremental_raw_errors(broker, ck):
    name = new_topic(ck)

    def incremental(resource_type: int, resource_name: str, ops: list[tuple[str, int, str | None]],
                    validate_only: bool = False) -> dict:
        body = {"resources": [{"resource_type": resource_type, "resource_name": resource_name,
                               "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
                "validate_only": validate_only}
        [response] = raw(broker, INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"]
        return response

    assert incremental(TOPIC, name, [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)])["error_code"] \
        == INVALID_REQUEST
    assert incremental(TOPIC, name, [("retention.ms", 9, "1")])["error_code"] == INVALID_REQUEST
    # Kafka 4.4: a null value is INVALID_REQUEST (ConfigAdminManager.preprocess), not INVALID_CONFIG
    assert incremental(TOPIC, name, [("retention.ms", SET, None)])["error_code"] == INVALID_REQUEST
    # Kafka deletes any name, known or not (it validates what is left): MirrorMaker 2 sends a
    # DELETE for every config at its default on the source, names of newer Kafkas included.
    assert incremental(TOPIC, name, [("no.such.config", DELETE, None)])["error_code"] == NONE
    assert incremental(TOPIC, name, [("no.such.config", DELETE, None), ("retention.ms", SET, "7200000")]
                       )["error_code"] == NONE
    assert topic_configs(broker, name, ["retention.ms"])["retention.ms"]["value"] == "7200000"
    assert incremental(TOPIC, name, [("no.such.config", APPEND, "x")])["error_code"] == INVALID_CONFIG
    assert incremental(TOPIC, "bad/name", [("retention.ms", SET, "1")])["error_code"] == INVALID_TOPIC_EXCEPTION
    assert incremental(BROKER, "5", [("num.partitions", SET, "1")])["error_code"] == INVALID_REQUEST
    assert incremental(TOPIC, name, [("retention.ms", DELETE, None)])["error_code"] == NONE  # unset: a no-op


def test_incremental_broker_logger(broker, kp):
    def levels() -> dict[str, str]:
        [result] = describe_raw(broker, [(BROKER_LOGGER, "1", ["trafka.admin", "root"])])
        return {c["name"]: c["value"] for c in result["configs"]}

    def incremental(name: str, ops: list[tuple[str, int, str | None]], validate_only: bool = False) -> dict:
        body = {"resources": [{"resource_type": BROKER_LOGGER, "resource_name": name,
                               "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
                "validate_only": validate_only}
        [response] = raw(broker, INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"]
        return response

    assert incremental("1", [("trafka.admin", SET, "WARN")], validate_only=True)["error_code"] == NONE
    assert levels()["trafka.admin"] == "DEBUG"
    result = kp.alter_configs([KPConfigResource(ConfigResourceType.BROKER_LOGGER, "1", {"trafka.admin": "WARN"})],
                              raise_on_unknown=False, incremental=True)
    assert result == {"broker_logger": {"1": "OK"}}
    assert levels() == {"trafka.admin": "WARN", "root": "DEBUG"}
    assert incremental("1", [("trafka.admin", DELETE, None)])["error_code"] == NONE
    assert levels()["trafka.admin"] == "DEBUG"  # inherits from root again
    assert incremental("1", [("trafka.admin", SET, "LOUD")])["error_code"] == INVALID_CONFIG
    assert incremental("1", [("no.such.logger.anywhere", SET, "INFO")])["error_code"] == INVALID_CONFIG
    assert incremental("1", [("root", DELETE, None)])["error_code"] == INVALID_REQUEST
    assert incremental("1", [("root", APPEND, "INFO")])["error_code"] == INVALID_REQUEST
    assert incremental("1", [("root", SUBTRACT, "INFO")])["error_code"] == INVALID_REQUEST
    assert incremental("", [("root", SET, "INFO")])["error_code"] == INVALID_REQUEST
    assert incremental("2", [("root", SET, "INFO")])["error_code"] == INVALID_REQUEST
    assert levels()["root"] == "DEBUG"


def test_kafka_python_new_topic_configs_visible(broker, kp):
    name = f"cfg-kp-{uuid.uuid4().hex[:8]}"
    kp.create_topics([KPNewTopic(name, 2, 1, topic_configs={"message.timestamp.type": "LogAppendTime"})])
    configs = topic_configs(broker, name, ["message.timestamp.type"])
    assert configs["message.timestamp.type"]["value"] == "LogAppendTime"
    assert configs["message.timestamp.type"]["config_source"] == DYNAMIC_TOPIC_CONFIG


def test_config_survives_restart(broker, ck):
    """Last in the module: the clients above do not have to reconnect."""
    name = new_topic(ck)
    resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.bytes", "123456789", incremental_operation=AlterConfigOpType.SET)])
    ck.incremental_alter_configs([resource])[resource].result(timeout=15)
    broker.restart()
    configs = topic_configs(broker, name, ["retention.bytes"])
    assert configs["retention.bytes"]["value"] == "123456789"
    assert configs["retention.bytes"]["config_source"] == DYNAMIC_TOPIC_CONFIG


def test_topic_inherits_broker_min_isr_and_unclean(tmp_path):
    """min.insync.replicas and unclean.leader.election.enable are not log settings, but a
    topic without its own still has the broker's: Kafka describes the broker's static value
    (STATIC_BROKER_CONFIG), and kafka-topics --describe lists it among the topic's configs.
    Trafka described the built-in 1 / false with the static source."""
    b = TrafkaBroker(tmp_path, extra_args=["--set", "min.insync.replicas=2",
                                           "--set", "unclean.leader.election.enable=true"])
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        name = new_topic(admin)
        configs = ck_describe(admin, name)
        assert (configs["min.insync.replicas"].value, configs["min.insync.replicas"].source) == (
            "2", ConfigSource.STATIC_BROKER_CONFIG.value)
        assert (configs["unclean.leader.election.enable"].value,
                configs["unclean.leader.election.enable"].source) == ("true", ConfigSource.STATIC_BROKER_CONFIG.value)
        own = new_topic(admin, {"min.insync.replicas": "1"})
        assert ck_describe(admin, own)["min.insync.replicas"].value == "1"
    finally:
        b.stop()
