"""Check a folder of Spark's Kafka connector jars (the SPARK_KAFKA_JARS way of providing it).

Spark's ``format("kafka")`` source and sink are not part of the pyspark wheel: they live in
``spark-sql-kafka-0-10_2.13`` and need three more jars at runtime. The usual way is to let
Spark resolve them from Maven Central: ``--packages`` on a job, or
``spark.jars.packages=org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark version>``
(``spark-submit --packages`` the same). A machine that must not download at start-up gets
them once into a folder named by ``SPARK_KAFKA_JARS``; in this repository Maven does it by
the coordinates of ``.ci/jvm/spark-kafka/pom.xml`` (the tests use that folder):

    mvn -q -B -s .ci/jvm/settings.xml -f .ci/jvm/pom.xml package   # -> .cache/jvm/spark-kafka/

A complete folder holds (versions may differ, the prefixes are what is checked):

    spark-sql-kafka-0-10_2.13-4.0.*.jar             the source and sink
    spark-token-provider-kafka-0-10_2.13-4.0.*.jar  delegation-token glue the source links against
    kafka-clients-3.9.*.jar                         the Java Kafka client (Spark 4.0 ships 3.9.x)
    commons-pool2-2.*.jar                           the executor-side consumer pool

lz4-java, snappy-java, zstd-jni and slf4j-api, which kafka-clients needs, already ship in
``pyspark/jars``. Never commit the jars.

Usage:
    python -m spark_jobs.jars check [DIR]
        Say whether DIR (default: $SPARK_KAFKA_JARS) holds every jar above; exit 1 if not.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# One prefix per required jar, with the reason Spark needs it (shown when one is missing).
REQUIRED_JARS: dict[str, str] = {
    "spark-sql-kafka-0-10_2.13-": "Spark's Kafka source and sink",
    "spark-token-provider-kafka-0-10_2.13-": "token provider the connector links against",
    "kafka-clients-": "Java Kafka client used by the connector",
    "commons-pool2-": "pool of cached executor consumers",
}


class ConnectorJarsMissing(RuntimeError):
    """The folder given for the connector jars is missing some of them."""


def find_jars(folder: str | os.PathLike[str]) -> dict[str, Path | None]:
    """Map each required jar prefix to the newest matching jar in ``folder`` (or None)."""
    folder = Path(folder)
    jars = sorted(folder.glob("*.jar")) if folder.is_dir() else []
    found: dict[str, Path | None] = {}
    for prefix in REQUIRED_JARS:
        matches = [j for j in jars if j.name.startswith(prefix)]
        found[prefix] = matches[-1] if matches else None
    return found


def connector_jars(folder: str | os.PathLike[str]) -> list[Path]:
    """Return every jar in ``folder``, or raise if a required one is absent.

    All jars are returned, not only the required ones, so a folder may carry extras
    (a newer lz4-java, say) without code changes.
    """
    missing = [
        f"{prefix}*.jar ({why})"
        for prefix, why in REQUIRED_JARS.items()
        if find_jars(folder)[prefix] is None
    ]
    if missing:
        raise ConnectorJarsMissing(
            f"{folder} lacks {', '.join(missing)}; see spark_jobs/README.md for where to get them"
        )
    return sorted(Path(folder).glob("*.jar"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.jars",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_check = sub.add_parser("check", help="check a folder of connector jars")
    p_check.add_argument("dir", nargs="?", default=os.environ.get("SPARK_KAFKA_JARS"))
    args = parser.parse_args(argv)

    if not args.dir:
        parser.error("no DIR given and SPARK_KAFKA_JARS is not set")
    ok = True
    for prefix, jar in find_jars(args.dir).items():
        print(f"{'ok     ' if jar else 'MISSING'} {prefix}*.jar  {jar or REQUIRED_JARS[prefix]}")
        ok = ok and jar is not None
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
