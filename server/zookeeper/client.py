"""The broker's ZooKeeper client: kazoo (thread-based) bridged to trio (Kafka's
`ZooKeeperClient` + the registration parts of `KafkaZkClient`).

How this works:

- kazoo runs its own threads (one for the connection, one for callbacks). A request is
  handed to kazoo with its `*_async` call (a queue append, never blocking) and awaited
  through kazoo's completion callback, which wakes the waiting task with
  `TrioToken.run_sync_soon`: no worker thread is held, so ZooKeeper traffic never queues
  behind trio's thread limiter (shared with log appends and flushes, which can fill it on a
  loaded broker). A request waits at most the session timeout (kazoo queues requests while
  disconnected and drops the queue when the session expires), then raises `ConnectionLoss`.
- What kazoo's threads report (session state changes, watch notifications) enters trio
  with `TrioToken.run_sync_soon`, which never blocks kazoo's threads, into memory channels
  and events owned by this client.
- Watches re-arm themselves: each `watch_children`/`watch_data` is a task in the client's
  nursery that reads with a watch, runs the async callback with what it read, and waits for
  the watch to fire. kazoo fires every watch when the connection drops (ZooKeeper may have
  lost them), so a callback also runs after each reconnection: callbacks must be idempotent,
  as Kafka's controller handlers are (they re-read and compare).
- Session events: CONNECTED, SUSPENDED (connection lost, the session may still be alive),
  EXPIRED (ephemerals and watches are gone; kazoo reconnects by itself) and NEW_SESSION
  (connected again with a new session id: a broker re-registers `/brokers/ids/<id>`, which
  gives it a new broker epoch, and re-runs the controller election).

Usage (the nursery for watch callbacks lives as long as the `async with`)::

    async with ZooKeeperClient() as zk:
        await zk.start("127.0.0.1:2181/kafka", session_timeout_ms=18000)
        await zk.ensure_persistent_paths()
        broker_epoch = await zk.register_broker(registration)
        await zk.watch_children("/brokers/ids", on_brokers)

Errors are this module's exceptions (`NodeExists`, `NoNode`, `BadVersion`, `NotEmpty`,
`SessionExpired`, `ConnectionLoss`, all `ZooKeeperError`), never kazoo's.
"""

from __future__ import annotations

import enum
import logging
import math
import threading
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Sequence, Union

import trio
from kazoo import exceptions as kz
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState, ZnodeStat

from server.zookeeper import znodes

log = logging.getLogger("trafka.cluster.zk")

Stat = ZnodeStat  # czxid (for /brokers/ids/<id>: the broker epoch), version (the CAS token), ephemeralOwner, ...

# Reconnection: retry forever, but never wait more than a second between attempts (kazoo's
# default backoff grows to an hour, far beyond any session timeout).
_CONNECTION_RETRY = dict(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0)


# --- errors -----------------------------------------------------------------------------


class ZooKeeperError(Exception):
    """A ZooKeeper operation failed. In a `multi`, `op_index` is the operation that failed
    and `results` the per-operation outcomes (exceptions for the failed and rolled-back ones)."""

    def __init__(self, message: str = "", *, path: str | None = None, op_index: int | None = None,
                 results: list[Any] | None = None) -> None:
        super().__init__(message or type(self).__name__)
        self.path = path
        self.op_index = op_index
        self.results = results


class NodeExists(ZooKeeperError):
    """NODEEXISTS"""


class NoNode(ZooKeeperError):
    """NONODE"""


class BadVersion(ZooKeeperError):
    """BADVERSION: the znode's version is not the one expected (a lost compare-and-set)."""


class NotEmpty(ZooKeeperError):
    """NOTEMPTY: a non-recursive delete of a znode with children."""


class SessionExpired(ZooKeeperError):
    """The session ended (expired, or the client is closed): ephemerals and watches are gone."""


class ConnectionLoss(ZooKeeperError):
    """No answer: the connection dropped, or no server answered in time. The operation may
    or may not have been applied."""


_KAZOO_ERRORS: tuple[tuple[type[Exception], type[ZooKeeperError]], ...] = (
    (kz.NodeExistsError, NodeExists),
    (kz.NoNodeError, NoNode),
    (kz.BadVersionError, BadVersion),
    (kz.NotEmptyError, NotEmpty),
    (kz.SessionExpiredError, SessionExpired),  # also ConnectionClosedError (client stopped)
    (kz.ConnectionLoss, ConnectionLoss),
    (kz.OperationTimeoutError, ConnectionLoss),
    (KazooTimeoutError, ConnectionLoss),
)


def _translate(exc: BaseException, path: str | None = None, **extra: Any) -> ZooKeeperError:
    for kazoo_type, ours in _KAZOO_ERRORS:
        if isinstance(exc, kazoo_type):
            return ours(f"{ours.__name__}{f' {path}' if path else ''}", path=path, **extra)
    return ZooKeeperError(f"{type(exc).__name__}{f' {path}' if path else ''}: {exc}", path=path, **extra)


# --- multi ops (Kafka's ZkOp: CheckOp, CreateOp, SetDataOp, DeleteOp) ----------------------


@dataclass(frozen=True)
class CheckOp:
    """Fails the transaction unless `path` has `version` (how a controller fences itself:
    every write carries a check of /controller_epoch's version, KAFKA-6082)."""

    path: str
    version: int


@dataclass(frozen=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True)
class DeleteOp:
    path: str
    version: int = -1


Op = Union[CheckOp, CreateOp, SetDataOp, DeleteOp]


# --- session events --------------------------------------------------------------------


class SessionState(enum.Enum):
    CONNECTED = "connected"  # first connection, or the same session resumed after SUSPENDED
    SUSPENDED = "suspended"  # connection lost; the session (and its ephemerals) may still live
    EXPIRED = "expired"  # the session is gone: ephemerals deleted, watches lost
    NEW_SESSION = "new_session"  # connected again after EXPIRED, with a new session id


@dataclass(frozen=True)
class SessionEvent:
    state: SessionState
    session_id: int | None


# --- connect strings -------------------------------------------------------------------


def split_connect_string(connect_string: str) -> tuple[str, str]:
    """`"h1:2181,h2:2181/kafka"` → `("h1:2181,h2:2181", "/kafka")`; no chroot → `""`."""
    hosts, slash, chroot = connect_string.partition("/")
    chroot = ("/" + chroot.strip("/")) if slash else ""
    return hosts, "" if chroot == "/" else chroot


# --- watches ---------------------------------------------------------------------------

ChildrenCallback = Callable[[list[str]], Awaitable[None]]
DataCallback = Callable[[Union[tuple[bytes, ZnodeStat], None]], Awaitable[None]]


class Watch:
    """A registered, self re-arming watch. `cancel()` stops it (ZooKeeper may still send the
    one pending notification; it is ignored)."""

    def __init__(self, client: ZooKeeperClient, path: str, kind: str, callback: Callable[[Any], Awaitable[None]]):
        self.path = path
        self.kind = kind  # "children" or "data"
        self._client = client
        self._callback = callback
        self._cancel_scope = trio.CancelScope()
        self._fired = trio.Event()
        self.fired_count = 0  # notifications received (statistics; tests look at it)

    def cancel(self) -> None:
        self._cancel_scope.cancel()

    @property
    def active(self) -> bool:
        return not self._cancel_scope.cancel_called

    def _kazoo_watcher(self, event: Any) -> None:
        # kazoo's callback thread: hand over to trio, never block here
        self._client._post(self._fire)

    def _fire(self) -> None:
        self.fired_count += 1
        self._fired.set()

    def __repr__(self) -> str:
        return f"Watch({self.kind} {self.path!r}, active={self.active})"


# --- the client ------------------------------------------------------------------------


class ZooKeeperClient:
    """One ZooKeeper session (re-established after expiry) for one broker."""

    def __init__(self) -> None:
        self._kazoo: KazooClient | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stack: AsyncExitStack | None = None
        self._nursery: trio.Nursery | None = None
        self._session_id: int | None = None
        self._sessions: set[int] = set()  # every session id this client has held (KAFKA-7165)
        self._subscribers: list[trio.MemorySendChannel[SessionEvent]] = []
        self._connected = trio.Event()
        self._closing = False
        self.hosts = ""
        self.chroot = ""
        self.session_timeout_ms = 0
        self._request_timeout_s = 30.0

    # --- lifecycle ---------------------------------------------------------------------

    async def __aenter__(self) -> ZooKeeperClient:
        self._stack = AsyncExitStack()
        self._nursery = await self._stack.enter_async_context(trio.open_nursery())
        return self

    async def __aexit__(self, *exc: Any) -> bool:
        try:
            with trio.CancelScope(shield=True):
                await self.close()
        finally:
            stack, self._stack, self._nursery = self._stack, None, None
            if stack is not None:
                # The watch tasks are cancelled by now; the nursery only has their errors to
                # raise. The body's own exception propagates as it is, not wrapped in an
                # ExceptionGroup (`except ConnectionLoss` keeps working around the block).
                await stack.__aexit__(None, None, None)
        return False

    async def start(self, connect_string: str, session_timeout_ms: int = 18000,
                    connection_timeout_ms: int | None = None) -> None:
        """Connect (Kafka's `zookeeper.connect`, `zookeeper.session.timeout.ms`,
        `zookeeper.connection.timeout.ms` which defaults to the session timeout).

        A chroot in the connect string ("h:p,h:p/kafka") is created first if missing, through
        a connection without it, as Kafka does. Raises `ConnectionLoss` if no server answers
        within the connection timeout."""
        if self._kazoo is not None:
            raise RuntimeError("already started")
        self._token = trio.lowlevel.current_trio_token()
        self.hosts, self.chroot = split_connect_string(connect_string)
        self.session_timeout_ms = session_timeout_ms
        self._request_timeout_s = max(session_timeout_ms / 1000, 1.0)
        connect_s = (connection_timeout_ms or session_timeout_ms) / 1000
        if self.chroot:
            try:
                await trio.to_thread.run_sync(self._create_chroot, connect_s, abandon_on_cancel=True)
            except (kz.KazooException, KazooTimeoutError) as e:
                raise ConnectionLoss(f"cannot create the chroot {self.chroot} on {self.hosts}: {e!r}") from e
        client = KazooClient(hosts=self.hosts + self.chroot, timeout=session_timeout_ms / 1000,
                             connection_retry=dict(_CONNECTION_RETRY))
        client.add_listener(self._on_kazoo_state)
        self._kazoo = client
        try:
            await trio.to_thread.run_sync(client.start, connect_s, abandon_on_cancel=True)
        except KazooTimeoutError as e:  # kazoo has stopped the client
            self._kazoo = None
            raise ConnectionLoss(f"no ZooKeeper answered at {self.hosts} within {connect_s}s") from e
        except trio.Cancelled:
            # the abandoned thread's client would keep reconnecting: stop it behind our back
            self._kazoo = None
            threading.Thread(target=_stop_kazoo, args=(client,), name="zk-stop", daemon=True).start()
            raise
        client_id = client.client_id
        if client_id is not None:
            self._session_id = client_id[0]
            self._sessions.add(client_id[0])
            self._connected.set()
        log.info("connected to ZooKeeper %s%s, session 0x%x", self.hosts, self.chroot, self._session_id or 0)

    def _create_chroot(self, timeout_s: float) -> None:
        bootstrap = KazooClient(hosts=self.hosts, timeout=self.session_timeout_ms / 1000)
        bootstrap.start(timeout_s)
        try:
            bootstrap.ensure_path(self.chroot)
        finally:
            bootstrap.stop()
            bootstrap.close()

    async def close(self) -> None:
        """Close the session (its ephemerals go at once), stop the watches and end the
        `session_events()` streams."""
        client, self._kazoo = self._kazoo, None
        self._closing = True
        if client is not None:
            await trio.to_thread.run_sync(_stop_kazoo, client)
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
        for send in self._subscribers:
            send.close()
        self._subscribers.clear()

    @property
    def session_id(self) -> int | None:
        """The id of the latest session (None before start); after EXPIRED it is still the
        expired session's until NEW_SESSION is delivered."""
        return self._session_id

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """(session id, session password) while connected: what ZooKeeper needs to resume
        the session from another connection (tests use it to force an expiry)."""
        return self._kazoo.client_id if self._kazoo is not None else None

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    async def wait_connected(self) -> None:
        while not self._connected.is_set():
            await self._connected.wait()

    # --- from kazoo's threads into trio ---------------------------------------------------

    def _post(self, fn: Callable[..., None], *args: Any) -> None:
        token = self._token
        if token is None:
            return
        try:
            token.run_sync_soon(fn, *args)
        except trio.RunFinishedError:
            pass

    def _on_kazoo_state(self, state: str) -> None:
        # kazoo's connection thread; client_id is readable once CONNECTED has been set
        client = self._kazoo
        session_id = None
        if state == KazooState.CONNECTED and client is not None:
            client_id = client.client_id
            session_id = client_id[0] if client_id else None
        self._post(self._session_changed, state, session_id)

    def _session_changed(self, state: str, session_id: int | None) -> None:
        if self._closing:
            return
        if state == KazooState.CONNECTED:
            new = self._session_id is not None and session_id != self._session_id
            if session_id is not None:
                self._session_id = session_id
                self._sessions.add(session_id)
            self._connected.set()
            kind = SessionState.NEW_SESSION if new else SessionState.CONNECTED
        else:
            if self._connected.is_set():
                self._connected = trio.Event()
            kind = SessionState.SUSPENDED if state == KazooState.SUSPENDED else SessionState.EXPIRED
        log.info("ZooKeeper session 0x%x: %s", self._session_id or 0, kind.value)
        event = SessionEvent(kind, self._session_id)
        for send in list(self._subscribers):
            try:
                send.send_nowait(event)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._subscribers.remove(send)

    def session_events(self) -> trio.MemoryReceiveChannel[SessionEvent]:
        """A stream of the session events from now on (`async for event in ...`); one
        stream per caller, ended by `close()`."""
        send, receive = trio.open_memory_channel[SessionEvent](math.inf)
        self._subscribers.append(send)
        return receive

    # --- requests ------------------------------------------------------------------------

    def _client(self) -> KazooClient:
        if self._kazoo is None:
            raise SessionExpired("the ZooKeeper client is not started or already closed")
        return self._kazoo

    async def _run(self, fn: Callable[[KazooClient], Any], path: str | None) -> Any:
        """Run blocking kazoo code in a worker thread: only for what kazoo offers no single
        asynchronous request for (a recursive delete)."""
        client = self._client()
        try:
            return await trio.to_thread.run_sync(fn, client, abandon_on_cancel=True)
        except (kz.KazooException, KazooTimeoutError) as e:
            raise _translate(e, path) from e

    async def _call(self, send: Callable[[KazooClient], Any], path: str | None) -> Any:
        """Send one request (`send` returns kazoo's IAsyncResult) and wait for its answer
        without a worker thread; no answer within the request timeout is `ConnectionLoss`."""
        client = self._client()
        token = trio.lowlevel.current_trio_token()
        answered = trio.Event()

        def wake(_result: Any) -> None:  # on kazoo's callback thread
            try:
                token.run_sync_soon(answered.set)
            except trio.RunFinishedError:
                pass

        try:
            result = send(client)
            if not result.ready():
                result.rawlink(wake)
                with trio.move_on_after(self._request_timeout_s):
                    await answered.wait()
                if not result.ready():
                    result.unlink(wake)
                    raise ConnectionLoss(f"ConnectionLoss {path or ''}: no answer within "
                                         f"{self._request_timeout_s:g}s", path=path)
            return result.get_nowait()
        except (kz.KazooException, KazooTimeoutError) as e:
            raise _translate(e, path) from e

    async def get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        """The znode's data and stat, or None if it does not exist."""
        try:
            return await self._call(lambda c: c.get_async(path), path)
        except NoNode:
            return None

    async def exists(self, path: str) -> ZnodeStat | None:
        return await self._call(lambda c: c.exists_async(path), path)

    async def children(self, path: str) -> list[str]:
        """Child names, sorted (raises NoNode if `path` does not exist)."""
        return sorted(await self._call(lambda c: c.get_children_async(path), path))

    async def create(self, path: str, data: bytes = b"", ephemeral: bool = False, sequential: bool = False,
                     make_parents: bool = False) -> str:
        """Create a znode; returns its path (with the sequence suffix when `sequential`).
        `make_parents` creates missing ancestors (persistent, empty)."""
        return await self._call(lambda c: c.create_async(path, data, ephemeral=ephemeral, sequence=sequential,
                                                         makepath=make_parents), path)

    async def set(self, path: str, data: bytes, expected_version: int) -> ZnodeStat:
        """setData, a compare-and-set unless `expected_version` is -1; returns the new stat
        (its `version` is the next expected version)."""
        return await self._call(lambda c: c.set_async(path, data, expected_version), path)

    async def delete(self, path: str, expected_version: int = -1, recursive: bool = False) -> None:
        """Delete a znode (raises NoNode if absent). `recursive` deletes the subtree first
        (no version check then)."""
        if recursive:
            if expected_version != -1:
                raise ValueError("a recursive delete cannot check a version")
            timeout = self._request_timeout_s

            def run(c: KazooClient) -> None:
                if c.exists_async(path).get(timeout=timeout) is None:
                    raise kz.NoNodeError()
                c.delete(path, recursive=True)

            await self._run(run, path)
            return
        await self._call(lambda c: c.delete_async(path, expected_version), path)

    async def multi(self, ops: Sequence[Op]) -> list[Any]:
        """Run `ops` as one ZooKeeper transaction: all or nothing.

        Returns one result per op: the created path (CreateOp), the new stat (SetDataOp),
        True (CheckOp, DeleteOp). On failure raises the failed op's error (e.g. BadVersion)
        with `op_index` set and `results` holding every op's outcome."""
        def send(c: KazooClient) -> Any:
            tx = c.transaction()
            for op in ops:
                if isinstance(op, CheckOp):
                    tx.check(op.path, op.version)
                elif isinstance(op, CreateOp):
                    tx.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequential)
                elif isinstance(op, SetDataOp):
                    tx.set_data(op.path, op.data, op.version)
                elif isinstance(op, DeleteOp):
                    tx.delete(op.path, op.version)
                else:
                    raise TypeError(f"not a multi op: {op!r}")
            return tx.commit_async()

        raw = await self._call(send, ops[0].path if ops else None)
        # ZooKeeper answers a failed multi with the culprit's error, "rolled back" for the ops
        # before it and "runtime inconsistency" for those after
        errors = [i for i, r in enumerate(raw) if isinstance(r, Exception)]
        if not errors:
            return list(raw)
        side_effects = (kz.RolledBackError, kz.RuntimeInconsistency)
        failed = next((i for i in errors if not isinstance(raw[i], side_effects)), errors[0])
        results = [_translate(r, ops[i].path) if isinstance(r, Exception) else r for i, r in enumerate(raw)]
        error = _translate(raw[failed], ops[failed].path, op_index=failed, results=results)
        raise error

    # --- watches -------------------------------------------------------------------------

    async def watch_children(self, path: str, callback: ChildrenCallback) -> Watch:
        """Run `callback(children)` (sorted names; [] while `path` does not exist) now and
        after every change, until `Watch.cancel()` or `close()`. Returns once the watch is
        armed; callbacks run one at a time per watch, in the client's nursery. An exception
        in a callback is not swallowed: it ends the client's nursery, hence the `async with`."""
        return await self._watch(path, "children", callback)

    async def watch_data(self, path: str, callback: DataCallback) -> Watch:
        """Run `callback((data, stat))`, or `callback(None)` while the znode does not exist,
        now and after every creation, change or deletion (an exists watch plus a data watch,
        as Kafka's `registerZNodeChangeHandlerAndCheckExistence`)."""
        return await self._watch(path, "data", callback)

    async def _watch(self, path: str, kind: str, callback: Callable[[Any], Awaitable[None]]) -> Watch:
        if self._nursery is None:
            raise RuntimeError("watches need the client's nursery: use `async with ZooKeeperClient() as zk`")
        watch = Watch(self, path, kind, callback)
        await self._nursery.start(self._run_watch, watch)
        return watch

    async def _run_watch(self, watch: Watch, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        started = False
        with watch._cancel_scope:
            while True:
                await self.wait_connected()
                watch._fired = trio.Event()
                try:
                    value = await self._read_watched(watch)
                except (ConnectionLoss, SessionExpired):
                    await trio.sleep(0.05)  # the session event that follows clears `connected`
                    continue
                if not started:
                    started = True
                    task_status.started()
                await watch._callback(value)
                await watch._fired.wait()

    async def _read_watched(self, watch: Watch) -> Any:
        path, watcher = watch.path, watch._kazoo_watcher
        if watch.kind == "children":
            while True:
                try:
                    return sorted(await self._call(lambda c: c.get_children_async(path, watch=watcher), path))
                except NoNode:
                    # no node: arm an exists watch, which fires when it is created
                    if await self._call(lambda c: c.exists_async(path, watch=watcher), path) is None:
                        return []
        while True:
            if await self._call(lambda c: c.exists_async(path, watch=watcher), path) is None:
                return None
            try:
                return await self._call(lambda c: c.get_async(path, watch=watcher), path)
            except NoNode:
                continue  # deleted in between: look again

    # --- Kafka's broker-side helpers (KafkaZkClient) ------------------------------------------

    async def ensure_persistent_paths(self) -> None:
        """Create the persistent paths every Kafka broker makes sure of at start
        (ZkData.PersistentZkPaths), empty, if missing."""
        for path in znodes.PERSISTENT_PATHS:
            if await self.exists(path) is None:
                try:
                    await self.create(path, b"", make_parents=True)
                except NodeExists:
                    pass  # another broker was quicker

    async def get_or_create_cluster_id(self, new_id: str) -> str:
        """The cluster id in /cluster/id, creating it with `new_id` if absent. Of brokers
        racing at first start, one creation wins and all return its id."""
        got = await self.get(znodes.CLUSTER_ID_PATH)
        if got is None:
            try:
                await self.create(znodes.CLUSTER_ID_PATH, znodes.encode_cluster_id(new_id), make_parents=True)
                return new_id
            except NodeExists:
                got = await self.get(znodes.CLUSTER_ID_PATH)
                if got is None:
                    raise ZooKeeperError("/cluster/id exists and vanished again", path=znodes.CLUSTER_ID_PATH)
        return znodes.decode_cluster_id(got[0])

    async def register_broker(self, registration: znodes.BrokerRegistration) -> int:
        """Create the ephemeral /brokers/ids/<id>; returns its czxid, the broker epoch (KIP-380).

        Like Kafka, one multi creates the znode empty and sets its data, so the SetData
        result carries the czxid. If the znode exists:
        - owned by this session (a create retried after a connection loss): keep it, update
          its data, return its czxid;
        - owned by an earlier session of this client (the old session's ephemeral not yet
          removed when the new session registers, KAFKA-7165): delete and re-create;
        - owned by any other session: `NodeExists` (another live broker has this id)."""
        path = znodes.broker_path(registration.broker_id)
        data = registration.encode()
        for _ in range(10):
            try:
                results = await self.multi([CreateOp(path, b"", ephemeral=True), SetDataOp(path, data, -1)])
                epoch = results[1].czxid
                log.info("registered broker %d at %s, broker epoch %d", registration.broker_id, path, epoch)
                return epoch
            except NodeExists:
                existing = await self.get(path)
                if existing is None:
                    continue
                stat = existing[1]
                owner = stat.ephemeralOwner
                live = self.client_id  # kazoo's view: trio may not have seen NEW_SESSION yet
                current = live[0] if live else self._session_id
                if current is not None:
                    self._sessions.add(current)
                if owner == current:
                    try:
                        await self.set(path, data, stat.version)
                    except (NoNode, BadVersion):
                        continue
                    return stat.czxid
                if owner in self._sessions:
                    try:
                        await self.delete(path, stat.version)
                    except (NoNode, BadVersion):
                        pass
                    continue
                raise NodeExists(f"broker id {registration.broker_id} already registered at {path} by another "
                                 f"live session (0x{owner:x}; this session 0x{current or 0:x})",
                                 path=path) from None
        raise ZooKeeperError(f"could not register {path}: it kept changing", path=path)


def _stop_kazoo(client: KazooClient) -> None:
    try:
        client.stop()
    finally:
        client.close()
