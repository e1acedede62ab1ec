"""`SharePersister`: how a share-partition leader reaches the share coordinator (Kafka's
DefaultStatePersister).

Why: in a cluster a share partition's state lives with the leader of the
`__share_group_state` partition of its key (server/groups/share/state.py), which is often
another broker. The persister finds that broker in the metadata cache and sends it
ReadShareGroupState / WriteShareGroupState v0, or calls the local `ShareStateStore` when it
is this broker (always on a single broker). The coordinator moving (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, a broker that does not answer)
is retried with a short backoff for up to `RETRY_S`, as Kafka's persister retries, so a
`__share_group_state` leader killed mid-stream delays acknowledgements instead of failing
them. The first use in a cluster creates `__share_group_state`
(`share.coordinator.state.topic.num.partitions`, `...replication.factor`).
"""

from __future__ import annotations

import logging

import trio

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.errors import KafkaError
from server.groups.share import records as rec
from server.groups.share.state import ShareKey, ShareStateStore, States, StoredState, deleted_state, expand

log = logging.getLogger("trafka.share")

RETRY_S = 15.0
# A connection of its own to each share coordinator: a write waits for the ISR of its
# `__share_group_state` partition, and the replica fetchers' connection (0 and up) must not
# queue behind it — the follower whose fetch waits there is what the write waits for.
SHARE_STATE_CONNECTION = -1
BACKOFF_S = 0.2
REQUEST_TIMEOUT_S = 10.0
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                       ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT,
                       ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND})


class SharePersister:
    def __init__(self, broker, store: ShareStateStore) -> None:
        self.broker = broker
        self.store = store
        self._creating = False

    async def read(self, key: ShareKey, leader_epoch: int) -> StoredState | None:
        """ReadShareGroupState: the stored state, None when never initialised, a `deleted`
        one (only its state epoch) after DeleteShareGroupState."""
        return await self._retrying(key, "read", self._read_once, leader_epoch)

    async def write(self, key: ShareKey, *, leader_epoch: int, state_epoch: int, start_offset: int,
                    states: States) -> None:
        """WriteShareGroupState: durable (replicated to the ISR) when it returns."""
        await self._retrying(key, "write", self._write_once, leader_epoch, state_epoch, start_offset, states)

    async def delete(self, key: ShareKey) -> None:
        """DeleteShareGroupState: the share partition's state is tombstoned."""
        await self._retrying(key, "delete", self._delete_once)

    async def _delete_once(self, key: ShareKey) -> None:
        node = self._coordinator(key)
        if node == self.broker.node_id:
            await self.store.delete(key)
            return
        body = {"group_id": key[0], "topics": [{"topic_id": key[1], "partitions": [{"partition": key[2]}]}]}
        self._result(await self._remote(node, ApiKey.DELETE_SHARE_GROUP_STATE, body))

    async def _retrying(self, key: ShareKey, what: str, once, *args):
        deadline = trio.current_time() + RETRY_S
        while True:
            try:
                return await once(key, *args)
            except KafkaError as exc:
                if exc.code not in RETRIABLE or trio.current_time() >= deadline or self.broker.shutting_down:
                    raise
                log.debug("share state %s of %s: %s, retrying", what, key, exc.code.name)
            await trio.sleep(BACKOFF_S)

    def _coordinator(self, key: ShareKey) -> int:
        """The broker leading the key's `__share_group_state` partition (this one on a
        single broker); COORDINATOR_NOT_AVAILABLE while there is none."""
        cluster = self.broker.cluster
        if cluster is None:
            return self.broker.node_id
        if not cluster.cache.topics.get(rec.STATE_TOPIC):
            if self.broker.nursery is not None and not self._creating:
                self._creating = True
                self.broker.nursery.start_soon(self._create_topic)
            raise KafkaError(f"{rec.STATE_TOPIC} does not exist yet", ErrorCode.COORDINATOR_NOT_AVAILABLE)
        partition = self.store.partition_for(key)
        info = cluster.cache.partition(rec.STATE_TOPIC, partition)
        if info is None or info.leader < 0 or not cluster.cache.alive(info.leader):
            raise KafkaError(f"{rec.STATE_TOPIC}-{partition} has no leader", ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return info.leader

    async def _create_topic(self) -> None:
        try:
            await self.broker.cluster.auto_create_topic(rec.STATE_TOPIC)
        except Exception as exc:
            log.warning("creating %s failed: %s", rec.STATE_TOPIC, exc)
        finally:
            self._creating = False

    async def _remote(self, node: int, api_key: ApiKey, body: dict) -> dict:
        try:
            client = self.broker.cluster.channels.client(node, SHARE_STATE_CONNECTION)
            return await client.request(api_key, 0, body, REQUEST_TIMEOUT_S)
        except KafkaError:
            raise
        except Exception as exc:  # unreachable, timed out, connection lost: the coordinator may be moving
            raise KafkaError(f"share coordinator {node} did not answer ({exc!r})",
                             ErrorCode.COORDINATOR_NOT_AVAILABLE) from exc

    @staticmethod
    def _result(answer: dict) -> dict:
        part = answer["results"][0]["partitions"][0]
        if part["error_code"] != ErrorCode.NONE:
            raise KafkaError(part.get("error_message") or "share coordinator refused",
                             ErrorCode(part["error_code"]))
        return part

    async def _read_once(self, key: ShareKey, leader_epoch: int) -> StoredState | None:
        node = self._coordinator(key)
        if node == self.broker.node_id:
            return self.store.read(key, leader_epoch)
        body = {"group_id": key[0], "topics": [{"topic_id": key[1], "partitions": [
            {"partition": key[2], "leader_epoch": leader_epoch}]}]}
        part = self._result(await self._remote(node, ApiKey.READ_SHARE_GROUP_STATE, body))
        if part["start_offset"] < 0:  # never initialised, or deleted (then its state epoch counts)
            return deleted_state(part["state_epoch"], leader_epoch) if part["state_epoch"] > 0 else None
        batches = [(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
                   for b in part["state_batches"]]
        states = expand(part["start_offset"], batches)
        return StoredState(0, states, part["start_offset"], 0, part["state_epoch"], leader_epoch,
                           part["start_offset"], states)

    async def _write_once(self, key: ShareKey, leader_epoch: int, state_epoch: int, start_offset: int,
                          states: States) -> None:
        node = self._coordinator(key)
        if node == self.broker.node_id:
            await self.store.write(key, leader_epoch=leader_epoch, state_epoch=state_epoch, start_offset=start_offset,
                                   states=states)
            return
        body = {"group_id": key[0], "topics": [{"topic_id": key[1], "partitions": [
            {"partition": key[2], "state_epoch": state_epoch, "leader_epoch": leader_epoch,
             "start_offset": start_offset,
             "state_batches": [{"first_offset": f, "last_offset": last, "delivery_state": s, "delivery_count": c}
                               for f, last, s, c in rec.runs(states)]}]}]}
        self._result(await self._remote(node, ApiKey.WRITE_SHARE_GROUP_STATE, body))
