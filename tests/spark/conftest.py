"""One local SparkSession for every test under tests/spark (Spark starts in ~6 s on 2 cores).

These tests feed the jobs' transformations static DataFrames and local files, so they do not
need Spark's Kafka connector; the session is still built by compat_tests.spark_kit, which
puts the connector on it whenever it can be had: connector jars are fixed when the JVM
starts, and a Spark test of compat_tests later in the same pytest run reuses this JVM. It is
not stopped at the end for the same reason. The connector's own scenarios (and the jobs end
to end) are compat_tests/test_spark_connector.py and compat_tests/test_spark_jobs.py, run
against Apache Kafka and Trafka.
"""

from __future__ import annotations

import pytest

from compat_tests import spark_kit

spark_kit.require("pyspark")


@pytest.fixture(scope="session")
def spark():
    return spark_kit.session("trafka-tests", connector=False)
