"""A blocking Kafka client connection built on `wire/`'s codecs: one request, one outcome.

The differential sends the same bytes to two brokers, so the codec that builds them and
reads the answers is shared: a codec bug cannot make one broker look different from the
other, and a response our codec cannot read is itself reported (an `Outcome` of kind
"undecodable" on one side only is a difference). A broker that closes the connection
instead of answering is an outcome too ("closed"), as Kafka does for requests it cannot
parse; so is no answer within the timeout ("timeout").
"""

from __future__ import annotations

import select
import socket
import struct
from dataclasses import dataclass
from typing import Any

from wire import decode_response, encode_request
from wire.errors import ProtocolError

CLIENT_ID = "protocol-diff"
READ_TIMEOUT_S = 5.0


@dataclass
class Outcome:
    """What one request got: kind "response" (with `body`), "closed", "timeout",
    "undecodable" (with `detail`), or "none" (acks=0: no answer is the answer)."""

    kind: str
    body: dict[str, Any] | None = None
    detail: str = ""
    raw: bytes = b""
    normalised: Any = None  # the body after normalise.py (set when compared)


class WireClient:
    """One connection to one broker; reconnects after the broker closed it."""

    def __init__(self, host: str, port: int, client_id: str = CLIENT_ID) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.sock: socket.socket | None = None
        self.correlation_id = 0

    def _connect(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection((self.host, self.port), timeout=10)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self.sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def send(self, frame: bytes) -> int:
        """Write one framed request (as `encode_request` made it); its correlation id."""
        sock = self._connect()
        sock.sendall(frame)
        return struct.unpack_from(">i", frame, 8)[0]

    def next_correlation_id(self) -> int:
        self.correlation_id += 1
        return self.correlation_id

    def encode(self, api_key: int, version: int, body: dict, header_version: int | None = None,
               client_id: str | None = None) -> bytes:
        """A framed request; `header_version` overrides the version written in the header
        (the body stays encoded at `version`): how a too-new version is sent."""
        frame = bytearray(encode_request(api_key, version, self.next_correlation_id(), body,
                                         client_id=self.client_id if client_id is None else client_id))
        if header_version is not None:
            struct.pack_into(">h", frame, 6, header_version)
        return bytes(frame)

    def receive(self, api_key: int, version: int, correlation_id: int, decode_version: int | None = None,
                timeout: float = READ_TIMEOUT_S) -> Outcome:
        """The answer to the request with `correlation_id` (decoded at `decode_version`,
        default `version`)."""
        sock = self.sock
        assert sock is not None
        try:
            payload = _read_frame(sock, timeout)
        except TimeoutError:
            self.close()
            return Outcome("timeout", detail=f"no answer in {timeout:.0f} s")
        except ConnectionError as exc:
            self.close()
            return Outcome("closed", detail=str(exc))
        got = struct.unpack_from(">i", payload, 0)[0] if len(payload) >= 4 else None
        if got != correlation_id:
            self.close()
            return Outcome("undecodable", detail=f"correlation id {got}, expected {correlation_id}",
                           raw=payload)
        try:
            _cid, body = decode_response(api_key, version if decode_version is None else decode_version,
                                         payload)
        except ProtocolError as exc:
            self.close()
            return Outcome("undecodable", detail=str(exc), raw=payload)
        return Outcome("response", body=body, raw=payload)

    def request(self, api_key: int, version: int, body: dict, timeout: float = READ_TIMEOUT_S) -> Outcome:
        """One round trip (setup steps; the comparison interleaves `send` and `receive`)."""
        frame = self.encode(api_key, version, body)
        try:
            cid = self.send(frame)
        except OSError as exc:
            self.close()
            return Outcome("closed", detail=f"send: {exc}")
        return self.receive(api_key, version, cid, timeout=timeout)


def _read_exact(sock: socket.socket, n: int, timeout: float) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        ready, _, _ = select.select([sock], [], [], timeout)
        if not ready:
            raise TimeoutError
        try:
            chunk = sock.recv(n - len(buf))
        except OSError as exc:  # reset by peer
            raise ConnectionError(str(exc)) from None
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def _read_frame(sock: socket.socket, timeout: float) -> bytes:
    (size,) = struct.unpack(">i", _read_exact(sock, 4, timeout))
    if size < 0 or size > 256 * 1024 * 1024:
        raise ConnectionError(f"implausible frame size {size}")
    return _read_exact(sock, size, timeout)
