"""A TCP proxy whose traffic a test can cut and heal: a network partition on loopback.

Why a proxy: network namespaces need privileges a test run does not have; a broker that
reaches ZooKeeper and is reached by its peers only through proxies can be cut off from
them while the rest keeps working.

`cut()` is a black hole, as a real partition is: the connections through the proxy stay
open but every byte is dropped in both directions, and new connections are accepted and
then ignored, so the other side learns only from its own timeouts (ZooKeeper's session
timeout, a fetch's request timeout). `heal()` closes those dead connections; new ones pass.

`only`: a predicate on the client id of a connection's first Kafka request; when given,
only the connections it accepts are cut (the peers' inter-broker connections) and the
others (clients) always pass. Without it (ZooKeeper) every connection is cut.
"""

from __future__ import annotations

import socket
import struct
import threading
from typing import Callable


def kafka_client_id(frame: bytes) -> str | None:
    """The client id of a request frame (after the size prefix): request header v1+."""
    if len(frame) < 10:
        return None
    length = struct.unpack_from(">h", frame, 8)[0]
    if length < 0:
        return None
    return frame[10:10 + length].decode("utf-8", "replace")


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


class _Link:
    def __init__(self, downstream: socket.socket, upstream: socket.socket | None) -> None:
        self.downstream = downstream
        self.upstream = upstream
        self.dead = False  # bytes are dropped
        self.cuttable = True

    def close(self) -> None:
        for sock in (self.downstream, self.upstream):
            if sock is None:
                continue
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


class CuttableProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1",
                 only: Callable[[str | None], bool] | None = None) -> None:
        self.target = (target_host, target_port)
        self.only = only
        self.cut_off = False
        self.dropped_connections = 0  # connections made while cut (tests look at it)
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept_loop, name=f"proxy-{self.port}", daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    # ------------------------------------------------------------------ control
    def cut(self) -> None:
        with self._lock:
            self.cut_off = True
            for link in self._links:
                if link.cuttable:
                    link.dead = True

    def heal(self) -> None:
        with self._lock:
            self.cut_off = False
            dead = [link for link in self._links if link.dead]
            self._links = [link for link in self._links if not link.dead]
        for link in dead:
            link.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close()

    # ------------------------------------------------------------------ plumbing
    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(downstream,), daemon=True).start()

    def _serve(self, downstream: socket.socket) -> None:
        first = b""
        cuttable = True
        if self.only is not None:
            head = _recv_exact(downstream, 4)
            body = _recv_exact(downstream, struct.unpack(">i", head)[0]) if head else None
            if body is None:
                downstream.close()
                return
            first = head + body
            cuttable = self.only(kafka_client_id(body))
        with self._lock:
            dead = self.cut_off and cuttable
        upstream = None
        if not dead:
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                downstream.close()
                return
        link = _Link(downstream, upstream)
        link.cuttable = cuttable
        link.dead = dead
        with self._lock:
            self._links.append(link)
            if dead:
                self.dropped_connections += 1
        if upstream is None:
            self._drain(downstream, link)
            return
        if first:
            upstream.sendall(first)
        threading.Thread(target=self._pump, args=(upstream, downstream, link), daemon=True).start()
        self._pump(downstream, upstream, link)

    def _drain(self, sock: socket.socket, link: _Link) -> None:
        try:
            while sock.recv(65536):
                pass
        except OSError:
            pass
        link.close()

    def _pump(self, src: socket.socket, dst: socket.socket, link: _Link) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if link.dead:
                    continue
                dst.sendall(data)
        except OSError:
            pass
        if not link.dead:
            link.close()
