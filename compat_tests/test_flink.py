"""Apache Flink's Kafka connector, unmodified, against the broker: exactly once with
checkpoints, through a failure.

The job is compat_tests/jvm_apps/FlinkCopyJob.java (compiled by the suite against the
`flink` classpath of .ci/jvm/pom.xml: Flink 2.x in a local mini-cluster and
flink-connector-kafka built for it, with its own kafka-clients): KafkaSource (bounded,
read_committed) -> upper-case -> KafkaSink with DeliveryGuarantee.EXACTLY_ONCE, a checkpoint
every 500 ms. Each map subtask throws once in the first attempt, after a checkpoint and with
records of an open transaction out; the job restarts from the checkpoint, the sink aborts
the failed attempt's transactions (it probes its transactional ids with InitProducerId) and
writes again, and the final checkpoint commits the last transaction.

Read with read_committed, the output holds every input line upper-cased exactly once, and
its log holds aborted records (the failure hit open transactions). Light variant (the
default run): Kafka and Trafka single brokers; TRAFKA_LONG_TESTS=1: more lines, and the
three-broker clusters.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from compat_tests.helpers import unique_name
from compat_tests.jvm_apps import JvmProcess, compile_app
from compat_tests.jvm_apps.topics import create_topics, produce, read_all

LONG = os.environ.get("TRAFKA_LONG_TESTS", "") not in ("", "0")
LINES = 10_000 if LONG else 2000
FAIL_AFTER = 50  # records past a completed checkpoint before a subtask throws
JOB_TIMEOUT_S = 240.0 if LONG else 150.0

pytestmark = [pytest.mark.compat(client="flink"), pytest.mark.timeout(600 if LONG else 300)]


def run_flink_job(broker, workdir) -> None:
    name = unique_name("flink")
    source, sink = f"{name}-in", f"{name}-out"
    create_topics(broker.bootstrap, {source: 2, sink: 2})
    lines = [f"line {i:05d} of {name}" for i in range(LINES)]
    produce(broker.bootstrap, source, [(None, line.encode(), None) for line in lines])
    job = JvmProcess("flink-job", workdir, compile_app("FlinkCopyJob.java", "flink"), "FlinkCopyJob",
                     ["--bootstrap", broker.bootstrap, "--input", source, "--output", sink,
                      "--group", f"{name}-group", "--txn-prefix", f"{name}-tx",
                      "--fail-after", str(FAIL_AFTER)],
                     heap_mb=512, loggers={"org.apache.flink.runtime.checkpoint.CheckpointCoordinator": "INFO",
                                           "org.apache.flink.runtime.executiongraph.ExecutionGraph": "INFO"})
    try:
        job.start()
        job.wait_for_log(r"^JOB FINISHED", JOB_TIMEOUT_S)
        out = job.output()
        assert "INDUCED FAILURE" in out, job.log_tail()
        assert "Restoring job" in out, f"no restore from a checkpoint:\n{job.log_tail()}"
    except BaseException:
        print(f"--- flink job ---\n{job.log_tail(150)}")
        raise
    finally:
        job.stop()
    got = Counter(r.value.decode() for r in read_all(broker.bootstrap, sink))
    want = Counter(line.upper() for line in lines)
    assert got == want, (f"{sum(got.values())} lines read, {len(lines)} expected; missing "
                         f"{sorted((want - got).elements())[:5]}, extra or twice "
                         f"{sorted((got - want).elements())[:5]}")
    written = len(read_all(broker.bootstrap, sink, isolation_level="read_uncommitted"))
    assert written > len(lines), (f"{written} records in {sink}'s log, none aborted: the failure "
                                  "found no open transaction, so the scenario proved nothing")


@pytest.mark.broker_kinds("kafka", "trafka")
def test_exactly_once_through_a_job_failure(broker, tmp_path):
    run_flink_job(broker, tmp_path)


@pytest.mark.skipif(not LONG, reason="the three-broker clusters: TRAFKA_LONG_TESTS=1")
@pytest.mark.broker_kinds("kafka-cluster", "trafka-cluster")
def test_exactly_once_through_a_job_failure_on_a_cluster(broker, tmp_path):
    run_flink_job(broker, tmp_path)
