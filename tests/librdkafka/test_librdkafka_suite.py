"""librdkafka's own integration tests (confluentinc/librdkafka v2.14.2, tests/test-runner)
against a fresh Trafka, run as that project runs them: a broker address in a test.conf,
TEST_KAFKA_VERSION naming the broker's version, one test at a time (-p1), no socket-mocking
tests (-E), no local-only tests (-L).

- 0113_cooperative_rebalance, sub-test l_unsubscribe, against `trafka serve --listen
  127.0.0.1:P --advertised 127.0.0.1:P --data-dir D --set num.partitions=4` with Trafka's
  defaults: it counts the assign callbacks of two cooperative consumers started together
  and needs Kafka's group.initial.rebalance.delay.ms (3000) to see one generation.
- 0081_admin in full against a broker with an authorizer, as librdkafka's trivup cluster
  runs one (authorizer.class.name=kafka.security.authorizer.AclAuthorizer,
  allow.everyone.if.no.acl.found=true), with TEST_KAFKA_VERSION=4.4.0: its GROUP config
  resources (IncrementalAlterConfigs, DescribeConfigs_groups) expect a 4.x broker to accept
  and describe them and a 3.x one to refuse them; Trafka has Kafka 4.4's group configs
  (docs/group-configs.md), so it is run as the 4.4 it answers like, and Kafka 4.4.0 passes
  the same run. Only the sub-tests that need SASL are skipped, by the test itself.

The runner is built by `.ci/librdkafka.sh` under the ignored .cache/ (a few minutes of C
compiling); without it these tests skip, unless LIBRDKAFKA_SUITE=1 says it must be there.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from tests.brokerproc import REPO, BrokerProcess, free_port

VERSION = "v2.14.2"
BUILD = REPO / ".cache" / f"librdkafka-{VERSION}"
RUNNER = BUILD / "tests" / "test-runner"

pytestmark = pytest.mark.timeout(900)


def _runner_or_skip() -> None:
    if RUNNER.exists() and (BUILD / "src" / "librdkafka.so.1").exists():
        return
    message = f"librdkafka {VERSION}'s test runner is not built ({RUNNER}): bash .ci/librdkafka.sh"
    if os.environ.get("LIBRDKAFKA_SUITE") == "1":
        pytest.fail(message)
    pytest.skip(message)


def run_suite(broker: BrokerProcess, tmp_path, test: str, subtest: str, kafka_version: str) -> str:
    """`TESTS=<test> [SUBTESTS=<subtest>] TEST_KAFKA_VERSION=... RDKAFKA_TEST_CONF=test.conf
    LD_LIBRARY_PATH=../src:../src-cpp ./test-runner -p1 -E -L` in the build's tests/; the
    output, after asserting the run passed."""
    conf = tmp_path / f"test-{test}-{subtest or 'all'}.conf"
    conf.write_text(f"bootstrap.servers={broker.bootstrap}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("SUBTESTS", "TESTS")}
    env.update(TESTS=test, TEST_KAFKA_VERSION=kafka_version, RDKAFKA_TEST_CONF=str(conf),
               LD_LIBRARY_PATH="../src:../src-cpp")
    if subtest:
        env["SUBTESTS"] = subtest
    done = subprocess.run(["./test-runner", "-p1", "-E", "-L"], cwd=RUNNER.parent, env=env,
                          capture_output=True, text=True, timeout=600)
    output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    failures = [line for line in output.splitlines() if "failed at" in line or line.startswith("###")]
    assert done.returncode == 0 and "ALL TESTS PASSED" in output, (
        f"{test} {subtest}: exit {done.returncode}\n" + "\n".join(failures[-20:]) + "\n" + output[-3000:]
        + "\n--- broker log ---\n" + broker.log_tail(40))
    return output


@pytest.fixture
def fresh_broker(tmp_path):
    # Trafka's own defaults: the suite's environment would turn the initial rebalance delay
    # off (conftest.py), which is just what this test must not have
    _runner_or_skip()
    port = free_port()  # --listen 127.0.0.1:P (BrokerProcess) --advertised 127.0.0.1:P
    with BrokerProcess(tmp_path / "data", "--advertised", f"127.0.0.1:{port}", "--set", "num.partitions=4",
                       port=port, env={"TRAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": None}) as broker:
        yield broker


def test_0113_cooperative_rebalance_l_unsubscribe(fresh_broker, tmp_path):
    output = run_suite(fresh_broker, tmp_path, "0113", "l_unsubscribe", "3.9.0")
    assert "[ l_unsubscribe:" in output and ": PASS (" in output


@pytest.fixture
def authorizer_broker(tmp_path_factory):
    # the suite's environment (no initial rebalance delay, conftest.py): 0081's group
    # sub-tests start a dozen consumers one after the other, 3 s each with the delay
    _runner_or_skip()
    with BrokerProcess(tmp_path_factory.mktemp("rdkafka-0081") / "data", "--set", "num.partitions=4",
                       "--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                       "--set", "allow.everyone.if.no.acl.found=true") as broker:
        yield broker


# 0081's sub-tests that skip themselves here: the authorized operations of a described group
# need a SASL user to grant them to ("Test requires authorization to be setup").
SELF_SKIPPED_0081 = {"do_test_DescribeConsumerGroups_with_authorized_ops"}


def test_0081_admin(authorizer_broker, tmp_path):
    output = run_suite(authorizer_broker, tmp_path, "0081", "", "4.4.0")
    passed = set(re.findall(r"\[ (do_test_\w+):\d+:(?:[^\]]*:)? PASS \(", output))
    skipped = set(re.findall(r"\[ (do_test_\w+):\d+:(?:[^\]]*:)? SKIP: ", output))
    # the GROUP config resources ran and passed (a 4.x broker's answers); nothing else skipped
    assert {"do_test_IncrementalAlterConfigs", "do_test_DescribeConfigs_groups", "do_test_AlterConfigs",
            "do_test_DescribeConfigs", "do_test_DescribeConsumerGroups", "do_test_UserScramCredentials"} <= passed
    assert skipped <= SELF_SKIPPED_0081, skipped
