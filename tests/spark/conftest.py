"""One local SparkSession for every test under tests/spark (Spark starts in ~6 s on 2 cores).

The session is built like the jobs build theirs, minus the requirement for the Kafka
connector: these tests feed the jobs' transformations static DataFrames and local files.
It is not stopped at the end, so a compat test in the same pytest run can reuse the JVM
(connector jars are fixed when it starts; see spark_jobs.session).
"""

from __future__ import annotations

import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark not installed (extra 'spark')")


@pytest.fixture(scope="session")
def spark():
    from spark_jobs.session import build_session

    return build_session("trafka-tests", connector=False)
