"""The JVM programs the suites run beside Trafka, found by their Maven classpaths.

`.ci/jvm/pom.xml` names every JVM artifact the tests and benchmarks use by its Maven
coordinates (Apache Kafka 4.x and 3.9, the kafka-clients of the Java column, Spark's Kafka
connector, Kafka's command-line tools, Kafka Streams, Kafka Connect with MirrorMaker 2,
Flink with its Kafka connector); one
module per classpath. Resolving copies each module's jars into
`.cache/jvm/<module>/` (git-ignored, never committed). `.ci/run` resolves before the tests;
on a developer's machine the first test that needs a classpath resolves it (one `mvn`
run, under a lock so parallel sessions share it). Under CI a classpath that cannot be had
is an error, never a skip.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
POM_DIR = REPO / ".ci" / "jvm"
JVM_DIR = REPO / ".cache" / "jvm"
MODULES = ("kafka", "kafka-3.9", "clients", "spark-kafka", "kafka-tools", "streams", "connect", "flink")
RESOLVE_TIMEOUT_S = 900

# The jar whose presence says a module's folder is complete (copy-dependencies writes the
# others first, in no promised order, so a half-copied folder is told by this one). A marker
# is the artifact id and its dash: the version's first digit must follow, so "kafka-tools-"
# is not met by kafka-tools-api-*.jar.
_MARKERS = {
    "kafka": "kafka_2.13-",
    "kafka-3.9": "kafka_2.13-",
    "clients": "kafka-clients-",
    "spark-kafka": "spark-sql-kafka-0-10_2.13-",
    "kafka-tools": "kafka-tools-",
    "streams": "kafka-streams-",
    "connect": "connect-runtime-",
    "flink": "flink-connector-kafka-",
}


def _is_marker(name: str, marker: str) -> bool:
    return name.startswith(marker) and name[len(marker):len(marker) + 1].isdigit()


class JvmUnavailable(Exception):
    """A classpath or the JDK cannot be had here; the message says why and what to run."""


def resolve_command() -> list[str]:
    return ["mvn", "-q", "-B", "-s", str(POM_DIR / "settings.xml"), "-f", str(POM_DIR / "pom.xml"),
            "package"]


def _complete(module: str) -> bool:
    folder = JVM_DIR / module
    return folder.is_dir() and any(_is_marker(p.name, _MARKERS[module]) for p in folder.glob("*.jar"))


def resolve() -> None:
    """Run Maven once for every module (no-op when all are present)."""
    if all(_complete(m) for m in MODULES):
        return
    if shutil.which("mvn") is None:
        raise JvmUnavailable("no `mvn` on PATH to resolve .ci/jvm/pom.xml (apt-get install maven)")
    JVM_DIR.mkdir(parents=True, exist_ok=True)
    with open(JVM_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if all(_complete(m) for m in MODULES):
            return
        result = subprocess.run(resolve_command(), cwd=REPO, capture_output=True, text=True,
                                timeout=RESOLVE_TIMEOUT_S)
        if result.returncode != 0:
            raise JvmUnavailable(f"{' '.join(resolve_command())} failed:\n"
                                 f"{(result.stdout + result.stderr)[-3000:]}")


def classpath(module: str) -> list[Path]:
    """Every jar of `module` (a module of .ci/jvm/pom.xml), resolving it first if need be."""
    if module not in MODULES:
        raise ValueError(f"unknown JVM module {module!r}; known: {', '.join(MODULES)}")
    if not _complete(module):
        resolve()
    if not _complete(module):
        raise JvmUnavailable(f".cache/jvm/{module} is incomplete after resolving "
                             f"({' '.join(resolve_command())})")
    return sorted((JVM_DIR / module).glob("*.jar"))


def classpath_string(module: str, *extra: Path | str) -> str:
    return os.pathsep.join(str(p) for p in [*extra, *classpath(module)])


def jar(module: str, prefix: str) -> Path:
    """The one jar of `module` whose file name is `prefix` and a version (kafka-tools- finds
    kafka-tools-4.4.0.jar, not kafka-tools-api-4.4.0.jar); else the one it starts with."""
    jars = classpath(module)
    found = [p for p in jars if _is_marker(p.name, prefix)] or [p for p in jars if p.name.startswith(prefix)]
    if not found:
        raise JvmUnavailable(f"no {prefix}*.jar in .cache/jvm/{module}")
    return found[-1]


def version(module: str, prefix: str) -> str:
    """The version in the file name of `jar(module, prefix)` (kafka_2.13-4.4.0.jar -> 4.4.0)."""
    return jar(module, prefix).name[len(prefix):-len(".jar")]


def java(tool: str = "java") -> str:
    """The JDK's `java` (or `javac`), else JvmUnavailable."""
    found = shutil.which(tool)
    if found is None:
        raise JvmUnavailable(f"no `{tool}` on PATH (apt-get install openjdk-17-jdk-headless)")
    return found


def compile_java(source: Path, jars: list[Path], cache: Path, javac: str) -> Path:
    """The classes directory of `source` compiled against `jars`, under `cache`, named by a
    digest of the source and the jar names: compiled once per change, shared by sessions
    running side by side (the first to finish renames its staging directory into place).
    A compile error is a bug of the suite, never a skip: RuntimeError with javac's output."""
    digest = hashlib.sha256(source.read_bytes())
    for jar in jars:
        digest.update(jar.name.encode())
    classes = cache / f"{source.stem}-{digest.hexdigest()[:16]}"
    if not (classes / f"{source.stem}.class").is_file():
        cache.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="classes-", dir=cache))
        result = subprocess.run([javac, "-nowarn", "-d", str(staging),
                                 "-cp", os.pathsep.join(map(str, jars)), str(source)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise RuntimeError(f"javac {source.name} failed:\n{result.stderr[-3000:]}")
        try:
            staging.rename(classes)
        except OSError:  # another session compiled the same source meanwhile
            shutil.rmtree(staging, ignore_errors=True)
    return classes
