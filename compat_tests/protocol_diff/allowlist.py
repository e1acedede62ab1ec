"""The differences between Kafka and Trafka that are not Trafka bugs, each with its reason.

A difference not matched here fails the run. An entry matches by API (None: any), version
range, the case variant and the field path (regular expressions, matched in full), and
optionally by the two values. `kind` says what sort of reason it is:

- "kafka-version": Kafka 4.4 and Trafka's Kafka 3.9.2 protocol differ by design (newer
  versions, features Kafka 4 added, versions Kafka 4.0 removed that Trafka still serves);
- "kafka-quirk": Kafka's answer is an accident of its implementation (an unhandled
  exception answered UNKNOWN_SERVER_ERROR, a request never answered) that no client relies
  on, and Trafka answers the documented way instead;
- "deliberate": a documented Trafka choice;
- "open": a Trafka difference not fixed yet, kept visible in the report (the lead's list).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from compat_tests.protocol_diff.model import Difference, Pair

ANY = object()


@dataclass(frozen=True)
class Allowed:
    id: str
    kind: str
    reason: str
    api: int | tuple[int, ...] | None = None  # an API key, several, or any
    path: str = r".*"
    variant: str = r".*"
    versions: tuple[int, int] | None = None
    kafka: Any = ANY  # a value, or a predicate on Kafka's value
    trafka: Any = ANY

    def matches(self, pair: Pair, diff: Difference) -> bool:
        if self.api is not None and pair.api_key not in (self.api if isinstance(self.api, tuple) else (self.api,)):
            return False
        if self.versions is not None and not self.versions[0] <= pair.version <= self.versions[1]:
            return False
        if not re.fullmatch(self.variant, pair.variant) or not re.fullmatch(self.path, diff.path):
            return False
        return _value_ok(self.kafka, diff.kafka) and _value_ok(self.trafka, diff.trafka)


def _value_ok(want: Any, got: Any) -> bool:
    if want is ANY:
        return True
    if callable(want):
        return bool(want(got))
    return want == got


def absent(value: Any) -> bool:
    return value == "<absent>"


def present(value: Any) -> bool:
    return value not in (None, "<absent>")


def message_only(value: Any) -> bool:
    return value in (None, "<message>")


K = {"produce": 0, "fetch": 1, "list_offsets": 2, "metadata": 3, "offset_commit": 8, "join_group": 11,
     "sync_group": 14, "list_groups": 16, "describe_groups": 15, "api_versions": 18, "create_topics": 19,
     "describe_configs": 32, "alter_configs": 33, "describe_log_dirs": 35, "incremental_alter_configs": 44,
     "describe_client_quotas": 48, "alter_client_quotas": 49, "describe_topic_partitions": 75,
     "consumer_group_heartbeat": 68, "consumer_group_describe": 69, "txn_offset_commit": 28,
     "share_group_heartbeat": 76, "share_group_describe": 77, "share_fetch": 78, "share_acknowledge": 79,
     "read_share_group_state": 84, "write_share_group_state": 85, "delete_share_group_state": 86}
SHARE_APIS = (76, 77, 78, 79, 84, 85, 86)

# Topic configs Kafka 4 added (KIP-1034 dead-letter queues, KIP-1150-era remote storage lag,
# decompression bound) that Trafka, on Kafka 3.9's config set, does not have; and the
# ones Kafka 4.0 removed (KIP-724: message format; KIP-937's predecessor) that 3.x clients
# and tools still describe and Trafka still serves.
KAFKA4_ONLY_TOPIC_CONFIGS = ("errors.deadletterqueue.group.enable", "max.decompressed.message.bytes",
                             "remote.copy.lag.bytes", "remote.copy.lag.ms")
REMOVED_IN_KAFKA4_TOPIC_CONFIGS = ("message.downconversion.enable", "message.format.version",
                                   "message.timestamp.difference.max.ms")
# Trafka's own topic configs (docs: configuration): Confluent-compatible broker-side schema
# validation, and its storage knobs.
TRAFKA_TOPIC_CONFIGS = ("confluent.key.schema.validation", "confluent.value.schema.validation",
                        "trafka.fsync.policy", "trafka.preallocate.bytes")


def _names(names: tuple[str, ...]) -> str:
    return "(" + "|".join(re.escape(n) for n in names) + ")"


ENTRIES: list[Allowed] = [
    # ------------------------------------------------------------------ versions and features
    Allowed("api-versions-ranges", "kafka-version",
            "The advertised APIs and version ranges differ by design: Kafka 4.4 serves versions newer than "
            "the Kafka 3.9.2 schemas Trafka implements and APIs Trafka does not (delegation tokens, quorum "
            "and feature APIs, telemetry, streams groups, ...), and drops the versions Kafka 4.0 removed "
            "(KIP-896), which Trafka still serves for older clients. Only the intersection is compared.",
            api=K["api_versions"], path=r"api_keys(\[.*)?(\.length)?"),
    Allowed("api-versions-features", "deliberate",
            "Trafka's ApiVersions carries no tagged fields (supported/finalized features, "
            "zk_migration_ready): librdkafka before 2.2 (Debian's kcat) fails on any tag it receives "
            "(server/handlers/api_versions.py). Kafka 4.4 sends its feature levels there.",
            api=K["api_versions"], path=r"(supported_features|finalized_features|finalized_features_epoch"
                                        r"|zk_migration_ready)(\[.*)?(\..*)?"),
    Allowed("removed-versions", "kafka-version",
            "A version Kafka 4.0 removed (KIP-896) but still advertises (Produce v0-2, for librdkafka's "
            "version probes): Kafka 4.4 closes the connection; Trafka serves it for the old clients that "
            "send it (compare with --reference kafka-3.9).",
            api=K["produce"], versions=(0, 2), path=r"<outcome>"),
    # ------------------------------------------------------------------ ids and internal topics
    Allowed("internal-topic-partitions", "deliberate",
            "__consumer_offsets and __transaction_state have 50 partitions in Kafka and 1 in a single "
            "Trafka broker (offsets.topic.num.partitions / transaction.state.log.num.partitions default "
            "to 1 there: a coordinator log per partition costs files and recovery time for nothing on one "
            "broker). Which partition coordinates a group is internal; clients follow FindCoordinator.",
            path=r"(.*\.)?topics\[(name|topic)=(__consumer_offsets|__transaction_state)\]\.partitions.*"),
    Allowed("txn-offsets-one-partition", "deliberate",
            "What follows from internal-topic-partitions: Kafka verifies a TxnOffsetCommit by the group's "
            "__consumer_offsets partition (KIP-890), which AddOffsetsToTxn put in the transaction; with 50 "
            "partitions another group's usually differs (INVALID_TXN_STATE), with Trafka's one it is the same "
            "partition, so the commit passes the same partition-level check Kafka makes. (Kafka answers "
            "INVALID_TXN_STATE, or TRANSACTION_ABORTABLE from v4.)",
            api=K["txn_offset_commit"], variant=r"hostile:group_id=(unknown|oversized)",
            path=r"topics\[.*\]\.partitions\[.*\]\.error_code", kafka=lambda v: v in (48, 120), trafka=0),
    # ------------------------------------------------------------------ Kafka's own accidents
    Allowed("kafka-never-answers", "kafka-quirk",
            "Kafka 4.4 never answers this request (the error is raised inside its purgatory or coordinator "
            "and the response is lost: a client waits for request.timeout.ms); Trafka answers it with the "
            "error the request deserves.",
            path=r"<outcome>", kafka=lambda v: isinstance(v, str) and v.startswith("timeout")),
    Allowed("kafka-unknown-server-error-metadata", "kafka-quirk",
            "Metadata v12 with a null topic name and no id: Kafka 4.4 fails the whole request with an "
            "unhandled exception (UNKNOWN_SERVER_ERROR for every topic, no brokers); Trafka answers that "
            "topic INVALID_TOPIC_EXCEPTION and the others normally.",
            api=K["metadata"], versions=(12, 12), variant=r"hostile:topics\[0\]\.name=null"),
    Allowed("kafka-unknown-server-error-describe-topic-partitions", "kafka-quirk",
            "DescribeTopicPartitions with an empty topic name: Kafka 4.4 fails the whole request with an "
            "unhandled exception (UNKNOWN_SERVER_ERROR for every topic); Trafka answers that topic "
            "INVALID_TOPIC_EXCEPTION and the others normally.",
            api=K["describe_topic_partitions"], variant=r"hostile:topics\[0\]\.name=empty"),
    Allowed("kafka-unknown-server-error-fetch-zero-topic-id", "kafka-quirk",
            "Fetch v13+ naming the zero topic id: Kafka 4.4 fails the whole request (top-level "
            "UNKNOWN_SERVER_ERROR, no partitions); Trafka answers that partition UNKNOWN_TOPIC_ID, as Kafka "
            "answers any other unknown topic id.",
            api=K["fetch"], versions=(13, 17), variant=r"hostile:topics\[0\]\.topic_id=zero"),
    Allowed("kafka-join-repeated-protocol", "kafka-quirk",
            "What follows from kafka-never-answers for a JoinGroup v0-3 (a member joins at once, without the "
            "member-id round) that lists one protocol name twice: Kafka counts the name twice among the group's "
            "supported protocols, so no protocol is supported by every member, the member's vote throws when the "
            "join phase ends, and the group stays PreparingRebalance for good. Trafka answers the join and the "
            "group goes on (CompletingRebalance, then Empty when nobody syncs).",
            api=K["list_groups"], path=r"groups\[group_id=pd-join-v[0-3]-h1[0-2]\]\.group_state",
            kafka="PreparingRebalance"),
    Allowed("kafka-unknown-server-error-config-operation", "kafka-quirk",
            "IncrementalAlterConfigs with a config_operation that is none of SET, DELETE, APPEND, SUBTRACT: "
            "Kafka 4.4's OpType.forId throws and the resource is answered UNKNOWN_SERVER_ERROR; Trafka answers "
            "INVALID_REQUEST, naming the operation.",
            api=K["incremental_alter_configs"], variant=r"hostile:resources\[0\]\.configs\[0\]\.config_operation=99",
            path=r"responses\[.*\]\.(error_code|error_message)", kafka=lambda v: v in (-1, "-1") or message_only(v)),
    # ------------------------------------------------------------------ texts
    Allowed("error-message-text", "deliberate",
            "Trafka explains an error in error_message where Kafka sends null (or Kafka does where Trafka "
            "does not): the text is for people and no client branches on it; the error code, compared, is "
            "the protocol.",
            path=r"(.*\.)?(error_message|acknowledge_error_message|batch_index_error_message)",
            kafka=message_only, trafka=message_only),
    Allowed("config-documentation", "deliberate",
            "DescribeConfigs documentation (v3+) is Trafka's own one-line description of each config, not "
            "Kafka's paragraphs: text for people.",
            api=K["describe_configs"], path=r".*\.documentation"),
    # ------------------------------------------------------------------ configs
    Allowed("kafka4-topic-configs", "kafka-version",
            "Topic configs Kafka 4 added (" + ", ".join(KAFKA4_ONLY_TOPIC_CONFIGS) + ") are not in the Kafka "
            "3.9 config set Trafka implements; those Kafka 4.0 removed (" + ", ".join(REMOVED_IN_KAFKA4_TOPIC_CONFIGS)
            + ") are still described by Trafka, as Kafka 3.9 does, for the 3.x clients and tools it serves.",
            path=r".*configs\[name=" + _names(KAFKA4_ONLY_TOPIC_CONFIGS + REMOVED_IN_KAFKA4_TOPIC_CONFIGS) + r"\]"),
    Allowed("trafka-topic-configs", "deliberate",
            "Trafka's own topic configs (" + ", ".join(TRAFKA_TOPIC_CONFIGS) + "): Confluent-compatible "
            "broker-side schema validation and its storage settings, described like Kafka's.",
            path=r".*configs\[name=" + _names(TRAFKA_TOPIC_CONFIGS) + r"\]"),
    Allowed("produce-v0-2-records", "kafka-version",
            "What follows from removed-versions: the records Trafka accepted through Produce v0-2 (which "
            "Kafka 4.4 refuses) are in its per-version Produce topics, so their sizes differ.",
            api=K["describe_log_dirs"], path=r".*topics\[name=pd-(p|idem)-v[0-2]\]\.partitions.*"),
    # ------------------------------------------------------------------ group epochs
    Allowed("kip848-first-epoch", "kafka-version",
            "Kafka 4.4 gives the first member of a new consumer (KIP-848) or share (KIP-932) group epoch 2 "
            "(the group epoch is bumped once more on the group's first heartbeat, when its subscribed topics' "
            "metadata is first computed); Trafka gives 1. Epochs are counters the client echoes back; "
            "nothing depends on their value.",
            path=r"(.*\.)?(member_epoch|group_epoch|assignment_epoch)", kafka=lambda v: isinstance(v, int) and v > 0,
            trafka=lambda v: isinstance(v, int) and v > 0),
    Allowed("cluster-default-min-isr", "kafka-version",
            "Kafka 4's storage format writes min.insync.replicas as a cluster-wide dynamic default (KIP-966), "
            "so its topics describe it with source DYNAMIC_DEFAULT_BROKER_CONFIG (3); Trafka's comes from "
            "its static default (DEFAULT_CONFIG, 5). Same value.",
            path=r".*configs\[name=min\.insync\.replicas\]\.config_source", kafka=3, trafka=5),
]


def classify(pair: Pair, entries: list[Allowed] | None = None) -> None:
    """Move the differences an entry explains from `pair.differences` to `pair.allowed`."""
    entries = ENTRIES if entries is None else entries
    left: list[Difference] = []
    for diff in pair.differences:
        entry = next((e for e in entries if e.matches(pair, diff)), None)
        if entry is None:
            left.append(diff)
        else:
            pair.allowed.append((diff, entry.id))
    pair.differences = left


def by_id(entries: list[Allowed] | None = None) -> dict[str, Allowed]:
    return {e.id: e for e in (ENTRIES if entries is None else entries)}


Predicate = Callable[[Any], bool]


# ---------------------------------------------------------------------- not fixed (the lead's list)
# Differences Trafka should lose but this work did not fix: each says what Kafka does, what
# Trafka does, and why it is left (often: another helper's files). They keep the run green
# and stay listed in the report's "open" section until fixed.
OPEN: list[Allowed] = [
    Allowed("open-share-groups-4.4", "open",
            "Share groups: Kafka 4.4 follows KIP-932 as completed in 4.2 (a share partition is initialised "
            "through the share coordinator before it is assigned, so a new member's first heartbeat gets no "
            "assignment; ShareGroupDescribe's assignor_name is empty; the share-state RPCs Read/Write/Delete "
            "ShareGroupState answer INVALID_REQUEST or UNKNOWN_TOPIC_OR_PARTITION for state that was never "
            "initialised, and merge repeated topics and partitions). Trafka implements Kafka 4.1's share groups "
            "(assignment at once, assignor \"simple\", state created on first write). Moving to 4.4's semantics "
            "needs InitializeShareGroupState (API 83), which Trafka does not have yet.",
            api=SHARE_APIS),
]
ENTRIES.extend(OPEN)
