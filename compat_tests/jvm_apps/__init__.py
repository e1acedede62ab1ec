"""JVM programs the suite runs unmodified against a broker: a Kafka Streams application,
Kafka Connect workers, MirrorMaker 2 and a Flink job.

The Java sources of the suite's own programs (the Streams application, the Flink job) live beside this
file and are compiled once per source and classpath with `javac` into the git-ignored
`.cache/jvm-apps/`; Kafka Connect and MirrorMaker 2 are Kafka's own main classes
(`ConnectDistributed`, `MirrorMaker`) on the `connect` classpath. Every JVM runs with a
bounded heap, in a session of its own, dies with the test process, and is stopped by its own
PID: SIGTERM (a clean shutdown) or SIGKILL (a crash).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from compat_tests import jvm
from compat_tests.brokers import REPO, die_with_parent, tail

SOURCES = Path(__file__).resolve().parent
CACHE = REPO / ".cache" / "jvm-apps"
# What a small test JVM needs on 2 busy cores: quick to start, small and bounded.
JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-XX:+ExitOnOutOfMemoryError",
             "-Djava.awt.headless=true"]
STOP_TIMEOUT_S = 30.0

# log4j2 in its properties format (the YAML one needs a Jackson module these classpaths lack).
LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = OUT
{loggers}"""


def log4j2_config(path: Path, level: str = "WARN", loggers: dict[str, str] | None = None) -> Path:
    """Write a log4j2 configuration: `level` for everything, `loggers` name -> level."""
    lines = []
    for i, (name, lvl) in enumerate((loggers or {}).items()):
        lines += [f"logger.l{i}.name = {name}", f"logger.l{i}.level = {lvl}"]
    path.write_text(LOG4J2.format(level=level, loggers="".join(line + "\n" for line in lines)))
    return path


def classpath(module: str) -> list[Path]:
    """`module`'s classpath (and a JDK), else a skip naming what is missing -- an error
    under CI (`CI` set, as .ci/run does), which never quietly loses these scenarios."""
    try:
        jvm.java("javac")
        return jvm.classpath(module)
    except jvm.JvmUnavailable as exc:
        if os.environ.get("CI"):
            raise
        import pytest

        pytest.skip(str(exc))


def compile_app(source: str, module: str) -> list[Path]:
    """Compile `source` (a .java file beside this module) against `module`'s classpath;
    returns the classpath to run it with (its classes first)."""
    jars = classpath(module)
    classes = jvm.compile_java(SOURCES / source, jars, CACHE, jvm.java("javac"))
    return [classes, *jars]


class JvmProcess:
    """One JVM: `main` with `args` on `classpath`, output to `workdir/<name>.log`."""

    def __init__(self, name: str, workdir: Path, classpath: list[Path], main: str, args: list[str],
                 heap_mb: int = 256, log_level: str = "WARN",
                 loggers: dict[str, str] | None = None, jvm_props: dict[str, str] | None = None
                 ) -> None:
        self.name = name
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / f"{name}.log"
        log4j = log4j2_config(workdir / f"{name}-log4j2.properties", log_level, loggers)
        props = {"log4j2.configurationFile": str(log4j), **(jvm_props or {})}
        self.argv = [jvm.java(), f"-Xms{min(64, heap_mb)}m", f"-Xmx{heap_mb}m", *JVM_FLAGS,
                     *(f"-D{k}={v}" for k, v in props.items()),
                     "-cp", os.pathsep.join(map(str, classpath)), main, *args]
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self._log_offset = 0

    def start(self) -> None:
        """Start (again): the log is appended to; `wait_for_log` looks at this start's part."""
        assert not self.alive(), f"{self.name} is running already"
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== start #{self.starts}: {' '.join(self.argv[-3:])}\n".encode())
            log.flush()
            self._log_offset = log.tell()
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=self.workdir,
                                         start_new_session=True, preexec_fn=die_with_parent)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def stop(self) -> None:
        """SIGTERM (the JVM's shutdown hooks run), SIGKILL if it has not exited in time."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_TIMEOUT_S)

    def kill(self) -> None:
        """SIGKILL: a crash, no shutdown hook, nothing flushed or closed."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.kill()
        proc.wait(STOP_TIMEOUT_S)

    def output(self) -> str:
        """This start's output so far."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def wait_for_log(self, pattern: str, timeout: float, since: int = 0) -> re.Match:
        """Wait until this start's output (from character `since` on) matches `pattern` (a
        regex); fails with the log when the JVM exits first or the time is up."""
        regex = re.compile(pattern, re.M)
        deadline = time.monotonic() + timeout
        while True:
            found = regex.search(self.output(), since)
            if found:
                return found
            if not self.alive():
                raise AssertionError(f"{self.name} exited ({self.returncode()}) before "
                                     f"/{pattern}/:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no /{pattern}/ after {timeout:.0f}s:\n"
                                     f"{self.log_tail()}")
            time.sleep(0.2)

    def log_tail(self, lines: int = 60) -> str:
        return tail(self.log_path, lines)

    def __repr__(self) -> str:
        return f"<JvmProcess {self.name} pid={self.pid}>"
