"""A real standalone ZooKeeper from Debian's `zookeeper` package: what `trafka dev cluster`
starts for a try-out, and what the tests start once per test session.

    server = ZooKeeperServer()
    server.start()                      # free loopback port, tmp data dir, waits until it serves
    server.connect_string               # "127.0.0.1:PORT"
    server.chroot_connect_string()      # "127.0.0.1:PORT/test-<uuid>": a fresh namespace per test
    server.stop() / server.kill() / server.restart()

Import-light on purpose (standard library only, no trio): the tests, compat_tests and the
benchmarks use it from their own processes (`from cli.zookeeper_server import
ZooKeeperServer`).

The server is started the way zkServer.sh would, minus its wrapper:
`java -cp <zookeeper.jar and its dependencies> org.apache.zookeeper.server.ZooKeeperServerMain
zoo.cfg`, with the AdminServer (an HTTP port) off and no four-letter-word commands
whitelisted (ZooKeeper always keeps `srvr`).
Readiness is a real ZooKeeper handshake (ConnectRequest → ConnectResponse): a listening
socket alone is not enough, since the port is bound before the database is loaded.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

JAVA_DIR = Path("/usr/share/java")
ZOOKEEPER_JAR = JAVA_DIR / "zookeeper.jar"
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
# A member of an ensemble runs the quorum peer (leader election among the members).
QUORUM_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# What ZooKeeper 3.8's server needs at run time (its jar's manifest lists most of them; we
# name them so the command line says what runs). slf4j-simple: the server's log, at WARN.
CLASSPATH_JARS = (
    "zookeeper.jar", "zookeeper-jute.jar",
    "netty-handler.jar", "netty-common.jar", "netty-buffer.jar", "netty-transport.jar", "netty-codec.jar",
    "netty-resolver.jar", "netty-transport-native-epoll.jar", "netty-transport-native-unix-common.jar",
    "slf4j-api.jar", "slf4j-simple.jar", "metrics-core.jar", "commons-cli.jar", "commons-io.jar",
    "snappy-java.jar", "audience-annotations.jar", "jline.jar",
)
# Short ticks so that session expiry (checked every tick) is quick, and a session timeout
# range wide enough for both fast tests (1 s) and Kafka's default 18 s.
TICK_MS = 500
MIN_SESSION_TIMEOUT_MS = 1000
MAX_SESSION_TIMEOUT_MS = 60000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ZooKeeperServer:
    """One standalone ZooKeeper process on 127.0.0.1 with its own data dir."""

    def __init__(self, port: int | None = None, data_dir: str | os.PathLike | None = None, *,
                 my_id: int | None = None, quorum: dict[int, tuple[int, int, int]] | None = None) -> None:
        """`my_id` and `quorum` (member id -> (client, peer, election) ports) make it one
        member of an ensemble (see `ZooKeeperEnsemble`); without them it is standalone."""
        self.my_id = my_id
        self.quorum = quorum
        self.port = port or (quorum[my_id][0] if quorum and my_id is not None else free_port())
        self._own_dir = data_dir is None
        self.base_dir = Path(tempfile.mkdtemp(prefix="trafka-zk-")) if data_dir is None else Path(data_dir)
        self.proc: subprocess.Popen | None = None
        self._atexit = False

    # --- availability ----------------------------------------------------------------

    @staticmethod
    def unavailable_reason() -> str | None:
        """Why no ZooKeeper can run here (None if it can)."""
        if shutil.which("java") is None:
            return "no java on PATH (ZooKeeper needs a JRE: apt-get install openjdk-17-jdk-headless)"
        if not ZOOKEEPER_JAR.exists():
            return f"{ZOOKEEPER_JAR} not found (apt-get install zookeeper)"
        return None

    @classmethod
    def available(cls) -> bool:
        return cls.unavailable_reason() is None

    # --- addresses -------------------------------------------------------------------

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    def chroot_connect_string(self, prefix: str = "test") -> str:
        """A connect string with a fresh chroot, so each test sees only its own znodes."""
        return f"{self.connect_string}/{prefix}-{uuid.uuid4().hex[:12]}"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "zookeeper.log"

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # --- lifecycle -------------------------------------------------------------------

    def _write_config(self) -> Path:
        data = self.base_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.base_dir / "zoo.cfg"
        cfg.write_text(
            f"tickTime={TICK_MS}\n"
            f"dataDir={data}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            f"minSessionTimeout={MIN_SESSION_TIMEOUT_MS}\n"
            f"maxSessionTimeout={MAX_SESSION_TIMEOUT_MS}\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=\n"
            "autopurge.purgeInterval=0\n"
            + ("initLimit=20\nsyncLimit=10\n" + "".join(
                f"server.{sid}=127.0.0.1:{peer}:{election}\n" for sid, (_c, peer, election) in sorted(self.quorum.items()))
               if self.quorum else "")
        )
        if self.quorum:
            (data / "myid").write_text(f"{self.my_id}\n")
        return cfg

    def command(self) -> list[str]:
        classpath = ":".join(str(JAVA_DIR / j) for j in CLASSPATH_JARS if (JAVA_DIR / j).exists())
        return ["java", "-Xms16m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Dzookeeper.admin.enableServer=false", "-Dzookeeper.4lw.commands.whitelist=",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-cp", classpath, QUORUM_MAIN_CLASS if self.quorum else MAIN_CLASS, str(self._write_config())]

    def start(self, timeout: float = 30.0, wait: bool = True) -> ZooKeeperServer:
        """Start the process and (with `wait`) return once it serves a session; a member of
        an ensemble serves only once a quorum of members has elected a leader."""
        reason = self.unavailable_reason()
        if reason:
            raise RuntimeError(f"cannot start ZooKeeper: {reason}")
        if self.running:
            return self
        self.base_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.base_dir, start_new_session=True)
        finally:
            log.close()
        if not self._atexit:  # no orphaned JVM if the test process ends without stop()
            atexit.register(self.kill)
            self._atexit = True
        if wait:
            self.wait_until_serving(timeout)
        return self

    def wait_until_serving(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.answers():
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"ZooKeeper did not answer on {self.connect_string} within {timeout}s:\n"
                                   f"{self.log_tail()}")
            time.sleep(0.1)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (a clean shutdown), SIGKILL if it lingers."""
        self._signal(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """SIGKILL: a crash. Sessions survive in the snapshot/log and resume on restart."""
        self._signal(signal.SIGKILL, 10.0)

    def _signal(self, sig: int, timeout: float) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def restart(self, timeout: float = 30.0) -> ZooKeeperServer:
        """Stop and start again on the same port and data dir (znodes and sessions survive)."""
        self.stop()
        return self.start(timeout)

    def close(self) -> None:
        """Stop and remove the data dir (if this object made it)."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- readiness: one ZooKeeper handshake ---------------------------------------------

    def answers(self, timeout: float = 1.0) -> bool:
        """Whether the server completes a ConnectRequest (then the session is closed again)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
                # ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly
                body = struct.pack(">iqiqi16s?", 0, 0, MIN_SESSION_TIMEOUT_MS, 0, 16, b"\0" * 16, False)
                s.sendall(struct.pack(">i", len(body)) + body)
                (length,) = struct.unpack(">i", recv_exact(s, 4))
                reply = recv_exact(s, length)
                _, negotiated, session_id = struct.unpack_from(">iiq", reply)
                if negotiated <= 0 or session_id == 0:
                    return False
                # closeSession (xid 1, OpCode.closeSession = -11), so no session lingers
                s.sendall(struct.pack(">iii", 8, 1, -11))
                try:
                    recv_exact(s, 4)
                except OSError:
                    pass
                return True
        except (OSError, struct.error):
            return False


class ZooKeeperEnsemble:
    """Three (or `size`) ZooKeeper members on loopback forming one ensemble: what
    `zookeeper.connect=h1:p1,h2:p2,h3:p3` points at in production. It serves while a
    majority of members runs."""

    def __init__(self, size: int = 3, base_dir: str | os.PathLike | None = None) -> None:
        self.base_dir = Path(tempfile.mkdtemp(prefix="trafka-zk-ensemble-")) if base_dir is None else Path(base_dir)
        self._own_dir = base_dir is None
        quorum = {sid: (free_port(), free_port(), free_port()) for sid in range(1, size + 1)}
        self.members = {sid: ZooKeeperServer(data_dir=self.base_dir / f"zk{sid}", my_id=sid, quorum=quorum)
                        for sid in quorum}

    @property
    def connect_string(self) -> str:
        return ",".join(m.connect_string for m in self.members.values())

    def chroot_connect_string(self, prefix: str = "test") -> str:
        return f"{self.connect_string}/{prefix}-{uuid.uuid4().hex[:12]}"

    def start(self, timeout: float = 60.0) -> ZooKeeperEnsemble:
        for member in self.members.values():
            member.start(wait=False)
        for member in self.members.values():
            member.wait_until_serving(timeout)
        return self

    def close(self) -> None:
        for member in self.members.values():
            member.kill()
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> ZooKeeperEnsemble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def recv_exact(s: socket.socket, n: int) -> bytes:
    """Exactly `n` bytes from a blocking socket (ConnectionError if it closes first)."""
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out
