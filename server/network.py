"""The trio TCP server: one task per connection, requests answered in order.

How this works: each connection task reads up to 64 KiB at a time (PERF.md: bigger
reads are slower), feeds a `wire.Connection`, and handles every whole frame that arrived,
in order, collecting the responses and writing them with one `send_all` per read (a send
per response costs 2-3x the CPU at small sizes). Handlers that may wait (Fetch long-poll,
JoinGroup, SyncGroup) first flush what was collected, so earlier answers are not held
behind a wait. `acks=0` produce requests return no response and nothing is written.

A frame that cannot be decoded, or a size prefix over socket.request.max.bytes, is
logged and closes that connection only. A connection idle for connections.max.idle.ms —
including one stuck in the middle of a frame — is closed. Shutdown stops the listeners,
wakes waiting fetches, and lets each connection finish the requests it has.
"""

from __future__ import annotations

import itertools
import logging
import time

import trio

from wire import NEED_DATA, Connection, ProtocolError, Request, UnsupportedRequest
from wire.connection import encode_api_versions_fallback, encode_response
from wire.errors import ErrorCode
from wire.registry import API_VERSIONS, ApiKey, api_name
from wire.schema import in_range
from wire.definitions import MESSAGES

from server.broker import Broker
from server.context import RequestContext
from server.handlers import HANDLERS

log = logging.getLogger("trafka.network")

READ_SIZE = 65536
_connection_ids = itertools.count(1)


class Server:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.connections = 0
        self.max_connections = broker.config.get("max.connections")
        self.idle_s = broker.config.get("connections.max.idle.ms") / 1000
        self.max_frame = broker.config.get("socket.request.max.bytes")
        self.listeners: list[trio.SocketListener] = []
        self._active: set[trio.CancelScope] = set()

    async def serve(self, host: str, port: int, connection_nursery: trio.Nursery,
                    task_status=trio.TASK_STATUS_IGNORED) -> None:
        self.listeners = await trio.open_tcp_listeners(port, host=host)
        task_status.started([l.socket.getsockname() for l in self.listeners])
        async with trio.open_nursery() as accept_nursery:
            for listener in self.listeners:
                accept_nursery.start_soon(self._accept_loop, listener, connection_nursery)

    async def _accept_loop(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except trio.ClosedResourceError:
                return
            except OSError as exc:  # EMFILE and friends: back off, keep serving
                log.warning("accept failed: %s", exc)
                await trio.sleep(0.1)
                continue
            if self.connections >= self.max_connections:
                log.warning("closing new connection: max.connections=%d reached", self.max_connections)
                await stream.aclose()
                continue
            nursery.start_soon(self._connection, stream)

    def close_listeners(self) -> None:
        """Stop accepting, and end connections that are waiting for their next request."""
        for listener in self.listeners:
            listener.socket.close()
        for scope in list(self._active):
            scope.cancel()

    async def _connection(self, stream: trio.SocketStream) -> None:
        conn_id = next(_connection_ids)
        try:
            peer = stream.socket.getpeername()
        except OSError:
            peer = ("?", 0)
        self.connections += 1
        log.debug("connection %d open from %s:%s", conn_id, peer[0], peer[1])
        try:
            await self._serve_connection(stream, conn_id, peer)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            log.debug("connection %d reset by peer", conn_id)
        finally:
            self.connections -= 1
            with trio.CancelScope(shield=True):
                await stream.aclose()
            log.debug("connection %d closed", conn_id)

    async def _serve_connection(self, stream: trio.SocketStream, conn_id: int, peer) -> None:
        conn = Connection(self.max_frame)
        broker = self.broker
        while not broker.shutting_down:
            with trio.move_on_after(self.idle_s) as idle:
                self._active.add(idle)
                try:
                    data = await stream.receive_some(READ_SIZE)
                finally:
                    self._active.discard(idle)
            if broker.shutting_down:
                return
            if idle.cancelled_caught:
                state = "mid-frame" if conn.buffered else "idle"
                log.info("connection %d closed after %.0f s %s (connections.max.idle.ms)", conn_id, self.idle_s, state)
                return
            if not data:
                return
            conn.receive_data(data)
            out: list[bytes] = []
            while True:
                try:
                    request = conn.next_request()
                except ProtocolError as exc:
                    log.warning("connection %d from %s: %s; closing it", conn_id, peer[0], exc)
                    if out:
                        await stream.send_all(b"".join(out))
                    return
                if request is NEED_DATA:
                    break
                handler = HANDLERS.get(request.api_key) if isinstance(request, Request) else None
                if handler is None and isinstance(request, Request):
                    request = UnsupportedRequest(request.api_key, request.api_version, request.correlation_id,
                                                 request.client_id, request.size)
                if out and handler is not None and handler.MAY_BLOCK:
                    await stream.send_all(b"".join(out))
                    out.clear()
                try:
                    response = await self._dispatch(request, handler, conn_id, peer)
                except ProtocolError as exc:
                    log.warning("connection %d from %s: %s", conn_id, peer[0], exc)
                    if out:
                        await stream.send_all(b"".join(out))
                    return
                if response is not None:
                    out.append(response)
            if out:
                await stream.send_all(out[0] if len(out) == 1 else b"".join(out))

    async def _dispatch(self, request, handler, conn_id: int, peer) -> bytes | None:
        if isinstance(request, UnsupportedRequest):
            return self._unsupported(request, conn_id)
        ctx = RequestContext(self.broker, request.api_key, request.api_version, request.correlation_id,
                             request.client_id, peer[0], conn_id)
        try:
            body = await handler.handle(ctx, request.body)
        except ProtocolError:
            raise
        except Exception:
            log.exception("%s v%d handler failed (connection %d, correlation %d)", api_name(request.api_key),
                          request.api_version, conn_id, request.correlation_id)
            body = error_body(request.api_key, request.api_version, request.body, ErrorCode.UNKNOWN_SERVER_ERROR)
            if body is None:
                raise ProtocolErrorClose()
        if body is None:
            return None
        return encode_response(request.api_key, request.api_version, request.correlation_id, body)

    def _unsupported(self, request: UnsupportedRequest, conn_id: int) -> bytes:
        log.warning("connection %d: %s v%d is not supported (client %s)", conn_id, api_name(request.api_key),
                    request.api_version, request.client_id)
        if request.api_key == ApiKey.API_VERSIONS:
            lo, hi = API_VERSIONS[ApiKey.API_VERSIONS]
            return encode_api_versions_fallback(
                request.correlation_id, ErrorCode.UNSUPPORTED_VERSION,
                [{"api_key": ApiKey.API_VERSIONS, "min_version": lo, "max_version": hi}],
            )
        key = (request.api_key, "response")
        if key in MESSAGES and in_range(request.api_version, MESSAGES[key]["valid"]):
            body = error_body(request.api_key, request.api_version, None, ErrorCode.UNSUPPORTED_VERSION)
            if body is not None:
                return encode_response(request.api_key, request.api_version, request.correlation_id, body)
        raise ProtocolErrorClose()


class ProtocolErrorClose(ProtocolError):
    """No response can be shaped for this request: close the connection (logged above)."""

    def __init__(self) -> None:
        super().__init__("no response can be encoded for this request; closing")


def error_body(api_key: int, api_version: int, request_body: dict | None, code: ErrorCode) -> dict | None:
    """A response with `code` in its top-level error field, or None if it has none.

    Used for unsupported versions and handler crashes: the client gets a well-formed
    answer instead of a dropped request.
    """
    from wire.schema import message_struct

    struct = message_struct(api_key, "response", api_version)
    names = {name for name, _t, _d in struct.fields}
    if "error_code" in names:
        return {"error_code": int(code)}
    return None
