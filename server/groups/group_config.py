"""Group configs: the settings one group may have of its own (Kafka's GROUP config resource).

Kafka 4 lets an operator give a single group other timings and share-group rules than the
broker's (IncrementalAlterConfigs / AlterConfigs on resource type GROUP, read back with
DescribeConfigs). This module holds what Kafka 4.4's GroupConfig defines, in our words in
docs/group-configs.md: every name, its type, the broker setting whose value a group without
one of its own takes, how a value is parsed and checked, and how DescribeConfigs shows it.
Where the values are kept is server/groups/group_configs.py; who applies them is the
consumer-group coordinator (consumer.*) and the share coordinator (share.*).

Why validation is in two steps, as in Kafka: a value is first parsed against its type and
the fixed rule of its definition ("Value must be at least 1000"), then checked against the
broker's own bounds (`group.share.min.record.lock.duration.ms`, ...), which an operator
may set. Both are INVALID_CONFIG with Kafka's messages. Only the names the group sets are
checked (the whole set after the change, so a heartbeat interval is compared with the
session timeout the group already has, or with the broker's when it has none).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from storage import CONFIG_TYPE_IDS

from server.errors import InvalidConfiguration
from server.topic_configs import ConfigSource

if TYPE_CHECKING:
    from server.config import BrokerConfig


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    type: str  # Kafka's ConfigDef type: INT, LONG, BOOLEAN, STRING, LIST
    default: str | None  # the definition's own default (used when there is no broker synonym)
    synonym: str | None  # the broker setting a group without this config takes its value from
    at_least: int | None = None  # ConfigDef.Range.atLeast
    one_of: tuple[str, ...] | None = None  # ConfigDef.ValidString.in
    internal: bool = False  # settable, but DescribeConfigs leaves it out
    doc: str = ""


def _d(name: str, kind: str, default: str | None, synonym: str | None = None, *, at_least: int | None = None,
       one_of: tuple[str, ...] | None = None, internal: bool = False, doc: str = "") -> GroupConfigDef:
    return GroupConfigDef(name, kind, default, synonym, at_least, one_of, internal, doc)


AUTO_OFFSET_RESET_DOC = (
    "The strategy to initialize the share-partition start offset. <ul><li>earliest: automatically reset the offset "
    "to the earliest offset</li><li>latest: automatically reset the offset to the latest offset</li><li>by_duration:"
    "&lt;duration&gt;: automatically reset the offset to a configured duration from the current timestamp. "
    "&lt;duration&gt; must be specified in ISO8601 format (PnDTnHnMn.nS). Negative duration is not allowed.</li>"
    "<li>anything else: throw exception to the share consumer.</li></ul>")
ISOLATION_LEVEL_DOC = (
    "Controls how to read records written transactionally. If set to \"read_committed\", the share group will only "
    "deliver transactional records which have been committed. If set to \"read_uncommitted\", the share group will "
    "return all messages, even transactional messages which have been aborted. Non-transactional records will be "
    "returned unconditionally in either mode.")

# Kafka 4.4's GroupConfig, in its definition order (which is the order values are parsed in,
# so the first bad one is the one reported).
GROUP_CONFIGS: dict[str, GroupConfigDef] = {d.name: d for d in [
    _d("consumer.session.timeout.ms", "INT", "45000", "group.consumer.session.timeout.ms", at_least=1,
       doc="The timeout to detect client failures when using the consumer group protocol."),
    _d("consumer.heartbeat.interval.ms", "INT", "5000", "group.consumer.heartbeat.interval.ms", at_least=1,
       doc="The heartbeat interval given to the members of a consumer group."),
    _d("consumer.assignment.interval.ms", "INT", "1000", "group.consumer.assignment.interval.ms", at_least=0,
       doc="The interval between assignment updates for a consumer group."),
    _d("consumer.assignor.offload.enable", "BOOLEAN", "true", "group.consumer.assignor.offload.enable", internal=True,
       doc="Whether to offload consumer group assignment to a group coordinator background thread."),
    _d("share.session.timeout.ms", "INT", "45000", "group.share.session.timeout.ms", at_least=1,
       doc="The timeout to detect client failures when using the share group protocol."),
    _d("share.heartbeat.interval.ms", "INT", "5000", "group.share.heartbeat.interval.ms", at_least=1,
       doc="The heartbeat interval given to the members of a share group."),
    _d("share.record.lock.duration.ms", "INT", "30000", "group.share.record.lock.duration.ms", at_least=1000,
       doc="The record acquisition lock duration in milliseconds for share groups."),
    _d("share.delivery.count.limit", "INT", "5", "group.share.delivery.count.limit", at_least=2,
       doc="The maximum number of delivery attempts for a record delivered to a share group."),
    _d("share.partition.max.record.locks", "INT", "2000", "group.share.partition.max.record.locks", at_least=100,
       doc="Share-group record lock limit per share-partition."),
    _d("share.auto.offset.reset", "STRING", "latest", doc=AUTO_OFFSET_RESET_DOC),
    _d("share.isolation.level", "STRING", "read_uncommitted", one_of=("read_committed", "read_uncommitted"),
       doc=ISOLATION_LEVEL_DOC),
    _d("share.renew.acknowledge.enable", "BOOLEAN", "true",
       doc="Whether the renew acknowledge type is enabled for the share group."),
    _d("share.assignment.interval.ms", "INT", "1000", "group.share.assignment.interval.ms", at_least=0,
       doc="The interval between assignment updates for a share group."),
    _d("share.assignor.offload.enable", "BOOLEAN", "true", "group.share.assignor.offload.enable", internal=True,
       doc="Whether to offload share group assignment to a group coordinator background thread."),
    _d("streams.session.timeout.ms", "INT", "45000", "group.streams.session.timeout.ms", at_least=1,
       doc="The timeout to detect client failures when using the streams group protocol."),
    _d("streams.heartbeat.interval.ms", "INT", "5000", "group.streams.heartbeat.interval.ms", at_least=1,
       doc="The heartbeat interval given to the members."),
    _d("streams.num.standby.replicas", "INT", "0", "group.streams.num.standby.replicas", at_least=0,
       doc="The number of standby replicas for each task."),
    _d("streams.initial.rebalance.delay.ms", "INT", "3000", "group.streams.initial.rebalance.delay.ms", at_least=0,
       doc="The amount of time the group coordinator will wait for more streams clients to join a new group before "
           "performing the first rebalance. A longer delay means potentially fewer rebalances."),
    _d("streams.assignment.interval.ms", "INT", "1000", "group.streams.assignment.interval.ms", at_least=0,
       doc="The interval between assignment updates for a streams group."),
    _d("streams.assignor.offload.enable", "BOOLEAN", "true", "group.streams.assignor.offload.enable", internal=True,
       doc="Whether to offload streams group assignment to a group coordinator background thread."),
    _d("streams.task.offset.interval.ms", "INT", "60000", "group.streams.task.offset.interval.ms", at_least=1,
       internal=True, doc="The interval in which the warmup task changelog offsets on a client are updated on the "
                          "broker. The offsets are sent with the next heartbeat after this time has passed."),
    _d("streams.num.warmup.replicas", "INT", "2", "group.streams.num.warmup.replicas", at_least=0, internal=True,
       doc="The maximum number of warmup task replicas."),
    _d("streams.rack.aware.assignment.tags", "LIST", "", "group.streams.rack.aware.assignment.tags",
       doc="List of client tag keys used to distribute standby replicas across Kafka Streams instances. When "
           "configured, and the used broker-side assignor supports it, it will make a best-effort to distribute "
           "standby tasks over each client tag dimension."),
    _d("streams.acceptable.recovery.lag", "LONG", "10000", "group.streams.acceptable.recovery.lag", at_least=0,
       internal=True, doc="The maximum acceptable lag (number of offsets to catch up) for a client to be considered "
                          "caught-up enough to receive an active task assignment."),
    _d("streams.assignor.name", "STRING", None, "group.streams.assignors",
       doc="The task assignor to use for this streams group, selected by short name from the assignors registered "
           "via the broker configuration group.streams.assignors. When unset, the group defaults to the first "
           "assignor configured in the broker's group.streams.assignors setting. Changing the assignor does not "
           "trigger a rebalance for the group; the new assignor takes effect on the next rebalance."),
    _d("errors.deadletterqueue.topic.name", "STRING", "",
       doc="The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. If blank "
           "(the default), the group does not have a DLQ topic."),
    _d("errors.deadletterqueue.copy.record.enable", "BOOLEAN", "false",
       doc="When writing onto the dead-letter queue topic, whether to copy the original record onto the DLQ topic, "
           "or just write a record containing the context information headers."),
]}

# A group config's value must lie within broker settings (Kafka's GroupConfig.validateValues,
# in its order): name -> (lower bound setting or None, upper bound setting or None).
BOUNDS: dict[str, tuple[str | None, str | None]] = {
    "consumer.heartbeat.interval.ms": ("group.consumer.min.heartbeat.interval.ms",
                                       "group.consumer.max.heartbeat.interval.ms"),
    "consumer.session.timeout.ms": ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    "consumer.assignment.interval.ms": ("group.consumer.min.assignment.interval.ms",
                                        "group.consumer.max.assignment.interval.ms"),
    "share.heartbeat.interval.ms": ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    "share.session.timeout.ms": ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    "share.record.lock.duration.ms": ("group.share.min.record.lock.duration.ms",
                                      "group.share.max.record.lock.duration.ms"),
    "share.delivery.count.limit": ("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
    "share.partition.max.record.locks": ("group.share.min.partition.max.record.locks",
                                         "group.share.max.partition.max.record.locks"),
    "share.assignment.interval.ms": ("group.share.min.assignment.interval.ms",
                                     "group.share.max.assignment.interval.ms"),
    "streams.heartbeat.interval.ms": ("group.streams.min.heartbeat.interval.ms",
                                      "group.streams.max.heartbeat.interval.ms"),
    "streams.session.timeout.ms": ("group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
    "streams.num.standby.replicas": (None, "group.streams.max.standby.replicas"),
    "streams.assignment.interval.ms": ("group.streams.min.assignment.interval.ms",
                                       "group.streams.max.assignment.interval.ms"),
    "streams.task.offset.interval.ms": ("group.streams.min.task.offset.interval.ms", None),
    "streams.num.warmup.replicas": (None, "group.streams.max.warmup.replicas"),
}

# (session timeout, heartbeat interval) pairs: the first must stay above the second.
SESSION_HEARTBEAT = [("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                     ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
                     ("streams.session.timeout.ms", "streams.heartbeat.interval.ms")]

_INT_LIMITS = {"INT": (-(1 << 31), (1 << 31) - 1), "LONG": (-(1 << 63), (1 << 63) - 1)}
_NUMBER = re.compile(r"[+-]?[0-9]+")
_LIST_SPLIT = re.compile(r"\s*,\s*")
# java.time.Duration.parse: PnDTnHnMn.nS, each part optional, signs allowed, case-insensitive.
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                       r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)
BY_DURATION = "by_duration:"


def _invalid_value(name: str, value: Any, message: str) -> InvalidConfiguration:
    """Kafka's ConfigException(name, value, message) text."""
    return InvalidConfiguration(f"Invalid value {value} for configuration {name}: {message}")


def parse_duration_ms(text: str) -> int | None:
    """An ISO-8601 duration as java.time.Duration.parse reads it, in milliseconds (None if
    it does not parse)."""
    m = _DURATION.fullmatch(text)
    if m is None or (m.group(2) is None and m.group(3) is None) or (m.group(3) is not None and m.group(3) in "Tt"):
        return None
    days, hours, minutes, seconds, fraction = (m.group(i) for i in (2, 4, 5, 6, 7))
    total_ns = 0
    for part, unit in ((days, 86_400), (hours, 3600), (minutes, 60), (seconds, 1)):
        if part is not None:
            total_ns += int(part) * unit * 1_000_000_000
    if fraction:
        nanos = int(fraction.ljust(9, "0"))
        total_ns += -nanos if seconds is not None and seconds.startswith("-") else nanos
    if m.group(1) == "-":
        total_ns = -total_ns
    return total_ns // 1_000_000


def auto_offset_reset_ok(value: str) -> bool:
    """share.auto.offset.reset: earliest, latest or by_duration:<a duration that is not negative>."""
    if value in ("earliest", "latest"):
        return True
    if not value.startswith(BY_DURATION):
        return False
    millis = parse_duration_ms(value[len(BY_DURATION):])
    return millis is not None and millis >= 0


def parse(name: str, raw: str) -> Any:
    """`raw` as the value of group config `name` (int, bool, str or list of str), checked
    against its definition; InvalidConfiguration with Kafka's ConfigDef message otherwise."""
    definition = GROUP_CONFIGS[name]
    text = raw.strip()
    value: Any
    if definition.type in _INT_LIMITS:
        low, high = _INT_LIMITS[definition.type]
        if not _NUMBER.fullmatch(text) or not low <= int(text) <= high:
            raise _invalid_value(name, raw, f"Not a number of type {definition.type}")
        value = int(text)
        if definition.at_least is not None and value < definition.at_least:
            raise _invalid_value(name, value, f"Value must be at least {definition.at_least}")
    elif definition.type == "BOOLEAN":
        if text.lower() not in ("true", "false"):
            raise _invalid_value(name, raw, "Expected value to be either true or false")
        value = text.lower() == "true"
    elif definition.type == "LIST":
        value = _LIST_SPLIT.split(text) if text else []
    else:
        value = text
        if definition.one_of is not None and value not in definition.one_of:
            raise _invalid_value(name, value, f"String must be one of: {', '.join(definition.one_of)}")
        if name == "share.auto.offset.reset" and not auto_offset_reset_ok(value):
            raise _invalid_value(name, value, f"Invalid value `{value}` for configuration {name}. The value must be "
                                 "either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")
    return value


def to_text(value: Any) -> str:
    """A parsed value as Kafka prints it (ConfigDef.convertToString)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def broker_value(config: "BrokerConfig", definition: GroupConfigDef) -> str | None:
    """What a group without `definition` set has: its broker synonym's value, else the
    definition's own default."""
    if definition.synonym is not None:
        return config.raw(definition.synonym)
    return definition.default


def _bound(config: "BrokerConfig", setting: str | None) -> int | None:
    return None if setting is None else int(config.get(setting))


def validate(configs: Mapping[str, str], config: "BrokerConfig") -> dict[str, Any]:
    """Kafka's GroupConfig.validate of a group's whole set of configs after a change: the
    names, the duplicate rack tags, each value against its definition, then against the
    broker's bounds and the session/heartbeat rule. Returns the parsed values."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise InvalidConfiguration(f"Unknown group config name: {name}")
    tags = configs.get("streams.rack.aware.assignment.tags")
    if tags is not None:
        items = _LIST_SPLIT.split(tags.strip()) if tags.strip() else []
        if len(set(items)) != len(items):
            raise InvalidConfiguration("streams.rack.aware.assignment.tags must not contain duplicate tag keys.")
    values = {name: parse(name, configs[name]) for name in GROUP_CONFIGS if name in configs}
    for name, (low_setting, high_setting) in BOUNDS.items():
        if name not in values:
            continue
        value, low, high = values[name], _bound(config, low_setting), _bound(config, high_setting)
        if low is not None and high is not None:
            if not low <= value <= high:
                raise InvalidConfiguration(f"{name} must be in the range {low} to {high} inclusive.")
        elif high is not None and value > high:
            raise InvalidConfiguration(f"{name} must be less than or equal to {high}")
        elif low is not None and value < low:
            raise InvalidConfiguration(f"{name} must be greater than or equal to {low}")
    if "streams.assignor.name" in values:
        registered = [a.strip() for a in config.raw("group.streams.assignors").split(",") if a.strip()]
        if values["streams.assignor.name"] not in registered:
            raise InvalidConfiguration(f"streams.assignor.name '{values['streams.assignor.name']}' is not a "
                                       f"registered task assignor. Registered assignors are: "
                                       f"[{', '.join(registered)}].")
    for session, heartbeat in SESSION_HEARTBEAT:
        if session in values or heartbeat in values:
            session_ms = values.get(session, int(config.get(GROUP_CONFIGS[session].synonym)))
            heartbeat_ms = values.get(heartbeat, int(config.get(GROUP_CONFIGS[heartbeat].synonym)))
            if session_ms <= heartbeat_ms:
                raise InvalidConfiguration(f"{session} must be greater than {heartbeat}")
    dlq = values.get("errors.deadletterqueue.topic.name")
    if dlq and dlq.startswith("__"):
        raise InvalidConfiguration("errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'")
    return values


def effective_int(config: "BrokerConfig", name: str, own: str | None) -> int:
    """The value a coordinator applies: the group's own, brought into the broker's current
    bounds (they may have changed since it was set: Kafka's GroupConfig.evaluate clamps it),
    else the broker's."""
    definition = GROUP_CONFIGS[name]
    if own is None:
        return int(config.get(definition.synonym)) if definition.synonym else int(definition.default or 0)
    try:
        value = parse(name, own)
    except InvalidConfiguration:
        return int(config.get(definition.synonym)) if definition.synonym else int(definition.default or 0)
    low_setting, high_setting = BOUNDS.get(name, (None, None))
    low, high = _bound(config, low_setting), _bound(config, high_setting)
    if low is not None:
        value = max(value, low)
    if high is not None:
        value = min(value, high)
    return value


def describe(config: "BrokerConfig", own: Mapping[str, str], keys: list[str] | None, *, synonyms: bool,
             documentation: bool, broker_chain) -> list[dict]:
    """DescribeConfigs entries of a group whose own configs are `own` (Kafka's
    ConfigHelper for GROUP resources): every config but the internal ones the group has not
    set (or those of `keys` among them), with source GROUP_CONFIG when the group set it, else its broker
    synonym's source (STATIC_BROKER_CONFIG, DEFAULT_CONFIG, ...); without a broker synonym
    DEFAULT_CONFIG under the config's own name. `broker_chain(setting)` gives the synonym
    chain of one broker setting (server/topic_configs.broker_synonyms)."""
    names = [n for n, d in GROUP_CONFIGS.items() if not d.internal or n in own]
    if keys is not None:
        wanted = set(keys)
        names = [n for n in names if n in wanted]
    entries = []
    for name in names:
        definition = GROUP_CONFIGS[name]
        if definition.synonym is not None:
            chain = list(broker_chain(definition.synonym))
        else:
            chain = [{"name": name, "value": definition.default, "source": ConfigSource.DEFAULT_CONFIG}]
        if name in own:
            try:
                shown = to_text(parse(name, own[name]))
            except InvalidConfiguration:
                shown = own[name]
            chain.insert(0, {"name": name, "value": shown, "source": ConfigSource.GROUP_CONFIG})
        value = chain[0]["value"] if chain else broker_value(config, definition)
        source = chain[0]["source"] if chain else ConfigSource.DEFAULT_CONFIG
        entries.append({
            "name": name,
            "value": value,
            "read_only": False,
            "config_source": source,
            "is_sensitive": False,
            "synonyms": chain if synonyms else [],
            "config_type": CONFIG_TYPE_IDS[definition.type],
            "documentation": definition.doc if documentation else None,
        })
    return entries
