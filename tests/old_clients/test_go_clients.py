"""Sarama 1.22 and kafka-go 0.2 (Debian's packages) pass their own broker tests against Trafka.

Both are clients from before Kafka 4: Sarama's consumer group pins Fetch v3 and its offset
manager commits with OffsetCommit v1, its default version sends ListOffsets v0, and its
version matrix consumes with every Fetch version from v0; kafka-go sends Fetch v2 and
CreateTopics v0. tests/old_clients/go_suites.py builds their tests and runs them in a
network namespace of their own against a broker set up as their CI sets up Kafka.

Every test must pass except those listed below, each with the reason: tests whose
expectation Kafka 3.9 itself no longer meets (they fail against Kafka 3.9.2 the same way:
`TRAFKA_OLD_CLIENTS_KAFKA39=1` runs the suites against it too and checks that), and one
documented Trafka choice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.old_clients import go_suites

FAILS_ON_KAFKA_39 = {
    "sarama": {
        # Metadata and Produce for the topic "invalid/topic": the test expects
        # UNKNOWN_TOPIC_OR_PARTITION; Kafka answers INVALID_TOPIC_EXCEPTION (since 2.x).
        "TestFuncClientMetadata": "INVALID_TOPIC_EXCEPTION for an invalid name",
        "TestFuncProducingToInvalidTopic": "INVALID_TOPIC_EXCEPTION for an invalid name",
    },
    "kafka-go": {
        # A new Reader asks its group's offsets before it has found the coordinator.
        "TestReaderConsumerGroup/consumer_group_commits_on_close": "no coordinator yet",
        # Two readers, two partitions: one is left without a partition after the rebalance.
        "TestReaderConsumerGroup/consumer_group_rebalance": "one reader gets no partition",
        "TestReaderConsumerGroup": "its subtests above",
    },
}
# Trafka's Metadata answers a topic it auto-creates as ready at once (server/handlers/metadata.py);
# Kafka answers LEADER_NOT_AVAILABLE with no partitions first, which these tests take for
# "the deleted topic is gone" (their Metadata re-creates it: auto.create.topics.enable).
TRAFKA_CHOICES = {
    "kafka-go": {
        "TestConn/test_delete_topics": "Metadata answers an auto-created topic at once",
        "TestConn/test_delete_topics_with_an_invalid_topic": "Metadata answers an auto-created topic at once",
        "TestConn": "its subtests above",
    },
}
# The tests that must have run (and passed): the clients' tests of the old versions.
MUST_PASS = {
    "sarama": ["TestFuncConnectionFailure", "TestFuncClientCoordinator", "TestFuncConsumerGroupPartitioning",
               "TestFuncConsumerGroupExcessConsumers", "TestFuncConsumerGroupFuzzy", "TestFuncConsumerOffsetOutOfRange",
               "TestConsumerHighWaterMarkOffset", "TestVersionMatrix", "TestVersionMatrixLZ4",
               "TestVersionMatrixIdempotent", "TestReadOnlyAndAllCommittedMessages", "TestFuncOffsetManager",
               "TestFuncProducing", "TestFuncProducingGzip", "TestFuncProducingSnappy", "TestFuncProducingNoResponse",
               "TestFuncProducingFlushing", "TestFuncMultiPartitionProduce"],
    "kafka-go": ["TestConn/test_fetch_and_commit_offset", "TestConn/write_a_single_message_to_kafka_should_succeed",
                 "TestConn/writing_a_batch_of_messages_and_reading_it_sequentially_should_preserve_the_order", "TestReader",
                 "TestReaderConsumerGroup/verify_offset_committed", "TestWriter", "TestCompressedMessages",
                 "TestMixedCompressedMessages", "TestConsumerGroup", "TestDialer", "TestBatchDontExpectEOF"],
}
# Only Sarama's functional tests talk to a broker; its other tests use its mock broker.
RUN_FILTER = {"sarama": "^(TestFunc|TestVersionMatrix|TestConsumerHighWaterMarkOffset|TestReadOnlyAndAllCommittedMessages)",
              "kafka-go": None}


def _available(suite: str) -> None:
    try:
        go_suites.go()
    except go_suites.Unavailable as exc:
        pytest.skip(str(exc))
    reason = go_suites.namespaces_available()
    if reason:
        pytest.skip(reason)
    package = {"sarama": "github.com/Shopify/sarama", "kafka-go": "github.com/segmentio/kafka-go"}[suite]
    if not (go_suites.GOCODE / package).is_dir():
        pytest.skip(f"{package} is not installed (apt-get install {' '.join(go_suites.DEBIAN_PACKAGES)})")
    try:
        go_suites.build(suite)
    except go_suites.Unavailable as exc:
        pytest.skip(str(exc))


def _run(suite: str, broker: str, tmp_path, skip_known: bool = False) -> dict:
    out = tmp_path / f"{suite}-{broker}.json"
    argv = ["unshare", "-n", sys.executable, "-m", "tests.old_clients.go_suites", "run", suite, broker, str(out)]
    if RUN_FILTER[suite]:
        argv.append(RUN_FILTER[suite])
    if skip_known:
        argv.append("--skip-known")
    done = subprocess.run(argv, cwd=go_suites.REPO, capture_output=True, text=True, timeout=900)
    assert out.exists(), f"the suite did not report:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return json.loads(out.read_text())


def _failed(report: dict) -> dict[str, str]:
    return {name: outcome for name, outcome in report["results"].items() if outcome not in ("PASS", "SKIP")}


@pytest.mark.parametrize("suite", go_suites.SUITES)
def test_go_client_suite_against_trafka(suite, tmp_path):
    _available(suite)
    report = _run(suite, "trafka", tmp_path, skip_known=True)
    allowed = {**FAILS_ON_KAFKA_39.get(suite, {}), **TRAFKA_CHOICES.get(suite, {})}
    unexpected = {name: outcome for name, outcome in _failed(report).items() if name not in allowed}
    log = open(report["log"]).read()
    assert unexpected == {}, f"{suite}: {unexpected}\n{log[-6000:]}"
    missing = [name for name in MUST_PASS[suite] if report["results"].get(name) != "PASS"]
    assert missing == [], f"{suite}: did not pass: {missing}\n{log[-6000:]}"


@pytest.mark.skipif(not os.environ.get("TRAFKA_OLD_CLIENTS_KAFKA39"), reason="set TRAFKA_OLD_CLIENTS_KAFKA39=1 "
                    "to run the suites against Kafka 3.9 too (the reference for the expected failures)")
@pytest.mark.parametrize("suite", go_suites.SUITES)
def test_go_client_suite_expectations_kafka_39_no_longer_meets(suite, tmp_path):
    """The failures allowed above fail against Kafka 3.9.2 too; the choices pass there."""
    _available(suite)
    report = _run(suite, "kafka-3.9", tmp_path)
    failed = _failed(report)
    assert set(FAILS_ON_KAFKA_39.get(suite, {})) <= set(failed), failed
    assert not set(TRAFKA_CHOICES.get(suite, {})) & set(failed), failed
