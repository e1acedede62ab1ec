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
    Allowed("metadata-auto-create", "deliberate",
            "A topic auto-created by Metadata is answered at once, ready (Trafka creates it synchronously); "
            "Kafka 4.4's controller creates it asynchronously and first answers UNKNOWN_TOPIC_OR_PARTITION "
            "with no partitions, so clients ask again and then see what Trafka answered at once "
            "(server/handlers/metadata.py).",
            api=K["metadata"], variant=r"valid:auto-create|hostile:topics\[0\]\.name=unknown",
            path=r"topics\[name=[^\]]*\]\.(error_code|partitions.*|topic_id)"),
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
    Allowed("open-failed-join-groups", "open",
            "Kafka creates a classic group when a new member's JoinGroup arrives and keeps it, Empty, even when "
            "the join is refused (empty protocol type or protocols: INCONSISTENT_GROUP_PROTOCOL), so ListGroups "
            "lists such groups; Trafka creates the group only for a join it accepts. Kafka also leaves a v0-3 "
            "join with a repeated protocol name in PreparingRebalance (it never answers it, allow-listed), and "
            "removes a member whose rebalance timeout is -1 at once; Trafka completes those joins.",
            api=K["list_groups"], variant=r"valid.*", path=r"groups\[group_id=pd-join-.*"),
    Allowed("open-broker-config-descriptions", "open",
            "DescribeConfigs of the broker resource: Kafka describes config types from its ConfigDef (INT for "
            "num.partitions, default.replication.factor, log.segment.bytes, message.max.bytes, "
            "offsets.retention.minutes; Trafka: LONG), marks cluster-wide dynamic configs (log.segment.bytes, "
            "message.max.bytes) read_only false (Trafka: true), describes log.retention.hours (Trafka does not) "
            "and lists as synonyms only the configs that have a value (Trafka lists log.retention.ms, which "
            "has none). Left to the helper working on dynamic broker configs (server/dynamic_config.py, "
            "server/handlers/describe_configs.py).",
            api=K["describe_configs"], variant=r"valid:(broker-keys|synonyms).*",
            path=r"results\[.*\]\.configs\[name=(log\.retention\.hours|num\.partitions|default\.replication\.factor|"
                 r"log\.segment\.bytes|message\.max\.bytes|offsets\.retention\.minutes|retention\.ms)\].*"),
    Allowed("open-alter-configs-validation", "open",
            "AlterConfigs / IncrementalAlterConfigs: Kafka answers an empty resource name and a null config "
            "value INVALID_REQUEST (Trafka: INVALID_TOPIC_EXCEPTION, INVALID_CONFIG) and an unknown "
            "config_operation UNKNOWN_SERVER_ERROR (Trafka: INVALID_REQUEST); Kafka never answers an "
            "AlterConfigs that names a resource twice (allow-listed). Left to the helper working on the "
            "alter_configs handlers.",
            api=None, variant=r"hostile:resources\[0\]\.(resource_name=empty|configs\[0\]\.value=null|"
                              r"configs\[0\]\.config_operation=99)",
            path=r"responses\[.*\]\.(error_code|error_message)"),
    Allowed("open-alter-client-quotas-duplicates", "open",
            "AlterClientQuotas: Kafka 4's KRaft quota manager answers an entity named twice once, "
            "INVALID_REQUEST, and takes an entity that repeats an entity type (a map, last one wins); Trafka "
            "(ZooKeeper-mode Kafka's rules) accepts the first entry, refuses the second, and refuses a "
            "repeated entity type. Low impact: no client sends either.",
            api=K["alter_client_quotas"], variant=r"hostile:entries(=first-twice|=1000-copies|\[0\]\.entity=first-twice)"),
    Allowed("open-txn-offset-commit-verification", "open",
            "TxnOffsetCommit naming a wrong transactional id with the right producer id and epoch, once the "
            "transaction already wrote to the group's offsets partition: Kafka skips the transaction "
            "coordinator's verification there (the partition holds the producer's ongoing transaction) and "
            "commits; Trafka verifies every commit and refuses it (INVALID_PRODUCER_ID_MAPPING / "
            "INVALID_REQUEST). No client sends another transaction's id.",
            api=K["txn_offset_commit"], variant=r"hostile:transactional_id=.*",
            path=r"topics\[.*\]\.partitions\[.*\]\.error_code", kafka=0),
]
ENTRIES.extend(OPEN)
