"""SparkSession construction with Spark's Kafka connector wired in.

The connector is found in one of two ways, tried in this order:

1. ``SPARK_KAFKA_JARS=/path/to/folder``: every jar in that folder goes into ``spark.jars``
   (offline machines; see ``python -m spark_jobs.jars check``).
2. ``spark.jars.packages=org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark version>``, which
   Spark resolves from Maven Central at start-up. Only when asked for (``use_packages=True``,
   the jobs' ``--packages`` flag, or ``TRAFKA_SPARK_USE_PACKAGES=1``), because on a machine
   without Maven access Spark hangs on retries and then fails with an Ivy error that does not
   say what to do instead.

Neither available and the connector required: ``ConnectorUnavailable`` names both options.

Why the settings below: the jobs and tests run in local mode on small machines (2 cores), so
two task threads, few shuffle partitions (the default 200 makes every tiny aggregation
schedule 200 tasks per micro-batch) and UTC as session time zone, so window boundaries and
``date`` partitions are the same wherever the job runs.

Connector jars are fixed when the JVM starts (pyspark passes the conf to spark-submit), so
the first session in a process decides whether ``format("kafka")`` exists in it. That is why
``build_session`` adds the connector whenever it can, even when not required.
"""

from __future__ import annotations

import os
import shutil
import sys

import pyspark
from pyspark.sql import SparkSession

from spark_jobs.jars import ConnectorJarsMissing, connector_jars

JARS_ENV = "SPARK_KAFKA_JARS"
PACKAGES_ENV = "TRAFKA_SPARK_USE_PACKAGES"


class ConnectorUnavailable(RuntimeError):
    """Spark's Kafka connector cannot be put on the classpath."""


def connector_package() -> str:
    """Maven coordinate of the connector matching the installed pyspark (e.g. 4.0.5)."""
    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"


def connector_conf(use_packages: bool | None = None, required: bool = True) -> dict[str, str]:
    """Spark conf entries putting the Kafka connector on the classpath.

    ``use_packages=None`` reads ``TRAFKA_SPARK_USE_PACKAGES``. Returns ``{}`` when nothing is
    available and ``required`` is false.
    """
    folder = os.environ.get(JARS_ENV)
    if folder:
        try:
            jars = connector_jars(folder)
        except ConnectorJarsMissing as exc:
            raise ConnectorUnavailable(f"{JARS_ENV}={folder}: {exc}") from None
        return {"spark.jars": ",".join(str(j) for j in jars)}
    if use_packages is None:
        use_packages = os.environ.get(PACKAGES_ENV, "") not in ("", "0", "false", "no")
    if use_packages:
        return {"spark.jars.packages": connector_package()}
    if required:
        raise ConnectorUnavailable(
            "Spark's Kafka connector is not available. Either set "
            f"{JARS_ENV}=/folder/with/connector/jars (offline; see spark_jobs/README.md), or allow "
            f"Spark to download {connector_package()} from Maven Central with --packages "
            f"or {PACKAGES_ENV}=1."
        )
    return {}


def build_session(
    app_name: str = "trafka-spark",
    *,
    connector: bool = True,
    use_packages: bool | None = None,
    master: str = "local[2]",
    shuffle_partitions: int = 2,
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """Build (or reuse) the process's SparkSession.

    ``connector=True`` raises ``ConnectorUnavailable`` when the Kafka connector cannot be
    configured; ``connector=False`` still adds it when available (see the module docstring).
    """
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        # Otherwise pyspark's only word is "Java gateway process exited".
        raise RuntimeError("Spark 4.0 needs Java 17 or 21: install a JRE (e.g. openjdk-17-jre-headless) or set JAVA_HOME")
    # Executors in local mode are threads of this JVM, but Python UDFs and some readers start
    # Python workers: make them this interpreter, not whatever "python3" is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    conf = {
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Structured Streaming in local tests: don't keep 100 batches of metadata around.
        "spark.sql.streaming.minBatchesToRetain": "10",
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    }
    if master.startswith("local"):
        # The driver's RPC and block manager listen on sockets; in local mode nothing outside
        # this machine needs them, so keep them on loopback.
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.driver.host"] = "127.0.0.1"
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    conf.update(connector_conf(use_packages=use_packages, required=connector))
    conf.update(extra_conf or {})
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("TRAFKA_SPARK_LOG_LEVEL", "WARN"))
    if connector and not has_kafka_connector(spark):
        raise ConnectorUnavailable(
            "this process's SparkSession was started without the Kafka connector; connector jars "
            "are fixed at JVM start, so build the session with the connector first"
        )
    return spark


def has_kafka_connector(spark: SparkSession) -> bool:
    """Whether ``format("kafka")`` resolves in this session's JVM."""
    jvm = spark.sparkContext._jvm
    try:
        jvm.java.lang.Class.forName(
            "org.apache.spark.sql.kafka010.KafkaSourceProvider",
            True,
            jvm.java.lang.Thread.currentThread().getContextClassLoader(),
        )
    except Exception:  # py4j wraps ClassNotFoundException
        return False
    return True
