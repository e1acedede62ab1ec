"""The trio server: one task per connection, requests answered in order.

How this works: each connection task reads up to 64 KiB at a time (bigger reads are
slower: docs/design/performance.md#socket-reads-of-64-kib), feeds a `wire.Connection`, and
handles every whole frame that arrived,
in order, collecting the responses and writing them with one `send_all` per read (a send
per response costs 2-3x the CPU at small sizes). Handlers that may wait (Fetch long-poll,
JoinGroup, SyncGroup) first flush what was collected, so earlier answers are not held
behind a wait. An answer that waits only after its in-order part is done (acks=all in a
cluster) is a `DelayedResponse` (server/delayed.py): it waits in a task of its own while
the connection goes on, and a per-connection queue keeps the answers in request order.
`acks=0` produce requests return no response and nothing is written.

A connection is any `trio.abc.Stream` plus the peer's address (`serve_stream`): the
listeners hand it TCP sockets, tests hand it in-memory streams. Responses are parts
(`wire.Connection.send`): bytes, and `FileRegion`s where Fetch serves a span of a
segment (server/regions.py). Over a `trio.SocketStream` regions go out with os.sendfile
from the page cache, the bytes before each with MSG_MORE so they ride in its first
packet; over any other stream (TLS: trio.SSLStream) they are pread into one buffer with
the rest of the response and sent with one send_all. Every region
is released once, whether sent, dropped by an error, or left when the connection closes.

Listeners (server/listeners.py) are bound together by `serve_listeners`; each
accepted connection knows its listener. On an SSL / SASL_SSL listener the connection's own
task runs the TLS handshake (bounded by trafka.ssl.handshake.timeout.ms, so it never holds
up other connections) before serving it over a `trio.SSLStream`; a failed handshake (a
plaintext client on a TLS port) is logged and closes only that connection.

Per connection a `Session` (server/session.py) holds who the client is — its listener,
security protocol and, with a client certificate, its principal; each request's
`RequestContext` points to it.

Errors close only their connection: a `RemoteProtocolError` (the peer sent a frame that
does not decode, or one over socket.request.max.bytes) is logged as a warning; a
`LocalProtocolError` (a response that does not encode: our bug) is logged as an error
with its traceback; any other `ProtocolError` (acks=0 produce failed, no response can be
shaped) as a warning. A connection idle for connections.max.idle.ms — including one
stuck in the middle of a frame — is closed by one sweeping task (a deadline per read
costs more than the read). Shutdown stops the listeners, wakes waiting fetches, and lets
each connection finish the requests it has.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import ssl
import time
from typing import Awaitable, Callable

import trio

from wire import NEED_DATA, Connection, LocalProtocolError, ProtocolError, Request, UnsupportedRequest
from wire.connection import encode_api_versions_fallback, encode_response
from wire.errors import ErrorCode
from wire.registry import API_VERSIONS, ApiKey, api_name
from wire.schema import in_range
from wire.definitions import MESSAGES

from server.broker import Broker
from server.context import RequestContext
from server.delayed import MAX_DELAYED, DelayedResponse, ResponseQueue
from server.handlers import HANDLERS
from server.regions import FileRegion, release_parts, release_regions
from server.listeners import Listener
from server.security.listener_checks import check_security_protocols
from server.security.principal import PrincipalMapper
from server.security.tls import principal_mapper, server_context, tls_session_info
from server.security.sasl.settings import SASL_PROTOCOLS
from server.security.sasl.state import SaslState, admit
from server.session import Session
from server.startup import StartupError

log = logging.getLogger("trafka.network")

READ_SIZE = 65536
LARGE_READ_SIZE = 256 * 1024
CLOSE_TIMEOUT_S = 2.0  # a TLS close_notify to a peer that does not read
# Connections taken off a listener's queue per wake-up of its accept loop
# (docs/design/performance.md#accepting-connection-storms).
ACCEPT_BURST = 256
LIMIT_RECHECK_PASSES = 10  # scheduler passes a connection at max.connections waits for a slot
_MSG_MORE = getattr(socket, "MSG_MORE", 0)  # Linux; elsewhere the header goes out alone

PLAINTEXT = Listener("PLAINTEXT", "PLAINTEXT", "0.0.0.0", 0, "127.0.0.1", 0)


class Server:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.connections = 0
        # Open connections per listener name (Kafka's connection-count of
        # socket-server-metrics{listener=...}); every bound listener has an entry, 0 included.
        self.listener_connections: dict[str, int] = {}
        self.idle_s = broker.config.get("connections.max.idle.ms") / 1000
        self.max_frame = broker.config.get("socket.request.max.bytes")
        self.listeners: list[trio.SocketListener] = []
        # TLS listeners: name -> SSLContext, and the ssl.principal.mapping.rules of each.
        self.contexts: dict[str, ssl.SSLContext] = {}
        self.mappers: dict[str, PrincipalMapper] = {}
        self._idle: set[_Idle] = set()
        self._closing = False
        self._raw_listeners: list[socket.socket] = []  # duplicates the accept loops drain
        # API keys whose handler may wait, so earlier answers on the connection go out first.
        self.blocking = frozenset(key for key, h in HANDLERS.items() if h.MAY_BLOCK)

    @property
    def max_connections(self) -> int:
        """Read at each accept: max.connections is a dynamic broker config."""
        return self.broker.config.get("max.connections")

    async def serve(self, host: str, port: int, connection_nursery: trio.Nursery,
                    task_status=trio.TASK_STATUS_IGNORED) -> None:
        """One PLAINTEXT listener at host:port."""
        listener = Listener("PLAINTEXT", "PLAINTEXT", host, port, host, port)
        await self.serve_listeners((listener,), connection_nursery, task_status=task_status)

    async def serve_listeners(self, listeners: tuple[Listener, ...], connection_nursery: trio.Nursery,
                              task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Bind every listener (server/listeners.py) and accept on all of them;
        started() answers the bound socket addresses. A TLS listener's SSLContext is built
        first, so a bad keystore stops the start with a ConfigError naming the setting."""
        check_security_protocols(self.broker.config, listeners)
        for listener in listeners:
            if listener.tls and listener.name not in self.contexts:
                self.contexts[listener.name] = server_context(self.broker.config, listener.name)
                self.mappers[listener.name] = principal_mapper(self.broker.config, listener.name)
        bound = []
        for listener in listeners:
            try:
                sockets = await trio.open_tcp_listeners(listener.port, host=listener.host)
            except OSError as exc:  # taken, not this host's address, a name that does not resolve
                for bound_listener in self.listeners:
                    await bound_listener.aclose()
                self.listeners.clear()
                raise StartupError("listeners", self.broker.config.raw("listeners"),
                                   f"cannot listen on {listener.host}:{listener.port}: {exc.strerror or exc}") from None
            self.listeners += sockets
            if listener.port == 0:  # an ephemeral port (tests): advertise the one we got
                port = sockets[0].socket.getsockname()[1]
                listener = dataclasses.replace(listener, port=port, advertised_port=listener.advertised_port or port)
                self._rebound(listener)
            bound.append((listener, sockets))
            self.listener_connections.setdefault(listener.name, 0)
            log.info("listener %s (%s) on %s", listener.name, listener.security_protocol,
                     ", ".join(f"{a[0]}:{a[1]}" for a in (s.socket.getsockname() for s in sockets)))
        task_status.started([l.socket.getsockname() for l in self.listeners])
        async with trio.open_nursery() as accept_nursery:
            for listener, sockets in bound:
                for socket_listener in sockets:
                    accept_nursery.start_soon(self._accept_loop, socket_listener, connection_nursery, listener)
            accept_nursery.start_soon(self._close_idle)

    def _rebound(self, listener: Listener) -> None:
        config = self.broker.config
        if any(l.name == listener.name for l in config.listener_list):
            config.listener_list = tuple(listener if l.name == listener.name else l for l in config.listener_list)

    async def _close_idle(self) -> None:
        """Cancel connections that have waited for bytes past their deadline.

        One task sweeping every idle_s/10 (at most 1 s) instead of a cancel scope with a
        deadline around every read: that scope costs more than the rest of the read loop
        for small requests (PERF: ~20 us per read on this machine). A connection is
        closed at most idle_s/10 late."""
        period = min(1.0, max(0.005, self.idle_s / 10))
        while not self._closing:
            await trio.sleep(period)
            now = trio.current_time()
            for idle in list(self._idle):
                if idle.waiting and now >= idle.deadline:
                    idle.scope.cancel()

    async def _accept_loop(self, listener: trio.SocketListener, nursery: trio.Nursery,
                           spec: Listener = PLAINTEXT) -> None:
        """Accept connections; after each wake-up, drain what else is queued (up to
        ACCEPT_BURST) without yielding. trio's accept() takes one connection per pass of
        the scheduler, and with 10 000 connections busy a pass is long: a storm of 1 000
        connects took 4 s to be accepted and new clients waited behind a full listen queue.
        The drain uses a duplicate of the listening socket (same queue)."""
        raw = socket.socket(fileno=os.dup(listener.socket.fileno()))
        raw.setblocking(False)
        self._raw_listeners.append(raw)
        try:
            await self._accept_from(listener, raw, nursery, spec)
        finally:
            raw.close()

    async def _accept_from(self, listener: trio.SocketListener, raw: socket.socket, nursery: trio.Nursery,
                           spec: Listener) -> None:
        while True:
            try:
                streams = [await listener.accept()]
            except trio.ClosedResourceError:
                return
            except OSError as exc:  # EMFILE and friends: back off, keep serving
                log.warning("accept failed: %s", exc)
                await trio.sleep(0.1)
                continue
            while len(streams) < ACCEPT_BURST and not self._closing:
                try:
                    sock, _addr = raw.accept()
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as exc:  # EMFILE: what was accepted is served; the loop backs off
                    log.warning("accept failed: %s", exc)
                    break
                streams.append(trio.SocketStream(trio.socket.from_stdlib_socket(sock)))
            waited = False  # the limit is waited on once a burst, then what is over it is refused
            for stream in streams:
                if self._closing:
                    await stream.aclose()
                    continue
                if not waited and self.connections >= self.max_connections:
                    waited = True
                    for _ in range(LIMIT_RECHECK_PASSES):
                        # Before refusing: connections whose peers already left (a readiness
                        # probe) end within a few scheduler passes, which one accept per pass
                        # used to give them.
                        await trio.sleep(0)
                        if self.connections < self.max_connections:
                            break
                if self.connections >= self.max_connections:
                    log.warning("closing new connection: max.connections=%d reached", self.max_connections)
                    await stream.aclose()
                    continue
                # Counted here, not in the task: a burst of accepts runs ahead of the tasks it
                # starts, and would let more than max.connections in.
                self.connections += 1
                self.listener_connections[spec.name] = self.listener_connections.get(spec.name, 0) + 1
                nursery.start_soon(self._connection, stream, spec)

    def close_listeners(self) -> None:
        """Stop accepting, and end connections that are waiting for their next request."""
        self._closing = True
        for listener in self.listeners:
            listener.socket.close()
        for raw in self._raw_listeners:  # the duplicates too, or the port stays bound
            raw.close()
        for idle in list(self._idle):
            if idle.waiting:  # the others finish the request they are on, then stop
                idle.scope.cancel()

    async def _connection(self, stream: trio.SocketStream, listener: Listener = PLAINTEXT) -> None:
        try:
            try:
                host, port = stream.socket.getpeername()[:2]
            except OSError:
                host, port = "?", 0
            if self.broker.quotas.connection_limits:  # connection_creation_rate (server/security/quotas.py)
                delay, refuse = self.broker.quotas.record_connection(host)
                if delay:
                    await trio.sleep(delay)
                if refuse:
                    await _close(stream)
                    return
            tls = None
            if listener.tls:
                # In this connection's own task, bounded: a slow or silent peer holds only itself.
                stream = await self._handshake(stream, listener, host, port)
                if stream is None:
                    return
                try:
                    tls = tls_session_info(stream, self.mappers.get(listener.name))
                except Exception:  # a certificate we cannot read: this connection only
                    log.exception("listener %s: reading the TLS client certificate of %s:%d failed", listener.name,
                                  host, port)
                    tls = None
                if tls is None:
                    await _close(stream)
                    return
            await self.serve_stream(stream, host, port, listener=listener.name,
                                    security_protocol=listener.security_protocol, tls=tls)
        finally:
            self.connections -= 1
            self.listener_connections[listener.name] -= 1

    async def _handshake(self, stream: trio.SocketStream, listener: Listener, host: str,
                         port: int) -> trio.SSLStream | None:
        """The TLS handshake of a new connection, or None (logged, closed) when it fails or
        takes longer than trafka.ssl.handshake.timeout.ms: a plaintext client on a TLS port
        ends here, and the broker goes on."""
        tls_stream = trio.SSLStream(stream, self.contexts[listener.name], server_side=True)
        timeout = self.broker.config.get("trafka.ssl.handshake.timeout.ms") / 1000
        failure = None
        with trio.move_on_after(timeout) as scope:
            try:
                await tls_stream.do_handshake()
                return tls_stream
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                cause = exc.__cause__ or exc
                failure = f"{type(cause).__name__}: {cause}"
        if scope.cancelled_caught:
            failure = f"not finished within {timeout:g} s (trafka.ssl.handshake.timeout.ms)"
        log.warning("listener %s: TLS handshake with %s:%d failed (%s); closing the connection", listener.name,
                    host, port, failure)
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(stream)
        return None

    async def serve_stream(self, stream: trio.abc.Stream, host: str, port: int, *, listener: str | None = None,
                           security_protocol: str = "PLAINTEXT", tls: dict | None = None) -> Session:
        """Serve one connection until the peer closes it, an error closes it, or shutdown.

        Any trio Stream will do (a TCP socket from the listener, a TLS stream over one, an
        in-memory stream in a test); `host` and `port` say who is at the other end, and
        `listener` / `security_protocol` / `tls` what it came through. Closes `stream` on
        the way out and returns the connection's Session.
        """
        session = Session(host, port, listener=listener, security_protocol=security_protocol)
        if tls is not None:
            session.tls = tls
            if tls.get("principal"):
                session.principal = tls["principal"]
        if security_protocol in SASL_PROTOCOLS:
            session.sasl = SaslState(self.broker, listener)
        send = _send_socket if isinstance(stream, trio.SocketStream) else _send_copied
        log.debug("connection %d open from %s on listener %s (%s)", session.connection_id, session.peer,
                  listener, security_protocol)
        if tls is not None and tls.get("peer_dn"):
            log.info("connection %d from %s on listener %s: TLS client certificate %s, principal %s",
                     session.connection_id, session.peer, listener, tls["peer_dn"], session.principal)
        try:
            await self._serve_connection(stream, session, send)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            log.debug("connection %d reset by peer", session.connection_id)
        finally:
            await _close(stream)
            log.debug("connection %d closed", session.connection_id)
            share = getattr(self.broker, "share", None)  # KIP-932 share sessions end with their connection
            if share is not None:
                try:
                    share.connection_closed(session.connection_id)
                except Exception:
                    log.exception("ending the share sessions of connection %d", session.connection_id)
        return session

    async def _serve_connection(self, stream: trio.abc.Stream, session: Session, send: "_Send") -> None:
        idle = _Idle()
        self._idle.add(idle)
        try:
            with trio.CancelScope() as idle.scope:
                await self._serve_requests(stream, session, send, idle)
        finally:
            self._idle.discard(idle)
        if idle.scope.cancel_called and not self.broker.shutting_down:
            state = "mid-frame" if idle.mid_frame else "idle"
            log.info("connection %d closed after %.0f s %s (connections.max.idle.ms)", session.connection_id,
                     self.idle_s, state)

    async def _serve_requests(self, stream: trio.abc.Stream, session: Session, send: "_Send",
                              idle: "_Idle") -> None:
        conn = Connection(self.max_frame)
        broker = self.broker
        api_versions = session.api_versions
        # A partial frame must be complete within idle_s of its first bytes: a peer that
        # drips one byte per second is never idle, yet would hold the connection forever.
        frame_deadline: float | None = None
        delayed: ResponseQueue | None = None  # made at the first answer that waits (server/delayed.py)
        try:
            while not broker.shutting_down:
                idle.deadline = trio.current_time() + self.idle_s if frame_deadline is None else frame_deadline
                idle.mid_frame = conn.buffered > 0
                # The rest of a large frame (a produce of 1 MB batches) is read in bigger
                # pieces: fewer passes through this loop, which cost more than the bytes.
                size = READ_SIZE
                pending = conn.pending_frame_size()
                if pending is not None and pending + 4 - conn.buffered > READ_SIZE:
                    size = min(pending + 4 - conn.buffered, LARGE_READ_SIZE)
                idle.waiting = True
                try:
                    data = await stream.receive_some(size)
                finally:
                    idle.waiting = False
                if broker.shutting_down or idle.scope.cancel_called:
                    return  # closed as data arrived: drop it, as if it came a moment later
                if not data:
                    if conn.buffered:
                        log.info("connection %d from %s closed by the peer mid-frame; %d bytes of an unfinished "
                                 "request dropped", session.connection_id, session.host, conn.buffered)
                    return
                conn.receive_data(data)
                completed_before = conn.requests_received
                out: list = []  # response parts (bytes and FileRegions), in request order
                blocking = self.blocking
                try:
                    while True:
                        if session.sasl is not None and session.sasl.raw_tokens:  # after a v0 SaslHandshake
                            if not await self._raw_sasl_token(conn, stream, send, out, delayed, session):
                                return
                            if conn.buffered < 4 or conn.pending_frame_size() + 4 > conn.buffered:
                                break
                            continue
                        try:
                            request = conn.next_request()
                        except ProtocolError as exc:  # remote: a frame that does not decode or is too big
                            log.warning("connection %d from %s: %s; closing it", session.connection_id, session.host,
                                        exc)
                            await _write(stream, send, out, delayed)
                            return
                        if request is NEED_DATA:
                            break
                        if session.sasl is not None:  # a SASL listener: only the handshake until authenticated
                            refused = admit(session, request.api_key)
                            if refused is not None:
                                log.warning("connection %d from %s: %s; closing it", session.connection_id,
                                            session.host, refused)
                                await _write(stream, send, out, delayed)
                                return
                        session.client_id = request.client_id
                        api_versions[request.api_key] = request.api_version
                        handler = HANDLERS.get(request.api_key) if isinstance(request, Request) else None
                        if handler is None and isinstance(request, Request):
                            request = UnsupportedRequest(request.api_key, request.api_version, request.correlation_id,
                                                         request.client_id, request.size)
                        if out and handler is not None and request.api_key in blocking:
                            await _write(stream, send, out, delayed)
                        try:
                            parts = await self._dispatch(conn, request, handler, session)
                        except LocalProtocolError:
                            log.exception("connection %d from %s: cannot answer %s v%d (correlation %d); closing it",
                                          session.connection_id, session.host, api_name(request.api_key),
                                          request.api_version, request.correlation_id)
                            await _write(stream, send, out, delayed)
                            return
                        except ProtocolError as exc:
                            log.warning("connection %d from %s: %s", session.connection_id, session.host, exc)
                            await _write(stream, send, out, delayed)
                            return
                        if type(parts) is DelayedResponse:
                            if delayed is None:
                                delayed = ResponseQueue(stream, send)
                            delayed.push(out.copy())
                            out.clear()
                            slot = delayed.reserve()
                            if broker.nursery is None:  # a broker driven without its root nursery (tests)
                                await self._finish_delayed(delayed, slot, conn, request, parts, session)
                            else:
                                broker.nursery.start_soon(self._finish_delayed, delayed, slot, conn, request, parts,
                                                          session)
                            if delayed.waiting >= MAX_DELAYED:
                                await delayed.flush()
                                await delayed.wait_below(MAX_DELAYED)
                        elif parts is not None:
                            out += parts
                        if session.sasl is not None and session.sasl.close_reason is not None:
                            log.info("connection %d from %s closed: %s", session.connection_id, session.host,
                                     session.sasl.close_reason)
                            await _write(stream, send, out, delayed)
                            # Kafka's connection.failed.authentication.delay.ms: the answer is read
                            # by the client before the close (and a password guesser is slowed).
                            await trio.sleep(broker.config.get("connection.failed.authentication.delay.ms") / 1000)
                            return
                        if session.throttle is not None:  # over a client quota (server/security/quotas.py)
                            await self._throttle(stream, send, out, delayed, session, idle)
                    await _write(stream, send, out, delayed)
                finally:
                    release_parts(out)
                if delayed is not None and delayed.broken:
                    return
                if not conn.buffered:
                    frame_deadline = None
                elif frame_deadline is None or conn.requests_received != completed_before:
                    frame_deadline = trio.current_time() + self.idle_s
        finally:
            if delayed is not None:
                await _finish_queue(delayed)

    async def _raw_sasl_token(self, conn: Connection, stream, send: "_Send", out: list,
                              delayed: ResponseQueue | None, session: Session) -> bool:
        """One bare SASL token (v0 SaslHandshake mode): answered in kind; False: close."""
        try:
            token = conn.next_frame()
        except ProtocolError as exc:
            log.warning("connection %d from %s: SASL token: %s; closing it", session.connection_id, session.host, exc)
            await _write(stream, send, out, delayed)
            return False
        if token is NEED_DATA:
            return True
        answer = session.sasl.raw_token(session, token)
        if answer is None:
            await _write(stream, send, out, delayed)
            return False
        out.append(answer)
        return True

    async def _finish_delayed(self, delayed: ResponseQueue, slot: list, conn: Connection, request,
                              answer: DelayedResponse, session: Session) -> None:
        """Wait for a delayed answer (server/delayed.py), then write it in its turn."""
        parts = None
        try:
            try:
                body = await answer.finish()
            except Exception:
                log.exception("%s v%d delayed answer failed (connection %d, correlation %d)",
                              api_name(request.api_key), request.api_version, session.connection_id,
                              request.correlation_id)
                body = error_body(request.api_key, request.api_version, request.body, ErrorCode.UNKNOWN_SERVER_ERROR)
            if body is not None:
                try:
                    parts = conn.send(request, body)
                except Exception:
                    log.exception("connection %d from %s: cannot answer %s v%d (correlation %d); closing it",
                                  session.connection_id, session.host, api_name(request.api_key),
                                  request.api_version, request.correlation_id)
                    delayed.broken = True  # the reader stops at its next request; the client reconnects
        finally:
            delayed.fill(slot, parts)
        try:
            await delayed.flush()
        except Exception:  # a task of the broker's nursery: nothing may escape it
            log.exception("connection %d: writing a delayed answer failed", session.connection_id)
            delayed.broken = True

    async def _dispatch(self, conn: Connection, request, handler, session: Session) -> list | None:
        """The response to one request as parts, or None when there is none (acks=0); a
        `DelayedResponse` when the handler's answer has to wait (server/delayed.py)."""
        if isinstance(request, UnsupportedRequest):
            return [self._unsupported(request, session)]
        if request.trailing:
            log.debug("connection %d: %s v%d had %d bytes after its body (ignored, as Kafka does)",
                      session.connection_id, api_name(request.api_key), request.api_version, request.trailing)
        ctx = RequestContext(self.broker, session, request.api_key, request.api_version, request.correlation_id,
                             request.client_id)
        quotas = self.broker.quotas
        metrics = self.broker.metrics  # RequestMetrics (server/http/metrics.py) or None: HTTP off
        # request_percentage (handler time) and /metrics latency
        started = time.perf_counter() if quotas.active or metrics is not None else None
        try:
            body = await handler.handle(ctx, request.body)
        except ProtocolError:
            raise
        except Exception:
            log.exception("%s v%d handler failed (connection %d, correlation %d)", api_name(request.api_key),
                          request.api_version, session.connection_id, request.correlation_id)
            body = error_body(request.api_key, request.api_version, request.body, ErrorCode.UNKNOWN_SERVER_ERROR)
            if body is None:
                raise ProtocolErrorClose()
        if started is not None and quotas.active and type(body) is not DelayedResponse:
            quotas.record_request(session, request.api_key, request.api_version, request.size, request.body, body,
                                  started)
        if metrics is not None:
            if type(body) is DelayedResponse:  # counted when its answer is ready
                body.finish = metrics.timed(body.finish, request.api_key, request.api_version, started)
            else:
                metrics.record(request.api_key, request.api_version, started, body)
        if body is None:
            return None
        if type(body) is DelayedResponse:
            return body
        try:
            return conn.send(request, body)
        except BaseException:
            release_regions(body)  # they never became parts: nobody else will release them
            raise

    async def _throttle(self, stream: trio.abc.Stream, send: "_Send", out: list, delayed: ResponseQueue | None,
                        session: Session, idle: "_Idle") -> None:
        """Wait out a quota violation: KIP-219 versions get their answer at once and the
        connection is muted (no request read or handled) for the throttle time; older
        versions get their answer after it. Shutdown ends the wait (it counts as idle)."""
        seconds, mute_after = session.throttle
        session.throttle = None
        if mute_after:
            await _write(stream, send, out, delayed)
        idle.deadline = trio.current_time() + seconds + self.idle_s
        idle.waiting = True
        try:
            await trio.sleep(seconds)
        finally:
            idle.waiting = False
        await _write(stream, send, out, delayed)

    def _unsupported(self, request: UnsupportedRequest, session: Session) -> bytes:
        log.warning("connection %d: %s v%d is not supported (client %s)", session.connection_id,
                    api_name(request.api_key), request.api_version, request.client_id)
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


async def _close(stream: trio.abc.Stream) -> None:
    """Close a connection even when cancelled. A TLS stream first sends its close_notify,
    which a peer that stops reading could hold up forever: bounded, then closed hard."""
    with trio.CancelScope(shield=True):
        with trio.move_on_after(CLOSE_TIMEOUT_S):
            try:
                await stream.aclose()
                return
            except (trio.BrokenResourceError, ssl.SSLError, OSError) as exc:  # SSL_shutdown trouble
                log.debug("closing a connection: %r", exc)
        await trio.aclose_forcefully(stream)


async def _write(stream: trio.abc.Stream, send: "_Send", out: list, delayed: ResponseQueue | None) -> None:
    """Write `out` now, or behind the answers that still wait; `out` is emptied."""
    if not out:
        return
    if delayed is None or delayed.idle:
        try:
            await send(stream, out)
        finally:
            out.clear()
        return
    delayed.push(out.copy())
    out.clear()
    await delayed.flush()


async def _finish_queue(delayed: ResponseQueue) -> None:
    """The connection is ending: answers still waiting are written first (their waits are
    bounded by the request's own timeout), unless the peer has gone or we are cancelled."""
    try:
        if not delayed.broken:
            await delayed.drain()
    finally:
        delayed.discard()


class _Idle:
    """A connection as the idle sweep sees it: waiting for bytes or not, and until when."""

    __slots__ = ("scope", "waiting", "deadline", "mid_frame")

    def __init__(self) -> None:
        self.scope: trio.CancelScope | None = None
        self.waiting = False
        self.deadline = float("inf")
        self.mid_frame = False


_Send = Callable[[trio.abc.Stream, list], Awaitable[None]]


async def _send_socket(stream: trio.SocketStream, out: list) -> None:
    """Write collected response parts in order: bytes with one send_all, FileRegions with
    os.sendfile from the segment (page cache to socket, no copy through Python)."""
    if not out:
        return
    if len(out) == 1 and type(out[0]) is bytes:
        await stream.send_all(out[0])
        return
    pending: list[bytes] = []
    try:
        for part in out:
            if type(part) is bytes:
                pending.append(part)
                continue
            if pending:
                await _send_more(stream, b"".join(pending))
                pending.clear()
            await _sendfile(stream, part)
        if pending:
            await stream.send_all(b"".join(pending))
    finally:
        release_parts(out)


async def _send_copied(stream: trio.abc.Stream, out: list) -> None:
    """Write collected response parts in order over a stream that cannot sendfile (TLS,
    in-memory): one buffer of the response's size, region bytes pread straight into it
    (no bytes object per region, no join), and one send_all."""
    if not out:
        return
    if len(out) == 1 and type(out[0]) is bytes:
        await stream.send_all(out[0])
        return
    try:
        buffer = bytearray(sum(len(part) for part in out))
        view = memoryview(buffer)
        at = 0
        for part in out:
            size = len(part)
            if type(part) is bytes:
                view[at:at + size] = part
            else:
                _pread_into(part, view[at:at + size])
                part.release()
            at += size
        await stream.send_all(buffer)
    finally:
        release_parts(out)


def _pread_into(region: FileRegion, target: memoryview) -> None:
    done = 0
    while done < len(target):
        try:
            got = os.preadv(region.fd, [target[done:]], region.position + done)
        except OSError as exc:
            raise trio.BrokenResourceError(f"reading a region failed: {exc}") from exc
        if got == 0:  # the segment shrank under us (truncation): the frame cannot be completed
            log.warning("segment %s shrank during a fetch; closing the connection", region.segment)
            raise trio.BrokenResourceError("segment shrank during a fetch")
        done += got


async def _send_more(stream: trio.SocketStream, data: bytes) -> None:
    """send with MSG_MORE: the bytes before a region wait for it instead of going out as
    a packet of their own (a small send costs as much as a 1 MiB sendfile here)."""
    sock = stream.socket
    view = memoryview(data)
    while view:
        sent = await sock.send(view, _MSG_MORE)
        view = view[sent:]


async def _sendfile(stream: trio.SocketStream, region: FileRegion) -> None:
    sock_fd = stream.socket.fileno()
    position, left = region.position, region.length
    while left:
        try:
            sent = os.sendfile(sock_fd, region.fd, position, left)
        except BlockingIOError:
            # The socket buffer is full. sendfile queues its chunks as "more to come",
            # so a partly filled last segment would sit corked (up to 200 ms) while we
            # wait for room it cannot free: setting TCP_NODELAY pushes it out.
            stream.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await trio.lowlevel.wait_writable(sock_fd)
            continue
        except OSError as exc:
            raise trio.BrokenResourceError(f"sendfile failed: {exc}") from exc
        if sent == 0:
            # The segment was cut under us (truncation): the frame cannot be completed.
            log.warning("segment %s shrank during a fetch; closing the connection", region.segment)
            raise trio.BrokenResourceError("segment shrank during sendfile")
        position += sent
        left -= sent
    region.release()


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
