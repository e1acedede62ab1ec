"""Dynamic broker configs (KIP-226): which settings may change without a restart, and the
checks an update gets before it is stored.

Why a module of its own: the alter handlers validate a change, the layers' keeper
(server/broker_configs.py, whichever store it writes to) filters what it reads back, and
DescribeConfigs reports `read_only`; all three need the same rules, and none of them is
about ZooKeeper, files or sockets, so the rules are pure functions here.

The reconfigurable set is Kafka's DynamicBrokerConfig.AllDynamicConfigs restricted to the
settings Trafka has: the broker defaults of topic configs (DynamicLogConfig: every
`log.*` synonym of a topic config, message.max.bytes, min.insync.replicas,
unclean.leader.election.enable, plus Trafka's own trafka.fsync.policy and
trafka.preallocate.bytes, which are topic-config synonyms the same way),
num.replica.fetchers (DynamicThreadPool), max.connections and max.connection.creation.rate
(DynamicConnectionQuota),
transaction.partition.verification.enable (DynamicProducerStateManagerConfig) and the
replication throttles (KIP-73's broker quota configs). Every other Trafka setting is
static: Kafka answers "Cannot update these configs dynamically: Set(...)" in ZooKeeper mode
(Kafka 3.9, a Scala set), "... dynamically: [...]" as Kafka 4.x (KRaft, a Java set), which a
single broker answers as (kafka-configs prints the message).

Error codes follow Kafka's ConfigAdminManager, which checks BROKER resources before
anything is written: a static setting or a bad value is INVALID_REQUEST (KAFKA-13609 keeps
it so for compatibility). A name Kafka's broker does not know is kept as a custom config
(Kafka stores it for plugins such as metric reporters; Kafka 4.4 answers SET of
`foo.bar.unknown` with NONE and describes it read-only, its value hidden), and so is one
Trafka does not know: it is stored and described as Kafka does, and changes nothing here.
Only APPEND / SUBTRACT need a known LIST setting ("Unknown config name: x", INVALID_CONFIG).
"""

from __future__ import annotations

from typing import Mapping

from storage.config import BROKER_SYNONYMS
from storage.errors import InvalidConfig
from wire.errors import ErrorCode

from server.config import SETTINGS, BrokerConfig
from server.errors import InvalidRequest, KafkaError

# Broker names of topic-config defaults (Kafka's DynamicLogConfig.ReconfigurableConfigs: the
# name each topic config derives from, log.retention.ms but not log.retention.hours).
LOG_DEFAULTS = frozenset(b for synonyms in BROKER_SYNONYMS.values() for b, factor in synonyms
                         if b in SETTINGS and factor == 1)

THREAD_POOLS = frozenset({"num.replica.fetchers"})  # Kafka's DynamicThreadPool, those Trafka has

RECONFIGURABLE = LOG_DEFAULTS | THREAD_POOLS | frozenset({
    "max.connections",
    "max.connection.creation.rate",
    "transaction.partition.verification.enable",
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
})

# LIST-typed broker settings (IncrementalAlterConfigs APPEND/SUBTRACT).
LIST_SETTINGS = frozenset({"log.cleanup.policy"})


def is_dynamic(name: str) -> bool:
    return name in RECONFIGURABLE


def _scala_set(names) -> str:
    return "Set(" + ", ".join(names) + ")"


def is_custom(name: str) -> bool:
    """A name the broker has no setting for: kept as given, as Kafka keeps custom configs."""
    return name not in SETTINGS


def check_names(props: Mapping[str, str | None], kraft: bool = False) -> None:
    """Static settings → INVALID_REQUEST with Kafka's message (a Scala set in ZooKeeper mode,
    a Java one with `kraft`, as Kafka 4.x words it); custom names pass."""
    static = [name for name in props if not is_custom(name) and not is_dynamic(name)]
    if static:
        names = "[" + ", ".join(static) + "]" if kraft else _scala_set(static)
        raise InvalidRequest(f"Cannot update these configs dynamically: {names}")


def check_values(props: Mapping[str, str]) -> None:
    """Each value must parse as its setting's type (Kafka's ConfigDef.parse message); a
    custom config's value is any string."""
    for name, value in props.items():
        if value is None:
            raise InvalidRequest(f"Null value not supported for : {name}")
        if is_custom(name):
            continue
        setting = SETTINGS[name]
        try:
            setting.parse(value)
        except ValueError as exc:
            reason = _KAFKA_PARSE_ERRORS.get(setting.kafka_type, str(exc))
            raise InvalidRequest(f"Invalid value {value} for configuration {name}: {reason}") from None


# Kafka's ConfigDef.parseType messages, for the types whose wording it fixes.
_KAFKA_PARSE_ERRORS = {"INT": "Not a number of type INT", "LONG": "Not a number of type LONG",
                       "SHORT": "Not a number of type SHORT", "DOUBLE": "Not a number of type DOUBLE",
                       "BOOLEAN": "Expected value to be either true or false"}


def check_thread_counts(current: BrokerConfig, proposed: BrokerConfig) -> None:
    """Kafka's DynamicThreadPool.validateReconfiguration: at least 1, and within half and
    double of the current count."""
    for name in THREAD_POOLS:
        new, old = proposed.get(name), current.get(name)
        if new == old:
            continue
        prefix = f"Dynamic thread count update validation failed for {name}={new}"
        if new <= 0:
            raise InvalidRequest(f"{prefix}, value should be at least 1")
        if new < old / 2:
            raise InvalidRequest(f"{prefix}, value should be at least half the current value {old}")
        if new > old * 2:
            raise InvalidRequest(f"{prefix}, value should not be greater than double the current value {old}")


def with_layer(config: BrokerConfig, props: Mapping[str, str], per_broker: bool) -> BrokerConfig:
    """A copy of `config` whose per-broker (or cluster default) layer is `props`; nobody is
    told (the listeners are not copied)."""
    return BrokerConfig(values=config.values, sources=config.sources,
                        dynamic_default=dict(config.dynamic_default if per_broker else props),
                        dynamic_broker=dict(props if per_broker else config.dynamic_broker),
                        listen_host=config.listen_host, listen_port=config.listen_port,
                        advertised_host=config.advertised_host, advertised_port=config.advertised_port,
                        listener_list=config.listener_list, inter_broker_listener=config.inter_broker_listener)


def validate_update(config: BrokerConfig, props: Mapping[str, str], per_broker: bool, topic_defaults,
                    kraft: bool = False) -> None:
    """Raise unless `props` may become this broker's per-broker (or the cluster default)
    layer as a whole. `topic_defaults(config)` builds the storage LogConfig of the broker
    defaults, so the log.* values are checked by the same rules as a topic's. `kraft`: a
    single broker, whose messages are Kafka 4.x's (KRaft) wording."""
    check_names(props, kraft)
    check_values(props)
    proposed = with_layer(config, props, per_broker)
    check_thread_counts(config, proposed)
    try:
        topic_defaults(proposed)
    except InvalidConfig as exc:
        # storage names the topic config; the client set its broker synonym
        name = next((b for b, _ in BROKER_SYNONYMS.get(exc.name, ()) if b in SETTINGS), exc.name)
        value = proposed.raw(name) if name in SETTINGS else ""
        raise InvalidRequest(f"Invalid value {value} for configuration {name}: {exc.reason}") from None


def usable(props: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """What a broker keeps of a stored layer (Kafka's fromPersistentProps: static settings
    and unparsable values are dropped with an error log; custom names are kept), and the
    names dropped."""
    kept, dropped = {}, []
    for name, value in props.items():
        if not is_custom(name):
            try:
                if not is_dynamic(name):
                    raise ValueError
                SETTINGS[name].parse(value)
            except ValueError:
                dropped.append(name)
                continue
        kept[name] = value
    return kept, dropped


def incremental(current: Mapping[str, str], ops: list[tuple[str, int, str | None]]) -> dict[str, str]:
    """An entity's overrides after IncrementalAlterConfigs operations (SET 0, DELETE 1,
    APPEND 2, SUBTRACT 3), as Kafka's prepareIncrementalConfigs: APPEND/SUBTRACT start from
    the entity's value, else the setting's built-in default, and need a LIST setting."""
    props = dict(current)
    for name, op, value in ops:
        if op == 1:
            props.pop(name, None)
            continue
        if value is None:
            raise InvalidRequest(f"Null value not supported for : {name}")
        if op == 0:
            props[name] = value
            continue
        if name not in SETTINGS:
            raise KafkaError(f"Unknown config name: {name}", ErrorCode.INVALID_CONFIG)
        verb = "append" if op == 2 else "subtract"
        if name not in LIST_SETTINGS:
            raise KafkaError(f"Config value {verb} is not allowed for config key: {name}", ErrorCode.INVALID_CONFIG)
        items = [i for i in props.get(name, SETTINGS[name].default).split(",") if i]
        change = value.split(",")
        if op == 2:
            items += [i for i in change if i not in items]
        else:
            items = [i for i in items if i not in change]
        props[name] = ",".join(items)
    return props
