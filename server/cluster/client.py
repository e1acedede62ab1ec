"""Connections from this broker to the other brokers of a cluster, for inter-broker requests.

`BrokerClient` is one Kafka client connection to one broker (the controller's LeaderAndIsr,
UpdateMetadata and StopReplica, a leader's AlterPartition to the controller, a follower's
Fetch and OffsetForLeaderEpoch to a leader). `BrokerChannels` keeps one per remote broker id,
from the endpoints the caller knows (/brokers/ids/N, or UpdateMetadata's live brokers).

How a connection works (Kafka's NetworkClient, in trio, without a background task):
- connect lazily on the first request, then ApiVersions v3 naming the client software
  ("trafka", KIP-511); the peer's ranges are kept in `api_versions` so callers can pick
  versions (Kafka caps e.g. AlterPartition by what the controller advertises);
- requests are pipelined: each gets the next correlation id and is written whole under a
  send lock, then waits for its answer. Kafka answers in order on a connection, so the
  waiting tasks take turns (a fair trio.Lock) reading one frame each and hand it to the
  oldest request still waiting; a frame whose correlation id is not that one's breaks the
  connection. Bytes read so far stay in the connection's buffer, so a task cancelled
  while reading leaves nothing half-consumed;
- a request not answered within `timeout_s` raises `RequestTimedOut` and closes the
  connection, as Kafka's client does (a peer that does not answer one request is not
  trusted with the others): the other requests in flight on it get `ConnectionLost`;
- a broken connection (peer closed, reset, bad frame) fails every request in flight with
  `ConnectionLost`; the next request opens a new connection. Nothing is retried here:
  whether resending is safe depends on the request (the controller resends LeaderAndIsr;
  a Produce would not be), so that is the caller's decision.
When the inter-broker listener is SASL_PLAINTEXT / SASL_SSL, each new connection
authenticates after ApiVersions (and after the TLS handshake): SaslHandshake v1 naming
the mechanism, then SaslAuthenticate v2 with the tokens of `sasl` (the credentials of
server/security/sasl/client.py) until the exchange ends. A refusal is logged (which
broker, mechanism, the broker's message) and raised as `SaslAuthenticationFailed`, a
ConnectionFailed: callers retry it as they retry a broker that cannot be reached. A session
lifetime (KIP-368) is honoured by opening a new, freshly authenticated connection once
85% of it has passed, at the first request that finds the connection idle.
Sockets are trio's, so nothing here blocks the event loop; closing is synchronous (a trio
socket's close wakes the tasks waiting on it), so a client can be dropped from anywhere.
"""

from __future__ import annotations

import collections
import importlib.metadata
import itertools
import logging
import socket
import ssl
import struct
from dataclasses import dataclass, field
from typing import Any, Callable

import trio

from server.errors import KafkaError
from wire import ApiKey, ProtocolError, decode_response, encode_request
from wire.connection import DEFAULT_MAX_FRAME_SIZE
from wire.errors import ErrorCode

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_RECEIVE_CHUNK = 64 * 1024
HANDSHAKE_VERSION = 3  # ApiVersions v3: the first that names the client software (KIP-511)
CLIENT_SOFTWARE_NAME = "trafka"


def _software_version() -> str:
    try:
        return importlib.metadata.version("trafka")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


CLIENT_SOFTWARE_VERSION = _software_version()
DEFAULT_REQUEST_TIMEOUT_S = 30.0  # Kafka's request.timeout.ms
DEFAULT_CONNECT_TIMEOUT_S = 10.0  # Kafka's socket.connection.setup.timeout.ms


class BrokerClientError(KafkaError):
    """A request to another broker failed without an answer (the base of the errors below)."""

    code = ErrorCode.NETWORK_EXCEPTION


class ConnectionFailed(BrokerClientError):
    """The broker could not be reached (refused, unreachable, no answer to the connect or the
    ApiVersions handshake). The request was not sent."""


class SaslAuthenticationFailed(ConnectionFailed):
    """The broker refused this broker's SASL credentials (or its mechanism); no request
    was sent. Retried like any connection failure: the credentials may become valid
    (a SCRAM user created later) and the peer's log says why it refused."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED


class ConnectionLost(BrokerClientError):
    """The connection broke while the request was in flight: it may or may not have been
    processed by the peer."""


class RequestTimedOut(BrokerClientError):
    """No answer within the request's timeout; the connection has been closed."""

    code = ErrorCode.REQUEST_TIMED_OUT


class HandshakeFailed(BrokerClientError):
    """The peer answered ApiVersions with an error (its code is this error's code)."""


class UnknownBroker(BrokerClientError):
    """`BrokerChannels` has no endpoint for that broker id (not live, or not told yet)."""

    code = ErrorCode.BROKER_NOT_AVAILABLE


class ClientClosed(BrokerClientError):
    """The client was closed (shutdown, or the broker left the cluster)."""


_PENDING = object()


@dataclass(eq=False)
class _InFlight:
    """One request waiting for its answer, in send order on its connection."""

    correlation_id: int
    api_key: int
    api_version: int
    result: Any = _PENDING  # the decoded body, or the exception to raise
    abandoned: bool = False  # the caller gave up (cancelled): the answer is read and dropped
    decode: Callable[[bytearray], Any] | None = None  # the caller's decoder (`request(decode=...)`)


def _socket_of(stream: trio.abc.Stream):
    """The trio socket under a connection (an SSLStream's is its transport's)."""
    return getattr(stream, "transport_stream", stream).socket


@dataclass(eq=False)
class _Connection:
    """One TCP connection and the requests in flight on it."""

    stream: trio.abc.Stream  # a SocketStream, or an SSLStream over one
    in_flight: collections.deque = field(default_factory=collections.deque)
    send_lock: trio.Lock = field(default_factory=trio.Lock)
    receive_lock: trio.Lock = field(default_factory=trio.Lock)  # fair: readers take turns in order
    buffer: bytearray = field(default_factory=bytearray)
    broken: BrokerClientError | None = None
    renew_at: float | None = None  # trio time after which the SASL session should be renewed (KIP-368)

    def fail(self, error: BrokerClientError) -> None:
        """Close the socket and fail every request in flight with `error` (idempotent)."""
        if self.broken is not None:
            return
        self.broken = error
        while self.in_flight:
            entry = self.in_flight.popleft()
            if entry.result is _PENDING:
                entry.result = error
        try:
            _socket_of(self.stream).close()
        except OSError:  # pragma: no cover - closing a socket does not fail in practice
            pass


class BrokerClient:
    """A client connection to one broker: `await request(api_key, version, body)`.

    `broker_id` is only for messages. Safe to use from many tasks at once (requests are
    pipelined on the one connection). `close()` fails what is in flight with `ClientClosed`;
    a closed client refuses new requests.
    """

    def __init__(self, host: str, port: int, *, broker_id: int | None = None, client_id: str = "trafka",
                 connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, ssl_context: "ssl.SSLContext | None" = None,
                 sasl: Any = None) -> None:
        self.host = host
        self.sasl = sasl  # server.security.sasl.client.Credentials: the inter-broker listener is SASL
        self.ssl_context = ssl_context  # the inter-broker listener is SSL (server/security/tls.py)
        self.port = port
        self.broker_id = broker_id
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self.max_frame_size = max_frame_size
        self.api_versions: dict[int, tuple[int, int]] = {}  # the peer's ranges, from the last handshake
        self.connections_opened = 0
        self._conn: _Connection | None = None
        self._connect_lock = trio.Lock()
        self._correlation_ids = itertools.count(1)
        self._closed = False
        self._last_refusal: tuple[str, float] | None = None

    def __repr__(self) -> str:
        who = f"broker {self.broker_id} " if self.broker_id is not None else ""
        return f"<BrokerClient {who}at {self.host}:{self.port}>"

    @property
    def connected(self) -> bool:
        return self._conn is not None and self._conn.broken is None

    @property
    def in_flight(self) -> int:
        """Requests sent on the current connection and not yet answered."""
        return len(self._conn.in_flight) if self.connected else 0

    async def connect(self) -> None:
        """Open the connection and handshake now, rather than on the first request."""
        with trio.move_on_after(self.connect_timeout_s) as scope:
            await self._connection()
        if scope.cancelled_caught:
            raise ConnectionFailed(f"{self}: no connection within {self.connect_timeout_s} s")

    async def request(self, api_key: int, version: int, body: dict[str, Any] | None,
                      timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S, *,
                      encode: Callable[[int], bytes] | None = None,
                      decode: Callable[[bytearray], Any] | None = None) -> Any:
        """Send one request and return the decoded response body.

        Raises RequestTimedOut (nothing within `timeout_s`, connecting included),
        ConnectionFailed, ConnectionLost or ClientClosed; an error *inside* the response
        (error_code fields) is the caller's to read. The request must expect an answer
        (not a Produce with acks=0).

        A caller with a codec of its own (the replica fetcher's Fetch,
        wire/fetch_codec.py) passes `encode` (correlation id -> the whole frame,
        size prefix included; `body` is then unused) and `decode` (the response frame
        after its size prefix -> what this returns; ProtocolError if it does not decode).
        """
        entry: _InFlight | None = None
        conn: _Connection | None = None
        with trio.move_on_after(timeout_s):
            conn = await self._connection()
            entry = await self._send(conn, api_key, version, body, encode, decode)
            try:
                return await self._wait(conn, entry)
            except BaseException:
                entry.abandoned = True  # cancelled while waiting: its answer is read and dropped
                raise
        name = _api_name(api_key)
        if entry is None:
            # Still connecting, or stuck writing (a peer that stopped reading): not sent whole.
            raise RequestTimedOut(f"{self}: {name} v{version} not sent within {timeout_s} s")
        if conn is not None:
            conn.fail(ConnectionLost(f"{self}: connection closed after {name} (correlation "
                                     f"{entry.correlation_id}) timed out"))
        if self._conn is conn:
            self._conn = None
        raise RequestTimedOut(f"{self}: no answer to {name} v{version} (correlation {entry.correlation_id}) "
                              f"within {timeout_s} s")

    def close(self) -> None:
        """Close the connection; requests in flight raise ClientClosed, new ones too."""
        self._closed = True
        if self._conn is not None:
            self._conn.fail(ClientClosed(f"{self} closed"))
            self._conn = None

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> "BrokerClient":
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    async def _connection(self) -> _Connection:
        """The open connection, or a new one (connected and handshaken) if there is none."""
        if self._closed:
            raise ClientClosed(f"{self} closed")
        conn = self._conn
        if conn is not None and conn.broken is None and conn.renew_at is not None and not conn.in_flight \
                and trio.current_time() >= conn.renew_at:
            log.info("%s: SASL session lifetime nearly over; opening a new connection", self)
            conn.fail(ConnectionLost(f"{self}: SASL session renewed"))
        if conn is not None and conn.broken is None:
            if conn.in_flight or not _peer_closed(conn):
                return conn
            # Closed while idle (the peer restarted, or its idle timeout): this request was
            # not sent, so a new connection carries it rather than failing it.
            log.info("%s: connection closed by the peer while idle; reconnecting", self)
            conn.fail(ConnectionLost(f"{self}: connection closed by the peer while idle"))
        async with self._connect_lock:
            if self._closed:
                raise ClientClosed(f"{self} closed")
            if self._conn is not None and self._conn.broken is None:
                return self._conn
            self._conn = None
            with trio.move_on_after(self.connect_timeout_s) as scope:
                try:
                    stream = await trio.open_tcp_stream(self.host, self.port)
                except OSError as exc:
                    raise ConnectionFailed(f"{self}: cannot connect: {exc}") from exc
                if self.ssl_context is not None:
                    stream = trio.SSLStream(stream, self.ssl_context, server_hostname=self.host)
                    try:
                        await stream.do_handshake()
                    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                        await trio.aclose_forcefully(stream)
                        raise ConnectionFailed(f"{self}: TLS handshake failed: {exc.__cause__ or exc}") from exc
            if scope.cancelled_caught:
                raise ConnectionFailed(f"{self}: connect timed out after {self.connect_timeout_s} s")
            conn = _Connection(stream)
            try:
                await self._handshake(conn)
                if self.sasl is not None:
                    await self._authenticate(conn)
            except BaseException as exc:
                conn.fail(exc if isinstance(exc, BrokerClientError) else ConnectionFailed(f"{self}: handshake: {exc}"))
                if isinstance(exc, ConnectionLost):
                    raise ConnectionFailed(f"{self}: connection lost during the handshake") from exc
                raise
            self.connections_opened += 1
            if self._closed:  # closed while connecting
                conn.fail(ClientClosed(f"{self} closed"))
                raise ClientClosed(f"{self} closed")
            self._conn = conn
            log.debug("%s: connected (ApiVersions v%d)", self, HANDSHAKE_VERSION)
            return conn

    async def _handshake(self, conn: _Connection) -> None:
        body = {"client_software_name": CLIENT_SOFTWARE_NAME, "client_software_version": CLIENT_SOFTWARE_VERSION}
        entry = await self._send(conn, ApiKey.API_VERSIONS, HANDSHAKE_VERSION, body)
        response = await self._wait(conn, entry)
        if response["error_code"] != ErrorCode.NONE:
            try:
                code = ErrorCode(response["error_code"])
            except ValueError:
                code = ErrorCode.UNKNOWN_SERVER_ERROR
            raise HandshakeFailed(f"{self}: ApiVersions v{HANDSHAKE_VERSION} answered error "
                                  f"{response['error_code']}", code)
        self.api_versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"]}

    async def _authenticate(self, conn: _Connection) -> None:
        """SaslHandshake v1 + SaslAuthenticate v2 until the mechanism has nothing more to
        send; SaslAuthenticationFailed (logged) when the broker refuses."""
        Code = ErrorCode
        mechanism = self.sasl.mechanism
        entry = await self._send(conn, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
        response = await self._wait(conn, entry)
        if response["error_code"] != Code.NONE:
            self._refused(mechanism, response["error_code"],
                          f"mechanism not enabled there (it offers {', '.join(response['mechanisms'])})")
        exchange = self.sasl.exchange()
        token: bytes | None = exchange.first()
        lifetime_ms = 0
        while token is not None:
            entry = await self._send(conn, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
            response = await self._wait(conn, entry)
            if response["error_code"] != Code.NONE:
                self._refused(mechanism, response["error_code"], response["error_message"] or "")
            try:
                token = exchange.respond(bytes(response["auth_bytes"]))
            except Exception as exc:  # ServerNotProven: the peer does not know our credential
                self._refused(mechanism, Code.SASL_AUTHENTICATION_FAILED, f"server not authenticated: {exc}")
            lifetime_ms = response["session_lifetime_ms"]
        if lifetime_ms > 0:
            conn.renew_at = trio.current_time() + lifetime_ms * 0.85 / 1000
        log.debug("%s: authenticated with SASL/%s as %s", self, mechanism, self.sasl.username)

    def _refused(self, mechanism: str, error_code: int, message: str) -> None:
        try:
            name = ErrorCode(error_code).name
        except ValueError:
            name = str(error_code)
        text = (f"{self}: SASL/{mechanism} authentication as {self.sasl.username!r} failed: {name}: {message}")
        # Every retry is refused the same way: said once, then again at most every 60 s.
        now = trio.current_time()
        if self._last_refusal is None or self._last_refusal[0] != text or now - self._last_refusal[1] >= 60:
            log.error("%s", text)
            self._last_refusal = (text, now)
        raise SaslAuthenticationFailed(text, ErrorCode.SASL_AUTHENTICATION_FAILED)

    async def _send(self, conn: _Connection, api_key: int, version: int, body: dict[str, Any] | None,
                    encode: Callable[[int], bytes] | None = None,
                    decode: Callable[[bytearray], Any] | None = None) -> _InFlight:
        """Write one request frame and register it as in flight (atomically, in order)."""
        lock = conn.send_lock
        await _acquire(lock)
        try:
            if conn.broken is not None:
                raise conn.broken
            correlation_id = next(self._correlation_ids) & 0x7FFFFFFF
            if encode is not None:
                frame = encode(correlation_id)
            else:
                frame = encode_request(api_key, version, correlation_id, body, client_id=self.client_id)
            entry = _InFlight(correlation_id, api_key, version, decode=decode)
            conn.in_flight.append(entry)
            try:
                await conn.stream.send_all(frame)
            except BaseException as exc:  # a partly written frame leaves the stream unusable
                conn.fail(ConnectionLost(f"{self}: sending {_api_name(api_key)}: {exc!r}"))
                if isinstance(exc, (trio.BrokenResourceError, trio.ClosedResourceError, OSError)):
                    raise conn.broken from exc
                raise
            return entry
        finally:
            lock.release()

    async def _wait(self, conn: _Connection, entry: _InFlight) -> dict[str, Any]:
        """Read frames in turn with the other waiters until `entry` has its answer."""
        lock = conn.receive_lock
        while entry.result is _PENDING:
            await _acquire(lock)
            try:
                if entry.result is not _PENDING:
                    break
                if conn.broken is not None:  # pragma: no cover - fail() settles every entry
                    raise conn.broken
                frame = await self._read_frame(conn)
                if frame is None:
                    break  # the connection failed: entry.result holds the error
                head = conn.in_flight.popleft() if conn.in_flight else None
                got = _SIZE.unpack_from(frame, 0)[0] if len(frame) >= 4 else None
                if head is None or got != head.correlation_id:
                    expected = head.correlation_id if head else "none"
                    if head is not None:
                        conn.in_flight.appendleft(head)
                    conn.fail(ConnectionLost(f"{self}: answer with correlation id {got}, expected {expected}"))
                    break
                if head.abandoned:
                    continue
                try:
                    if head.decode is not None:
                        head.result = head.decode(frame)
                    else:
                        _cid, head.result = decode_response(head.api_key, head.api_version, frame)
                except ProtocolError as exc:
                    conn.in_flight.appendleft(head)
                    conn.fail(ConnectionLost(f"{self}: bad {_api_name(head.api_key)} response: {exc}"))
            finally:
                lock.release()
        if isinstance(entry.result, BaseException):
            raise entry.result
        return entry.result

    async def _read_frame(self, conn: _Connection) -> bytearray | None:
        """The next whole response frame (without its size prefix), or None after failing
        the connection. Cancellation-safe: partial bytes stay in `conn.buffer`."""
        buffer = conn.buffer
        while True:
            if len(buffer) >= 4:
                size = _SIZE.unpack_from(buffer, 0)[0]
                if size < 4 or size > self.max_frame_size:
                    conn.fail(ConnectionLost(f"{self}: response frame size {size} outside 4..{self.max_frame_size}"))
                    return None
                if len(buffer) >= 4 + size:
                    frame = buffer[4:4 + size]
                    del buffer[:4 + size]
                    return frame
            try:
                data = await conn.stream.receive_some(_RECEIVE_CHUNK)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                conn.fail(ConnectionLost(f"{self}: connection broken: {exc!r}"))
                return None
            if not data:
                conn.fail(ConnectionLost(f"{self}: connection closed by the peer"))
                return None
            buffer += data


def _peer_closed(conn: _Connection) -> bool:
    """True if the peer has closed (or reset) an idle connection, without blocking.

    A trio socket always waits when nothing is readable, so this peeks with MSG_DONTWAIT
    on the stdlib socket trio wraps (one recv: this runs before every request on an idle
    connection — each replica fetch — where a dup, a new socket object and a close used to
    cost four system calls). No data: open; b"": closed.
    """
    sock = _socket_of(conn.stream)
    raw = getattr(sock, "_sock", None)  # trio's SocketType wraps a stdlib socket
    try:
        if raw is not None:
            return raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        dup = socket.fromfd(sock.fileno(), sock.family, sock.type)
        try:
            return dup.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        finally:
            dup.close()
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


async def _acquire(lock: trio.Lock) -> None:
    """Take `lock`, without a pass through the scheduler when it is free and nobody waits
    (trio's `acquire` always yields once: two passes per request on the replica fetch
    path, which is every acks=all round trip). Fairness is kept: `acquire_nowait` refuses
    while others wait."""
    try:
        lock.acquire_nowait()
    except trio.WouldBlock:
        await lock.acquire()


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"API_{api_key}"


class BrokerChannels:
    """One `BrokerClient` per remote broker id, made on first use from the known endpoints.

    The caller (controller, replica fetchers, the AlterPartition sender) feeds
    `update_endpoints` with the live brokers it knows; a broker missing from the map has
    left and its client is closed, one whose endpoint changed gets a new client.
    `close()` at shutdown closes them all.
    """

    def __init__(self, client_id: str = "trafka", **client_options: Any) -> None:
        self.client_id = client_id
        self.client_options = client_options
        self._endpoints: dict[int, tuple[str, int]] = {}
        self._clients: dict[int | tuple[int, int], BrokerClient] = {}
        self._closed = False

    @property
    def endpoints(self) -> dict[int, tuple[str, int]]:
        return dict(self._endpoints)

    def update_endpoints(self, endpoints: dict[int, tuple[str, int]]) -> None:
        """Replace the known brokers with `endpoints` (broker id -> (host, port))."""
        for broker_id in list(self._endpoints):
            if broker_id not in endpoints:
                self.remove(broker_id)
        for broker_id, endpoint in endpoints.items():
            endpoint = (endpoint[0], int(endpoint[1]))
            if self._endpoints.get(broker_id) != endpoint:
                self._close_clients(broker_id)
                self._endpoints[broker_id] = endpoint

    def remove(self, broker_id: int) -> None:
        """Forget a broker that left: its clients are closed (requests in flight fail)."""
        self._endpoints.pop(broker_id, None)
        self._close_clients(broker_id)

    def _close_clients(self, broker_id: int) -> None:
        for key in [k for k in self._clients if k == broker_id or (type(k) is tuple and k[0] == broker_id)]:
            self._clients.pop(key).close()

    def client(self, broker_id: int, connection: int = 0) -> BrokerClient:
        """The client for `broker_id`, created on first use; UnknownBroker if not known.
        `connection` > 0 asks for another connection to the same broker (the replica
        fetchers beyond the first: a parked Fetch holds up its connection's next request)."""
        if self._closed:
            raise ClientClosed("broker channels closed")
        key = broker_id if connection == 0 else (broker_id, connection)
        client = self._clients.get(key)
        if client is None:
            endpoint = self._endpoints.get(broker_id)
            if endpoint is None:
                raise UnknownBroker(f"no endpoint known for broker {broker_id}")
            client = self._clients[key] = BrokerClient(endpoint[0], endpoint[1], broker_id=broker_id,
                                                       client_id=self.client_id, **self.client_options)
        return client

    async def request(self, broker_id: int, api_key: int, version: int, body: dict[str, Any],
                      timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S) -> dict[str, Any]:
        """`client(broker_id).request(...)`."""
        return await self.client(broker_id).request(api_key, version, body, timeout_s)

    def close(self) -> None:
        self._closed = True
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    async def aclose(self) -> None:
        self.close()
