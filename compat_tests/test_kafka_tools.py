"""Apache Kafka's own command-line tools against Trafka, with the outcome they have against Kafka.

Every scenario runs Kafka 4.4's tools (compat_tests/kafka_tools.py: the classes their bin/*.sh
scripts run, from the jars .ci/jvm resolves, one JVM per command with a bounded heap and a
timeout) against a broker, checks what an operator would check, and keeps a transcript of
every command: exit status, stdout and stderr, normalised for what differs by nature
(addresses, ids, times, log directories). Against Trafka the same scenario also runs against
Apache Kafka (once per session) and every step must print the same; a difference fails the
test with a diff. Kafka 4.4 is the reference of the single broker (`trafka` vs `kafka`),
Kafka 3.9 in ZooKeeper mode that of the cluster (`trafka-cluster` vs `kafka-cluster`,
test_kafka_tools_cluster.py).

One scenario per tool and verb; docs/operations/kafka-tools.md lists them with what differs
and why. Heavy variants (many records) run with TRAFKA_LONG_TESTS=1.
"""

from __future__ import annotations

import os
import re

import pytest

from compat_tests.kafka_tools import ToolScenario, differential

pytestmark = [pytest.mark.compat(client="kafka-tools"), pytest.mark.timeout(300)]

LONG = os.environ.get("TRAFKA_LONG_TESTS", "") not in ("", "0")


def long_only(light: str):
    """A scenario run with TRAFKA_LONG_TESTS=1 only (each tool costs a JVM start, twice per
    scenario: CI's default run keeps a lighter variant of it, `light`)."""
    return pytest.mark.skipif(not LONG, reason=f"TRAFKA_LONG_TESTS=1 runs it; by default: {light}")

# Differences by design between Kafka 4.x (KRaft) and a ZooKeeper-mode broker, Trafka's design:
# the step runs on both and is kept, but not compared (docs/operations/kafka-tools.md).

SCRAM_TWO_MECHANISMS = (
    "two SCRAM mechanisms of one user in one AlterUserScramCredentials request: KRaft's "
    "ScramControlManager refuses any second change of a user (DUPLICATE_RESOURCE); ZooKeeper "
    "mode (ZkAdminManager), which Trafka follows, refuses only the same user and mechanism twice")


def play(request: pytest.FixtureRequest, broker_kind: str, body, reference: str | None = None):
    """Run the scenario `body` against this test's broker kind (and, for a Trafka kind, against
    its Kafka reference: `reference`, else kafka for trafka and kafka-cluster for trafka-cluster)."""
    pool = request.getfixturevalue("broker_pool")
    reference = reference if broker_kind.startswith("trafka") else None
    params = {k: v for k, v in getattr(getattr(request.node, "callspec", None), "params", {}).items()
              if k != "broker_kind"}
    name = "-".join([request.node.originalname.removeprefix("test_"), *map(str, params.values())])
    return differential(name, broker_kind, pool.get, request.getfixturevalue("tmp_path"), body,
                        reference)


# --------------------------------------------------------------------------- kafka-topics


@long_only('test_topics_alter_partitions (create, alter, describe)')
def test_topics_create(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        topic = s.topic()
        created = s.run("kafka-topics", "--create", "--topic", topic, "--partitions", 3,
                        "--replication-factor", 1, "--config", "retention.ms=3600000",
                        "--config", "cleanup.policy=compact")
        assert created.returncode == 0 and f"Created topic {topic}." in created.stdout, created
        again = s.run("kafka-topics", "--create", "--topic", topic, "--partitions", 3)
        assert again.returncode == 1 and "TopicExistsException" in again.stdout + again.stderr, again
        quiet = s.run("kafka-topics", "--create", "--topic", topic, "--partitions", 3, "--if-not-exists")
        assert quiet.returncode == 0, quiet
        bad = s.run("kafka-topics", "--create", "--topic", s.topic("bad"), "--partitions", 1,
                    "--config", "cleanup.policy=nope")
        assert bad.returncode == 1, bad
        listed = s.run("kafka-topics", "--list", "--topic", topic)
        assert listed.stdout.split() == [topic], listed

    play(request, broker_kind, body)


@long_only('test_topics_alter_partitions (create, alter, describe)')
def test_topics_describe(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        topic = s.topic()
        s.run("kafka-topics", "--create", "--topic", topic, "--partitions", 2, "--config", "max.message.bytes=2000000")
        described = s.run("kafka-topics", "--describe", "--topic", topic)
        assert described.returncode == 0 and "PartitionCount: 2" in described.stdout, described
        s.run("kafka-topics", "--describe", "--topic", topic, "--topics-with-overrides")
        s.run("kafka-topics", "--describe", "--topic", topic, "--under-replicated-partitions")
        s.run("kafka-topics", "--describe", "--topic", topic, "--unavailable-partitions")
        s.run("kafka-topics", "--describe", "--topic", topic, "--at-min-isr-partitions")
        missing = s.run("kafka-topics", "--describe", "--topic", s.topic("missing"))
        assert missing.returncode == 1, missing

    play(request, broker_kind, body)


def test_topics_alter_partitions(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        topic = s.topic()
        s.run("kafka-topics", "--create", "--topic", topic, "--partitions", 2)
        grown = s.run("kafka-topics", "--alter", "--topic", topic, "--partitions", 5)
        assert grown.returncode == 0, grown
        shrink = s.run("kafka-topics", "--alter", "--topic", topic, "--partitions", 3)
        assert shrink.returncode == 1, shrink
        described = s.run("kafka-topics", "--describe", "--topic", topic)
        assert "PartitionCount: 5" in described.stdout, described

    play(request, broker_kind, body)


@long_only('test_topics_alter_partitions (create, alter, describe)')
def test_topics_delete(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        topic = s.topic()
        s.run("kafka-topics", "--create", "--topic", topic, "--partitions", 1)
        deleted = s.run("kafka-topics", "--delete", "--topic", topic)
        assert deleted.returncode == 0, deleted
        s.run("kafka-topics", "--list", "--topic", topic)
        again = s.run("kafka-topics", "--delete", "--topic", topic)
        assert again.returncode == 1, again
        s.run("kafka-topics", "--delete", "--topic", topic, "--if-exists")

    play(request, broker_kind, body)


# --------------------------------------------------------------------------- kafka-configs


def test_configs_topics(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        topic = s.topic()
        s.create_topic(topic, 1)
        added = s.run("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic,
                      "--add-config", "retention.ms=86400000,cleanup.policy=[compact,delete]")
        assert added.returncode == 0 and f"Completed updating config for topic {topic}." in added.stdout, added
        described = s.run("kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", topic)
        assert "retention.ms=86400000" in described.stdout, described
        s.run("kafka-configs", "--alter", "--topic", topic, "--delete-config", "retention.ms")
        s.run("kafka-configs", "--describe", "--topic", topic)
        s.run("kafka-configs", "--alter", "--topic", topic, "--delete-config", "retention.ms")
        bad = s.run("kafka-configs", "--alter", "--topic", topic, "--add-config", "retention.ms=abc")
        assert bad.returncode != 0, bad
        s.run("kafka-configs", "--alter", "--topic", topic, "--add-config", "no.such.config=1")
        s.run("kafka-configs", "--describe", "--topic", s.topic("missing"))

    play(request, broker_kind, body)


@long_only('test_configs_brokers_dynamic (describe, alter, delete)')
def test_configs_brokers(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        s.run("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", 1)
        s.run("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-default")
        s.run("kafka-configs", "--describe", "--entity-type", "brokers")
        s.run("kafka-configs", "--describe", "--entity-type", "broker-loggers", "--entity-name", 1,
              stdout=lambda out: out.splitlines()[0] + "\n" if out else out)

    play(request, broker_kind, body)


def alter_broker_configs(s: ToolScenario, broker_id: int) -> None:
    """Dynamic configs of one broker and the cluster default, set, described and deleted,
    and a static one (broker.id) refused: the single broker's scenario and the cluster's."""
    per_broker = s.run("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-name", broker_id,
                       "--add-config", "message.max.bytes=2000000,log.segment.bytes=104857600")
    assert per_broker.returncode == 0, per_broker
    s.run("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", broker_id)
    default = s.run("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-default",
                    "--add-config", "log.retention.ms=604800000")
    assert default.returncode == 0, default
    s.run("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-default")
    s.run("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-name", broker_id,
          "--add-config", "broker.id=5")
    s.run("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-name", broker_id,
          "--delete-config", "message.max.bytes,log.segment.bytes")
    s.run("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-default",
          "--delete-config", "log.retention.ms")
    s.run("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", broker_id)


def test_configs_brokers_dynamic(request, broker, broker_kind):
    play(request, broker_kind, lambda s: alter_broker_configs(s, 1))


def mechanisms_sorted(text: str) -> str:
    """A user's SCRAM credentials in sorted order: Kafka lists them in its map's order."""
    return re.sub(r"(?<= are )(SCRAM-[^\n]*)", lambda m: ", ".join(sorted(m.group(1).split(", "))), text)


@long_only('test_configs_topics and test_configs_brokers_dynamic')
def test_configs_users_scram(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        user = s.topic("alice")
        s.run("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", user,
              "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
              "SCRAM-SHA-512=[password=alice-secret]", differs=SCRAM_TWO_MECHANISMS)
        for mechanism in ("SCRAM-SHA-256=[iterations=8192,password=alice-secret]",
                          "SCRAM-SHA-512=[password=alice-secret]"):
            added = s.run("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", user,
                          "--add-config", mechanism)
            assert added.returncode == 0, added
        described = s.run("kafka-configs", "--describe", "--entity-type", "users", "--entity-name", user,
                          stdout=mechanisms_sorted)
        assert "SCRAM-SHA-256=iterations=8192" in described.stdout, described
        s.run("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", user,
              "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]")
        s.run("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", user,
              "--delete-config", "SCRAM-SHA-512")
        s.run("kafka-configs", "--describe", "--entity-type", "users", "--entity-name", user)
        s.run("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", user,
              "--delete-config", "SCRAM-SHA-512")

    play(request, broker_kind, body)


@long_only('test_configs_topics and test_configs_brokers_dynamic')
def test_configs_quotas(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        client, user = s.topic("app"), s.topic("bob")
        added = s.run("kafka-configs", "--alter", "--entity-type", "clients", "--entity-name", client,
                      "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
        assert added.returncode == 0, added
        described = s.run("kafka-configs", "--describe", "--entity-type", "clients", "--entity-name", client)
        assert "producer_byte_rate=1024" in described.stdout, described
        s.run("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", user,
              "--add-config", "request_percentage=50")
        s.run("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", user,
              "--entity-type", "clients", "--entity-name", client, "--add-config", "producer_byte_rate=4096")
        s.run("kafka-configs", "--describe", "--entity-type", "users", "--entity-name", user)
        s.run("kafka-configs", "--describe", "--entity-type", "users", "--entity-name", user,
              "--entity-type", "clients", "--entity-name", client)
        s.run("kafka-configs", "--alter", "--entity-type", "clients", "--entity-default",
              "--add-config", "consumer_byte_rate=1000000")
        s.run("kafka-configs", "--describe", "--entity-type", "clients", "--entity-default")
        s.run("kafka-configs", "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.9",
              "--add-config", "connection_creation_rate=100")
        s.run("kafka-configs", "--describe", "--entity-type", "ips", "--entity-name", "127.0.0.9")
        s.run("kafka-configs", "--alter", "--entity-type", "clients", "--entity-name", client,
              "--add-config", "no_such_quota=5")
        for args in (["clients", "--entity-name", client, "--delete-config", "producer_byte_rate,consumer_byte_rate"],
                     ["users", "--entity-name", user, "--delete-config", "request_percentage"],
                     ["clients", "--entity-default", "--delete-config", "consumer_byte_rate"],
                     ["ips", "--entity-name", "127.0.0.9", "--delete-config", "connection_creation_rate"]):
            s.run("kafka-configs", "--alter", "--entity-type", *args)
        s.run("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", user,
              "--entity-type", "clients", "--entity-name", client, "--delete-config", "producer_byte_rate")
        s.run("kafka-configs", "--describe", "--entity-type", "clients", "--entity-name", client)

    play(request, broker_kind, body)


# --------------------------------------------------------------------------- kafka-consumer-groups

TS0_MS = 1704067200000  # 2024-01-01T00:00:00Z: record i of a partition has TS0_MS + i s


def produce(s: ToolScenario, topic: str, partitions: int, per_partition: int) -> None:
    """Records with fixed keys, values and timestamps (so offsets by time agree), by
    confluent-kafka: the setup, not the tool under test."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": s.bootstrap, "linger.ms": 0, "acks": "all"})
    failures: list = []
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, key=f"k{p}-{i}", value=f"v{p}-{i}", partition=p, timestamp=TS0_MS + i * 1000,
                             on_delivery=lambda err, _msg: failures.append(err) if err else None)
    assert producer.flush(30) == 0 and not failures, failures


def groups_setup(s: ToolScenario, partitions: int = 2, per_partition: int = 10) -> tuple[str, str]:
    topic, group = s.topic(), s.group()
    s.create_topic(topic, partitions)
    produce(s, topic, partitions, per_partition)
    return topic, group


def reset(s: ToolScenario, group: str, topic: str, *spec, execute: bool = True, **kwargs):
    return s.run("kafka-consumer-groups", "--group", group, "--topic", topic, "--reset-offsets", *spec,
                 "--execute" if execute else "--dry-run", **kwargs)


def only_lines_with(*needles: str):
    """stdout filter for a listing of the whole broker: the header and the lines naming this
    scenario's topics or groups (a shared broker has other tests' too), in sorted order and
    with single spaces (column widths follow the longest name on the broker)."""
    def keep(text: str) -> str:
        lines = text.splitlines()
        head = [" ".join(line.split()) for line in lines if line.startswith(("GROUP", "TOPIC"))]
        rows = sorted(" ".join(line.split()) for line in lines if any(n in line for n in needles))
        return "".join(line + "\n" for line in head + rows)
    return keep


def test_groups_list_and_describe(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        topic, group = groups_setup(s)
        idle = s.group("idle")
        if LONG:  # the offsets set by the tool (the default run: by confluent-kafka's admin client)
            seeded = reset(s, group, topic, "--to-offset", 3)
            assert seeded.returncode == 0, seeded
            reset(s, idle, topic, "--to-earliest")
        else:
            s.commit_offsets(group, topic, {0: 3, 1: 3})
            s.commit_offsets(idle, topic, {0: 0, 1: 0})
        keep = only_lines_with(group, idle)
        listed = s.run("kafka-consumer-groups", "--list", stdout=keep)
        assert group in listed.stdout and idle in listed.stdout, listed
        s.run("kafka-consumer-groups", "--list", "--state", stdout=keep)
        if LONG:
            s.run("kafka-consumer-groups", "--list", "--state", "empty", stdout=keep)
            s.run("kafka-consumer-groups", "--list", "--type", stdout=keep)
        described = s.run("kafka-consumer-groups", "--describe", "--group", group)
        assert described.returncode == 0 and f"{group} {topic} 0" in " ".join(described.stdout.split()), described
        assert " 3 10 7 " in " ".join(described.stdout.split()) + " ", described  # current, end, lag
        s.run("kafka-consumer-groups", "--describe", "--group", group, "--members")
        s.run("kafka-consumer-groups", "--describe", "--group", group, "--state")
        s.run("kafka-consumer-groups", "--describe", "--group", s.group("missing"))
        if LONG:
            s.run("kafka-consumer-groups", "--describe", "--group", group, "--members", "--verbose")
            s.run("kafka-consumer-groups", "--describe", "--group", s.group("missing"), "--state")

    play(request, broker_kind, body)


@long_only('test_groups_list_and_describe')
def test_groups_describe_active_member(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        topic, group = groups_setup(s)
        s.commit_offsets(group, topic, {0: 4, 1: 4})
        member = s.tools.start("kafka-console-consumer", "--bootstrap-server", s.bootstrap, "--topic", topic,
                               "--group", group, "--consumer-property", "enable.auto.commit=false",
                               "--consumer-property", "client.id=kt-member")
        try:
            member.wait_output(lambda out: out.count("\n") >= 12, 60, "records 4..9 of both partitions")
            s.run("kafka-consumer-groups", "--describe", "--group", group)
            s.run("kafka-consumer-groups", "--describe", "--group", group, "--members")
            s.run("kafka-consumer-groups", "--describe", "--group", group, "--state")
            busy = reset(s, group, topic, "--to-earliest")
            assert busy.returncode != 0 or "inactive" in busy.stdout + busy.stderr, busy
            deleted = s.run("kafka-consumer-groups", "--delete", "--group", group)
            assert "GroupNotEmptyException" in deleted.stdout, deleted  # and exit 0, as Kafka's tool does
        finally:
            member.stop()

    play(request, broker_kind, body)


def new_offsets(run) -> dict[int, int]:
    """The NEW-OFFSET column of a --reset-offsets table, by partition."""
    rows = [line.split() for line in run.stdout.splitlines() if line.startswith("kt-g-")]
    return {int(cells[2]): int(cells[3]) for cells in rows}


def test_groups_reset_offsets(request, broker, broker_kind):
    """Every reset mode in turn on one inactive group, each applied (--execute) and checked
    by the offsets the tool says it set; a dry run and an export first."""
    def body(s: ToolScenario) -> None:
        topic, group = groups_setup(s)
        s.commit_offsets(group, topic, {0: 5, 1: 5})
        planned = reset(s, group, topic, "--to-earliest", execute=False)
        assert new_offsets(planned) == {0: 0, 1: 0}, planned
        s.run("kafka-consumer-groups", "--describe", "--group", group, "--offsets")  # unchanged: 5, 5
        steps = [(["--to-current"], {0: 5, 1: 5}), (["--shift-by", -2], {0: 3, 1: 3}),
                 (["--to-offset", 7], {0: 7, 1: 7}), (["--to-earliest"], {0: 0, 1: 0}),
                 (["--to-latest"], {0: 10, 1: 10}),
                 (["--to-datetime", "2024-01-01T00:00:03.000Z"], {0: 3, 1: 3}),
                 (["--by-duration", "PT1H"], {0: 10, 1: 10}),  # every record is older than an hour
                 (["--shift-by", 100], {0: 10, 1: 10}), (["--to-offset", 50], {0: 10, 1: 10})]  # clamped
        if not LONG:  # the default run: a relative, a by-time and a clamped mode
            steps = [steps[1], steps[5], steps[8]]
        for spec, expected in steps:
            applied = reset(s, group, topic, *spec)
            assert applied.returncode == 0 and new_offsets(applied) == expected, applied
        exported = reset(s, group, f"{topic}:1", "--to-offset", 8, "--export", execute=False)
        plan = s.file("plan.csv", exported.stdout)
        applied = s.run("kafka-consumer-groups", "--group", group, "--reset-offsets", "--from-file", plan,
                        "--execute")
        assert new_offsets(applied) == {1: 8}, applied
        if LONG:
            s.run("kafka-consumer-groups", "--describe", "--group", group, "--offsets")
            s.run("kafka-consumer-groups", "--group", group, "--reset-offsets", "--to-earliest", "--execute")

    play(request, broker_kind, body)


@long_only('test_groups_list_and_describe')
def test_groups_delete_offsets(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        topic, group = groups_setup(s)
        other = s.topic("other")
        s.create_topic(other, 1)
        s.commit_offsets(group, topic, {0: 2, 1: 2})
        s.commit_offsets(group, other, {0: 0})
        deleted = s.run("kafka-consumer-groups", "--delete-offsets", "--group", group, "--topic", topic)
        assert deleted.returncode == 0, deleted
        s.run("kafka-consumer-groups", "--describe", "--group", group)
        s.run("kafka-consumer-groups", "--delete-offsets", "--group", group, "--topic", s.topic("never"))
        s.run("kafka-consumer-groups", "--delete-offsets", "--group", s.group("missing"), "--topic", topic)

    play(request, broker_kind, body)


@long_only('test_groups_list_and_describe')
def test_groups_delete(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        topic, group = groups_setup(s, partitions=1, per_partition=2)
        s.commit_offsets(group, topic, {0: 2})
        deleted = s.run("kafka-consumer-groups", "--delete", "--group", group)
        assert deleted.returncode == 0 and "Deletion of requested consumer groups" in deleted.stdout, deleted
        s.run("kafka-consumer-groups", "--describe", "--group", group)
        s.run("kafka-consumer-groups", "--delete", "--group", group)

    play(request, broker_kind, body)


# --------------------------------------------------------------------------- records: console, offsets


def test_console_producer_consumer(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        topic = s.topic()
        s.create_topic(topic, 2)
        lines = "".join(f"h1:a{i},h2:b\tkey-{i}\tvalue-{i}\n" for i in range(6))
        produced = s.run("kafka-console-producer", "--topic", topic,
                         "--reader-property", "parse.key=true", "--reader-property", "key.separator=\t",
                         "--reader-property", "parse.headers=true", input=lines)
        assert produced.returncode == 0, produced
        formatted = ["--formatter-property", "print.key=true", "--formatter-property", "print.headers=true",
                     "--formatter-property", "print.partition=true", "--formatter-property", "print.offset=true",
                     "--formatter-property", "key.separator= | "]
        by_partition = lambda out: "".join(sorted(out.splitlines(keepends=True)))  # noqa: E731
        consumed = s.run("kafka-console-consumer", "--topic", topic, "--from-beginning", "--max-messages", 6,
                         *formatted, "--timeout-ms", 20000, stdout=by_partition)
        assert consumed.returncode == 0 and consumed.stdout.count("value-") == 6, consumed
        if not LONG:  # the default run: keys and headers produced and consumed; the rest is long
            return
        s.run("kafka-console-consumer", "--topic", topic, "--partition", 1, "--offset", 1, "--max-messages", 2,
              *formatted, "--timeout-ms", 20000)
        s.run("kafka-console-consumer", "--topic", topic, "--partition", 0, "--offset", "earliest",
              "--max-messages", 1, "--formatter-property", "print.timestamp=true", "--timeout-ms", 20000,
              extra=[(r"CreateTime:\d+", "CreateTime:<ms>")])
        group = s.group()
        first = s.run("kafka-console-consumer", "--topic", topic, "--group", group, "--from-beginning",
                      "--max-messages", 6, "--timeout-ms", 20000, stdout=by_partition)
        assert first.stdout.count("\n") == 6, first
        s.run("kafka-consumer-groups", "--describe", "--group", group, "--offsets")
        s.run("kafka-console-consumer", "--topic", topic, "--group", group, "--max-messages", 1, "--timeout-ms", 3000)
        plain = s.topic("plain")
        s.create_topic(plain, 1)
        s.run("kafka-console-producer", "--topic", plain, "--command-property", "compression.type=gzip",
              input="plain-1\nplain-2\n")
        s.run("kafka-console-consumer", "--topic", plain, "--from-beginning", "--max-messages", 2,
              "--formatter-property", "print.key=true", "--formatter-property", "print.headers=true",
              "--timeout-ms", 20000)

    play(request, broker_kind, body)


@long_only('kafka-get-offsets in test_producer_perf_test')
def test_get_offsets(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        topic = s.topic()
        s.create_topic(topic, 3)
        produce(s, topic, 2, 5)
        for time_spec in ("-1", "latest", "-2", "earliest", "-3", "max-timestamp", str(TS0_MS + 2000),
                          str(TS0_MS + 60_000)):
            run = s.run("kafka-get-offsets", "--topic", topic, "--time", time_spec)
            assert run.returncode == 0, run
        s.run("kafka-get-offsets", "--topic-partitions", f"{topic}:0-1")
        s.run("kafka-get-offsets", "--topic", topic, "--partitions", "1,2")
        s.run("kafka-get-offsets", "--topic", s.topic("missing"))
        s.run("kafka-get-offsets", "--topic", topic, "--time", "-4")

    play(request, broker_kind, body)


def partition_lines_sorted(text: str) -> str:
    """The `partition: ...` lines of a tool's output in sorted order, the rest in place."""
    lines = text.splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.startswith("partition: ")]
    for i, line in zip(at, sorted(lines[i] for i in at)):
        lines[i] = line
    return "".join(lines)


def test_delete_records(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        topic = s.topic()
        s.create_topic(topic, 2)
        produce(s, topic, 2, 6)
        plan = s.file("offsets.json", '{"version": 1, "partitions": ['
                      f'{{"topic": "{topic}", "partition": 0, "offset": 4}}, '
                      f'{{"topic": "{topic}", "partition": 1, "offset": -1}}]}}')
        # The partitions in sorted order: the tool prints them in the order of the admin
        # client's result map, which is not the broker's to decide (Kafka's came 1, 0).
        deleted = s.run("kafka-delete-records", "--offset-json-file", plan, stdout=partition_lines_sorted)
        assert deleted.returncode == 0 and "low_watermark: 4" in deleted.stdout, deleted
        s.run("kafka-get-offsets", "--topic", topic, "--time", "earliest")
        # Not tried: an offset past the high watermark (Kafka's admin client then never completes
        # its future: the tool hangs against Kafka too) and a partition that does not exist (the
        # admin client retries Metadata until its 60 s timeout, on any broker).
        s.run("kafka-delete-records", "--offset-json-file", s.file("bad.json", '{"version": 1}'))

    play(request, broker_kind, body)


def log_dirs_view(text: str) -> str:
    """kafka-log-dirs prints a JSON document after two status lines: keep the status lines and
    the partitions with their sizes and lags (the log directory is normalised)."""
    import json

    lines = text.splitlines()
    doc = next((json.loads(line) for line in lines if line.startswith("{")), None)
    head = [line for line in lines if not line.startswith("{")]
    if doc is None:
        return text
    view = [f"broker {b['broker']} dir {d['logDir']} error {d['error']}: "
            + ", ".join(f"{p['partition']} size={p['size']} lag={p['offsetLag']} future={p['isFuture']}"
                        for p in sorted(d["partitions"], key=lambda p: p["partition"]))
            for b in doc["brokers"] for d in b["logDirs"]]
    return "\n".join(head + view) + "\n"


@long_only('test_kafka_tools_cluster.py::test_log_dirs_cluster')
def test_log_dirs(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        topic = s.topic()
        s.create_topic(topic, 2)
        produce(s, topic, 2, 3)
        described = s.run("kafka-log-dirs", "--describe", "--topic-list", topic, stdout=log_dirs_view)
        assert described.returncode == 0 and f"{topic}-0" in described.stdout, described
        s.run("kafka-log-dirs", "--describe", "--topic-list", topic, "--broker-list", 1, stdout=log_dirs_view)
        s.run("kafka-log-dirs", "--describe", "--topic-list", s.topic("missing"), stdout=log_dirs_view)
        s.run("kafka-log-dirs", "--describe", "--topic-list", topic, "--broker-list", 9, stdout=log_dirs_view)

    play(request, broker_kind, body)


# --------------------------------------------------------------------------- cluster-wide tools


# Feature flags and the metadata quorum are KRaft's: Trafka, a ZooKeeper-mode design, must
# answer what Kafka 3.9 in ZooKeeper mode answers (the `kafka-cluster` kind), single broker
# and cluster alike. Against Kafka 4.x (`kafka`) the scenario runs on its own.
ZK_REFERENCE_KINDS = pytest.mark.broker_kinds("kafka", "trafka", "kafka-cluster", "trafka-cluster")


@ZK_REFERENCE_KINDS
def test_features_describe(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        described = s.run("kafka-features", "describe")
        assert described.returncode == 0, described
        if s.broker.name == "kafka":
            assert "metadata.version" in described.stdout, described

    play(request, broker_kind, body, reference="kafka-cluster")


@ZK_REFERENCE_KINDS
def test_metadata_quorum(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        for what in ("--status", "--replication"):
            described = s.run("kafka-metadata-quorum", "describe", what)
            if s.broker.name == "kafka":
                assert described.returncode == 0 and "Leader" in described.stdout, described
            else:
                assert "does not support DESCRIBE_QUORUM" in described.stderr, described

    play(request, broker_kind, body, reference="kafka-cluster")


def test_leader_election_single(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        topic = s.topic()
        s.create_topic(topic, 2)
        s.run("kafka-leader-election", "--election-type", "preferred", "--topic", topic, "--partition", 0)
        s.run("kafka-leader-election", "--election-type", "unclean", "--topic", topic, "--partition", 1)
        s.run("kafka-leader-election", "--election-type", "preferred", "--topic", s.topic("missing"),
              "--partition", 0)
        plan = s.file("elect.json", f'{{"partitions": [{{"topic": "{topic}", "partition": 0}}, '
                                    f'{{"topic": "{topic}", "partition": 1}}]}}')
        s.run("kafka-leader-election", "--election-type", "preferred", "--path-to-json-file", plan)

    play(request, broker_kind, body)


@long_only('test_kafka_tools_cluster.py::test_reassign_partitions_with_throttle')
def test_reassign_partitions_single(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        topic = s.topic()
        s.create_topic(topic, 2)
        topics = s.file("topics.json", f'{{"version": 1, "topics": [{{"topic": "{topic}"}}]}}')
        generated = s.run("kafka-reassign-partitions", "--generate", "--topics-to-move-json-file", topics,
                          "--broker-list", 1)
        assert generated.returncode == 0 and "Proposed partition reassignment configuration" in generated.stdout
        same = s.file("same.json", f'{{"version": 1, "partitions": [{{"topic": "{topic}", "partition": 0, '
                                   f'"replicas": [1]}}]}}')
        executed = s.run("kafka-reassign-partitions", "--execute", "--reassignment-json-file", same)
        assert executed.returncode == 0, executed
        verified = s.run("kafka-reassign-partitions", "--verify", "--reassignment-json-file", same)
        assert verified.returncode == 0, verified
        s.run("kafka-reassign-partitions", "--list")
        elsewhere = s.file("elsewhere.json", f'{{"version": 1, "partitions": [{{"topic": "{topic}", '
                                             f'"partition": 1, "replicas": [2]}}]}}')
        s.run("kafka-reassign-partitions", "--execute", "--reassignment-json-file", elsewhere)
        s.run("kafka-reassign-partitions", "--cancel", "--reassignment-json-file", same)

    play(request, broker_kind, body)


# --------------------------------------------------------------------------- verifiable clients, perf


def events(text: str) -> list[dict]:
    import json

    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def producer_view(text: str) -> str:
    """The verifiable producer's events without times or rates: each acknowledged record by
    partition and offset, and the counts."""
    evs = events(text)
    names = [e["name"] for e in evs if e["name"] != "producer_send_success"]
    acked = sorted((e["partition"], e["offset"], e["key"], e["value"]) for e in evs
                   if e["name"] == "producer_send_success")
    data = [(e.get("sent"), e.get("acked")) for e in evs if e["name"] == "tool_data"]
    return "\n".join([f"events: {names}", f"sent/acked: {data}", *map(str, acked)]) + "\n"


def consumer_view(text: str) -> str:
    """The verifiable consumer's events summarised: what it was assigned, every record it
    consumed (verbose) by partition and offset, and the offsets it committed last."""
    evs = events(text)
    assigned = sorted({(p["topic"], p["partition"]) for e in evs if e["name"] == "partitions_assigned"
                       for p in e["partitions"]})
    records = sorted((e["partition"], e["offset"], e["key"], e["value"]) for e in evs if e["name"] == "record_data")
    consumed = sum(e["count"] for e in evs if e["name"] == "records_consumed")
    committed: dict = {}
    for e in evs:
        if e["name"] == "offsets_committed" and e.get("success"):
            for o in e["offsets"]:
                committed[(o["topic"], o["partition"])] = o["offset"]
    lifecycle = [e["name"] for e in evs if e["name"] in ("startup_complete", "shutdown_complete")]
    return "\n".join([f"lifecycle: {lifecycle}", f"assigned: {assigned}", f"consumed: {consumed}",
                      f"committed: {sorted(committed.items())}", *map(str, records)]) + "\n"


@pytest.mark.parametrize("protocol", ["classic", pytest.param("consumer", marks=long_only(
    "the verifiable consumer with the classic group protocol"))])
def test_verifiable_producer_consumer(request, broker, broker_kind, protocol):
    count = 2000 if LONG else 100

    def body(s: ToolScenario) -> None:
        topic, group = s.topic(), s.group()
        s.create_topic(topic, 3)
        produced = s.run("kafka-verifiable-producer", "--topic", topic, "--max-messages", count, "--acks", -1,
                         "--repeating-keys", 10, "--value-prefix", 7, stdout=producer_view, timeout=120)
        assert producer_view(produced.stdout).count("\n(") == count, produced
        consumed = s.run("kafka-verifiable-consumer", "--topic", topic, "--group-id", group,
                         "--group-protocol", protocol, "--max-messages", count, "--reset-policy", "earliest",
                         "--verbose", stdout=consumer_view, timeout=120,
                         stderr=lambda err: "")  # its stderr is log lines with timings
        view = consumer_view(consumed.stdout)
        assert f"consumed: {count}" in view and view.count("\n(") == count, consumed
        s.run("kafka-consumer-groups", "--describe", "--group", group, "--offsets")

    play(request, broker_kind, body)


def perf_view(text: str) -> str:
    """A perf tool's last report with every measurement replaced: what stays is how many
    records it counted and the shape of the report."""
    lines = [line for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return re.sub(r"\d+\.\d+|(?<![\w.])\d+(?= ms| records/sec|th| MB)", "<n>", last) + "\n"


def test_producer_perf_test(request, broker, broker_kind):
    count = 200_000 if LONG else 1000

    def body(s: ToolScenario) -> None:
        topic = s.topic()
        s.create_topic(topic, 2)
        run = s.run("kafka-producer-perf-test", "--topic", topic, "--num-records", count, "--record-size", 100,
                    "--throughput", -1, "--producer-props", f"bootstrap.servers={s.bootstrap}", "acks=all",
                    bootstrap=False, stdout=perf_view, timeout=180)
        assert run.returncode == 0 and f"{count} records sent" in run.stdout, run
        # Unkeyed records: how they spread over the partitions is the sticky partitioner's
        # timing, so the total is compared.
        total = lambda out: f"records: {sum(int(line.rsplit(':', 1)[1]) for line in out.split())}\n"  # noqa: E731
        offsets = s.run("kafka-get-offsets", "--topic", topic, stdout=total)
        assert total(offsets.stdout) == f"records: {count}\n", offsets

    play(request, broker_kind, body)


def consumer_perf_view(text: str) -> str:
    """kafka-consumer-perf-test's CSV: the header and the data.consumed columns (MB and
    records), not the times and rates."""
    import csv

    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("start.time")), None)
    rows = [row for row in csv.reader(line for line in lines[start or 0:] if line.strip())]
    if start is None or len(rows) < 2:
        return text
    header = [h.strip() for h in rows[0]]
    values = dict(zip(header, (v.strip() for v in rows[-1])))
    warnings = "".join(line + "\n" for line in lines[:start])
    return (warnings + ", ".join(header) + "\n" + f"data.consumed.in.MB={values.get('data.consumed.in.MB')} "
            f"data.consumed.in.nMsg={values.get('data.consumed.in.nMsg')}\n")


def test_consumer_perf_test(request, broker, broker_kind):
    count = 200_000 if LONG else 1000

    def body(s: ToolScenario) -> None:
        topic = s.topic()
        s.create_topic(topic, 2)
        s.run("kafka-producer-perf-test", "--topic", topic, "--num-records", count, "--record-size", 100,
              "--throughput", -1, "--producer-props", f"bootstrap.servers={s.bootstrap}", "acks=1",
              bootstrap=False, record=False, timeout=180)
        run = s.run("kafka-consumer-perf-test", "--topic", topic, "--num-records", count, "--group", s.group(),
                    "--timeout", 30000, stdout=consumer_perf_view, timeout=180)
        assert run.returncode == 0 and f"data.consumed.in.nMsg={count}" in consumer_perf_view(run.stdout), run
        if not LONG:  # the default run: one consumer run, without the detailed stats
            return
        s.run("kafka-consumer-perf-test", "--topic", topic, "--num-records", count, "--group", s.group("detailed"),
              "--show-detailed-stats", "--reporting-interval", 60000, "--timeout", 30000,
              stdout=consumer_perf_view, timeout=180)

    play(request, broker_kind, body)


def test_e2e_latency(request, broker, broker_kind):
    count = 5000 if LONG else 50

    def body(s: ToolScenario) -> None:
        topic = s.topic()
        s.create_topic(topic, 1)
        run = s.run("kafka-e2e-latency", "--topic", topic, "--num-records", count, "--producer-acks", "all",
                    "--record-size", 100,
                    stdout=lambda out: re.sub(r"\d+(\.\d+)?", "<n>", "".join(
                        line + "\n" for line in out.splitlines() if not line.split("\t")[0].isdigit())),
                    timeout=180)
        assert run.returncode == 0 and "Avg latency" in run.stdout, run

    play(request, broker_kind, body)


# --------------------------------------------------------------------------- kafka-transactions


def mask_columns(*names: str):
    """stdout filter for a whitespace table: the values of the named columns (producer ids,
    times: they differ by nature) replaced by <x>, each row's cells joined by one space."""
    def view(text: str) -> str:
        out, masked = [], set()
        for line in text.splitlines():
            cells = line.split()
            if any(n in cells for n in names):
                masked = {i for i, cell in enumerate(cells) if cell in names}
            elif masked and cells:
                cells = ["<x>" if i in masked else cell for i, cell in enumerate(cells)]
            out.append(" ".join(cells))
        return "".join(line + "\n" for line in out)
    return view


@long_only('test_kafka_tools_cluster.py::test_transactions_cluster')
def test_transactions(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        from confluent_kafka import Producer

        topic, txn_id = s.topic(), s.topic("txn")
        s.create_topic(topic, 1)
        produce(s, topic, 1, 2)  # offsets 0 and 1, outside any transaction
        producer = Producer({"bootstrap.servers": s.bootstrap, "transactional.id": txn_id,
                             "transaction.timeout.ms": 300000, "linger.ms": 0})
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, key=f"t{i}", value=f"in-txn-{i}", partition=0)
        assert producer.flush(30) == 0
        try:
            times = ("ProducerId", "ProducerEpoch", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                     "LastTimestamp", "LatestCoordinatorEpoch", "CoordinatorEpoch")
            listed = s.run("kafka-transactions", "list", stdout=lambda out: mask_columns(*times)(
                "".join(line + "\n" for line in out.splitlines() if txn_id in line or "TransactionalId" in line)))
            assert txn_id in listed.stdout and "Ongoing" in listed.stdout, listed
            s.run("kafka-transactions", "describe", "--transactional-id", txn_id, stdout=mask_columns(*times))
            s.run("kafka-transactions", "describe", "--transactional-id", s.topic("unknown-txn"))
            s.run("kafka-transactions", "describe-producers", "--topic", topic, "--partition", 0,
                  stdout=mask_columns(*times))
            s.run("kafka-transactions", "find-hanging", "--broker-id", 1)
            s.run("kafka-transactions", "find-hanging", "--topic", topic, "--partition", 0)
            s.run("kafka-transactions", "find-hanging", "--broker-id", 1, "--max-transaction-timeout", 0)
            s.run("kafka-get-offsets", "--topic", topic)
            aborted = s.run("kafka-transactions", "abort", "--topic", topic, "--partition", 0,
                            "--start-offset", 2)
            assert aborted.returncode == 0, aborted
            s.run("kafka-transactions", "describe-producers", "--topic", topic, "--partition", 0,
                  stdout=mask_columns(*times))
            s.run("kafka-get-offsets", "--topic", topic)
            s.run("kafka-console-consumer", "--topic", topic, "--from-beginning", "--isolation-level",
                  "read_committed", "--max-messages", 2, "--timeout-ms", 15000)
            s.run("kafka-transactions", "abort", "--topic", topic, "--partition", 0, "--start-offset", 0)
        finally:
            try:
                producer.abort_transaction(10)
            except Exception:  # noqa: BLE001 - the tool aborted it already; only cleanup
                pass

    play(request, broker_kind, body)


# --------------------------------------------------------------------------- kafka-acls

# An authorizer, and every connection of the suite (PLAINTEXT: User:ANONYMOUS) a super user,
# so the tools may manage ACLs (Kafka's StandardAuthorizer; Trafka takes Kafka's class names).
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS"}


@pytest.fixture(scope="session")
def acl_brokers(broker_pool):
    """One authorizer-enabled broker per kind (kafka, trafka) for the session, made on demand."""
    from compat_tests import brokers as brokers_mod

    started: dict[str, object] = {}

    def get(kind: str):
        if kind not in started:
            broker_pool.get(kind)  # skip / fail the way the plain broker of this kind does
            workdir = broker_pool.root / f"{kind}-acls"
            if kind == "kafka":
                from compat_tests.kafka_brokers import KafkaBroker

                made = KafkaBroker(workdir, extra_settings=AUTHORIZER, name="kafka")
            else:
                args = broker_pool.trafka_args + [a for k, v in AUTHORIZER.items() for a in ("--set", f"{k}={v}")]
                made = brokers_mod.TrafkaBroker(workdir, args, name=kind)
            made.start()
            started[kind] = made
        return started[kind]

    yield get
    for made in started.values():
        made.stop()


def acl_view(text: str) -> str:
    """kafka-acls output with the ACLs of each resource, and the resources, in sorted order
    (an authorizer keeps them in sets)."""
    blocks, current = [], None
    for line in text.splitlines():
        if line.startswith("\t") or line.startswith(" \t"):
            if current is not None:
                current[1].append(line.strip())
            continue
        current = (line, [])
        blocks.append(current)
    return "".join(head + "\n" + "".join(f"\t{acl}\n" for acl in sorted(acls)) for head, acls in
                   sorted(blocks, key=lambda b: b[0]) if head.strip() or acls)


def test_acls(request, broker_kind, acl_brokers):
    if broker_kind not in ("kafka", "trafka"):
        pytest.skip(f"no authorizer-enabled {broker_kind} broker in the suite")

    def body(s: ToolScenario) -> None:
        topic, group, txn = s.topic(), s.group(), s.topic("txn")
        prefix = s.topic("pre")
        acls = lambda *args, **kw: s.run("kafka-acls", *args, stdout=acl_view, **kw)  # noqa: E731
        added = acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe",
                     "--topic", topic)
        assert added.returncode == 0 and "User:alice" in added.stdout, added
        if not LONG:  # the default run: add (one ACL, the --producer set), list, remove
            acls("--add", "--allow-principal", "User:producer", "--producer", "--topic", topic,
                 "--transactional-id", txn, "--idempotent")
            listed = acls("--list", "--topic", topic)
            assert "User:producer" in listed.stdout and "User:alice" in listed.stdout, listed
            acls("--remove", "--topic", topic, "--force")
            acls("--list", "--topic", topic)
            return
        acls("--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.7", "--operation", "Write",
             "--topic", prefix, "--resource-pattern-type", "prefixed")
        acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", group)
        acls("--add", "--allow-principal", "User:producer", "--producer", "--topic", topic,
             "--transactional-id", txn, "--idempotent")
        acls("--add", "--allow-principal", "User:consumer", "--consumer", "--topic", topic, "--group", group)
        acls("--add", "--allow-principal", "User:ops", "--operation", "AlterConfigs", "--cluster")
        listed = acls("--list", "--topic", topic)
        assert "User:producer" in listed.stdout and "User:consumer" in listed.stdout, listed
        acls("--list", "--topic", prefix, "--resource-pattern-type", "prefixed")
        acls("--list", "--topic", prefix + "-x", "--resource-pattern-type", "match")
        acls("--list", "--group", group)
        acls("--list", "--transactional-id", txn)
        acls("--list", "--principal", "User:alice", "--topic", topic)
        removed = acls("--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic,
                       "--force")
        assert removed.returncode == 0, removed
        acls("--list", "--topic", topic)
        acls("--remove", "--topic", topic, "--force")
        acls("--list", "--topic", topic)
        acls("--remove", "--cluster", "--allow-principal", "User:ops", "--operation", "AlterConfigs", "--force")
        acls("--add", "--allow-principal", "User:alice", "--operation", "Alter", "--group", group)
        acls("--add", "--operation", "Read", "--topic", topic)

    differential("acls", broker_kind, acl_brokers, request.getfixturevalue("tmp_path"), body)


def test_acls_without_authorizer(request, broker, broker_kind):
    def body(s: ToolScenario) -> None:
        listed = s.run("kafka-acls", "--list")
        assert listed.returncode != 0 or "SecurityDisabled" in listed.stdout + listed.stderr, listed
        s.run("kafka-acls", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", s.topic())

    play(request, broker_kind, body)
