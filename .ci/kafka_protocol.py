"""Take what the suites need of Kafka 3.9.2 from PyPI, into .cache/ (never committed).

The kafka-clients 3.9.2 jar ships inside the PyPI wheel atoti-server-kafka (its plugin jar).
One download of that wheel serves two users:

- the schema cross-check tests compare wire/ with Apache Kafka's message definitions
  (`common/message/*.json` in the jar). In the workspace they sit beside the checkout
  (../shared/kafka-protocol/messages); a CI machine has only the clone, so .ci/run exports
  the folder this script prints as $KAFKA_PROTOCOL_MESSAGES.
- the compat suite's Java column (compat_tests/clients/java_client.py) compiles its adapter
  against the client classes (`org/apache/kafka/`, `kafka/`, `common/`), repacked as a jar
  of their own without the wheel's other bundled libraries.

    python .ci/kafka_protocol.py [DEST]                default DEST: .cache/kafka-protocol/messages
    python .ci/kafka_protocol.py --clients-jar [DEST]  default DEST: .cache/java-compat/kafka-clients-3.9.2.jar

Exit status 1 (with the reason on stderr) when the wheel cannot be had: the tests then
skip with the reason, as they do anywhere these files are missing.
"""

from __future__ import annotations

import glob
import io
import pathlib
import subprocess
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
WHEEL = "atoti-server-kafka==0.9.16"
WHEEL_DIR = ROOT / ".cache" / "atoti"
PLUGIN_JAR = "_atoti_server_kafka/__resources__/plugin.jar"
PREFIX = "common/message/"
EXPECTED_FILES = 186  # what Kafka 3.9.2's clients/src/main/resources/common/message holds
CLIENTS_VERSION = "3.9.2"
CLIENTS_JAR = ROOT / ".cache" / "java-compat" / f"kafka-clients-{CLIENTS_VERSION}.jar"
CLIENTS_ENTRIES = ("org/apache/kafka/", "kafka/", "common/")


class Unavailable(Exception):
    """The wheel (or what it should hold) cannot be had; the message says why."""


def plugin_jar() -> zipfile.ZipFile:
    """The kafka-clients jar inside the wheel, downloading the wheel once into .cache/atoti."""
    wheels = sorted(glob.glob(str(WHEEL_DIR / "atoti_server_kafka-*.whl")))
    if not wheels:
        result = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                                 "--only-binary=:all:", "-d", str(WHEEL_DIR), WHEEL],
                                capture_output=True, text=True)
        wheels = sorted(glob.glob(str(WHEEL_DIR / "atoti_server_kafka-*.whl")))
        if result.returncode != 0 or not wheels:
            raise Unavailable(f"cannot download {WHEEL}: {result.stderr.strip()[-500:]}")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        return zipfile.ZipFile(io.BytesIO(wheel.read(PLUGIN_JAR)))


def schemas(dest: pathlib.Path) -> pathlib.Path:
    if len(list(dest.glob("*.json"))) >= EXPECTED_FILES:
        return dest
    jar = plugin_jar()
    names = [n for n in jar.namelist() if n.startswith(PREFIX) and n.endswith(".json")]
    if len(names) < EXPECTED_FILES:
        raise Unavailable(f"{WHEEL}: only {len(names)} schemas under {PREFIX}")
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        (dest / name[len(PREFIX):]).write_bytes(jar.read(name))
    return dest


def clients_jar(dest: pathlib.Path = CLIENTS_JAR) -> pathlib.Path:
    """kafka-clients' own classes and resources as a jar (the Java column's classpath)."""
    if dest.is_file():
        return dest
    jar = plugin_jar()
    version = jar.read("kafka/kafka-version.properties").decode()
    if f"version={CLIENTS_VERSION}" not in version:
        raise Unavailable(f"{WHEEL} carries kafka-clients {version.strip()!r}, not {CLIENTS_VERSION}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as out:
        for info in jar.infolist():
            if info.filename.startswith(CLIENTS_ENTRIES):
                out.writestr(info, jar.read(info))
    partial.replace(dest)  # whole or absent, for concurrent test sessions
    return dest


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["--clients-jar"]:
            print(clients_jar(pathlib.Path(argv[1]) if len(argv) > 1 else CLIENTS_JAR))
        else:
            print(schemas(pathlib.Path(argv[0]) if argv else
                          ROOT / ".cache" / "kafka-protocol" / "messages"))
    except Unavailable as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
