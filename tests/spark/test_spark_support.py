"""Connector configuration, the jars helper, the event generator and every job's --help."""

from __future__ import annotations

import importlib
import json
from collections import Counter

import pytest

from compat_tests import spark_kit

spark_kit.require("pyspark")

import pyspark  # noqa: E402

from spark_jobs import jars  # noqa: E402
from spark_jobs.generate import iso_ms, make_events, reference_counts  # noqa: E402
from spark_jobs.session import ConnectorUnavailable, connector_conf, connector_package  # noqa: E402

JAR_NAMES = [
    "spark-sql-kafka-0-10_2.13-4.0.0.jar",
    "spark-token-provider-kafka-0-10_2.13-4.0.0.jar",
    "kafka-clients-3.9.2.jar",
    "commons-pool2-2.12.0.jar",
]


@pytest.fixture
def no_connector_env(monkeypatch):
    monkeypatch.delenv("SPARK_KAFKA_JARS", raising=False)
    monkeypatch.delenv("TRAFKA_SPARK_USE_PACKAGES", raising=False)


def test_neither_option_names_both(no_connector_env):
    with pytest.raises(ConnectorUnavailable) as info:
        connector_conf()
    message = str(info.value)
    assert "SPARK_KAFKA_JARS" in message
    assert "--packages" in message and "TRAFKA_SPARK_USE_PACKAGES=1" in message
    assert connector_conf(required=False) == {}


def test_packages_match_installed_pyspark(no_connector_env, monkeypatch):
    expected = {"spark.jars.packages": f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"}
    assert connector_package().endswith(pyspark.__version__)
    assert connector_conf(use_packages=True) == expected
    monkeypatch.setenv("TRAFKA_SPARK_USE_PACKAGES", "1")
    assert connector_conf() == expected
    monkeypatch.setenv("TRAFKA_SPARK_USE_PACKAGES", "0")
    assert connector_conf(required=False) == {}


def test_jar_folder_wins_and_must_be_complete(no_connector_env, monkeypatch, tmp_path):
    for name in JAR_NAMES[:-1]:
        (tmp_path / name).write_bytes(b"PK")
    monkeypatch.setenv("SPARK_KAFKA_JARS", str(tmp_path))
    with pytest.raises(ConnectorUnavailable, match="commons-pool2"):
        connector_conf(use_packages=True)
    (tmp_path / JAR_NAMES[-1]).write_bytes(b"PK")
    (tmp_path / "lz4-java-1.8.1.jar").write_bytes(b"PK")  # extras ride along
    conf = connector_conf(use_packages=True)
    assert set(conf) == {"spark.jars"}
    assert sorted(p.rsplit("/", 1)[1] for p in conf["spark.jars"].split(",")) == sorted(
        JAR_NAMES + ["lz4-java-1.8.1.jar"]
    )
    assert jars.main(["check", str(tmp_path)]) == 0


def test_generator_is_deterministic_and_skewed():
    a = list(make_events(500, start_ms=1_000_000, spacing_ms=100, skew_ms=5_000, seed=9))
    b = list(make_events(500, start_ms=1_000_000, spacing_ms=100, skew_ms=5_000, seed=9))
    assert a == b
    assert a != list(make_events(500, start_ms=1_000_000, spacing_ms=100, skew_ms=5_000, seed=10))
    for i, e in enumerate(a):
        assert e.timestamp_ms == 1_000_000 + i * 100
        assert 0 <= e.timestamp_ms - e.event_time_ms <= 5_000
        value = json.loads(e.value)
        assert (value["user"], value["page"], value["action"]) == (e.user, e.page, e.action)
        assert value["event_time"] == iso_ms(e.event_time_ms) and e.key == e.user
        headers = dict(e.headers)
        assert set(headers) == {"event-id", "source", "content-type", "schema-version"}
    assert len({dict(e.headers)["event-id"] for e in a}) == len(a)
    times = [e.event_time_ms for e in a]
    assert times != sorted(times), "event times should arrive out of order"
    actions = Counter((e.page.startswith("/product"), e.action) for e in a)
    assert actions[(False, "add_to_cart")] == 0  # only product pages get add_to_cart


def test_reference_counts_watermark_cut():
    events = list(make_events(300, start_ms=0, spacing_ms=1000, skew_ms=0, seed=1))
    everything = reference_counts(events, 60_000)
    assert sum(everything.values()) == 300
    # Max event time 299 s, watermark 120 s: 179 s, so windows ending at 60 s and 120 s.
    closed = reference_counts(events, 60_000, watermark_ms=120_000)
    assert {k[0] for k in closed} == {0, 60_000}
    assert sum(closed.values()) == 120
    assert iso_ms(1_740_830_403_250) == "2025-03-01T12:00:03.250Z"


@pytest.mark.parametrize("job", ["events_to_aggregates", "topic_archive", "replay", "generate", "jars"])
def test_every_job_has_help(job, capsys):
    module = importlib.import_module(f"spark_jobs.{job}")
    assert module.__doc__ and "Usage:" in module.__doc__
    with pytest.raises(SystemExit) as info:
        module.main(["--help"])
    assert info.value.code == 0
    assert "usage: python -m spark_jobs." + job in capsys.readouterr().out


@pytest.mark.parametrize("ci", ["true", ""])
def test_a_missing_connector_fails_under_ci_and_skips_elsewhere(ci, monkeypatch):
    """Spark's connector is part of what CI proves: when its jars cannot be had (no
    SPARK_KAFKA_JARS, Maven unable to resolve .ci/jvm/pom.xml), a Spark test fails under CI
    and skips with the reason elsewhere."""
    from compat_tests import jvm

    def unresolvable(module):
        raise jvm.JvmUnavailable(f"no `mvn` on PATH to resolve .ci/jvm/pom.xml ({module})")

    monkeypatch.setenv("CI", ci)
    monkeypatch.delenv("SPARK_KAFKA_JARS", raising=False)
    monkeypatch.setattr(jvm, "classpath", unresolvable)
    try:
        spark_kit.session("never-built")
    except BaseException as exc:  # skip and fail are BaseExceptions: catch, not propagate
        outcome = exc
    else:
        raise AssertionError("a session without the connector was built")
    expected = pytest.fail.Exception if ci else pytest.skip.Exception
    assert type(outcome) is expected, f"{type(outcome).__name__}: {outcome}"
    assert "spark-kafka" in str(outcome) and "no `mvn`" in str(outcome)
