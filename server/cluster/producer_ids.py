"""Producer ids in a cluster: blocks of 1000 taken from ZooKeeper's `/latest_producer_id_block`.

Why: every broker answers InitProducerId (idempotent producers ask any broker; a
transactional id's coordinator may be any broker). If each counted on its own, two brokers
would give the same id to two producers, and their batches on a shared partition would be
checked against each other's sequences (OUT_OF_ORDER_SEQUENCE_NUMBER, or a batch dropped as
a "duplicate"). Kafka's ZkProducerIdManager hands out ids from blocks that one znode
allocates cluster-wide (docs/design/replication.md#producer-id-blocks):

- take a block: read the znode and its version; the next block starts after the block it
  names (at 0 if the znode is still empty); write it with a compare-and-set on that version.
  BadVersion means another broker took a block in between: read again. Ids are never handed
  out twice, whatever crashes: a block taken and not used is simply skipped.
- one block is kept ahead: once 90% of the current block is used, `run` takes the next one
  in the background, so an InitProducerId rarely waits for ZooKeeper. When one must (the
  first id after start, or ids handed out faster than ZooKeeper answers) it awaits the block;
  without one after `wait_s` it is answered COORDINATOR_LOAD_IN_PROGRESS, which clients
  retry (Kafka 3.9's RPCProducerIdManager answers the same while its next block is pending).
"""

from __future__ import annotations

import logging

import trio

from wire.errors import ErrorCode

from server.zookeeper.znodes import PRODUCER_ID_BLOCK_PATH, PRODUCER_ID_BLOCK_SIZE, ProducerIdBlock
from server.errors import KafkaError

log = logging.getLogger("trafka.cluster.producer_ids")

PREFETCH_FRACTION = 0.9  # take the next block once this much of the current one is used
_RETRY_S = 1.0


class ProducerIdBlocks:
    """This broker's current block of producer ids and the one taken ahead."""

    def __init__(self, zk, broker_id: int, *, wait_s: float = 10.0, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.wait_s = wait_s
        self.block_size = block_size
        self._next = 0
        self._last = -1  # the current block is _next.._last (empty until the first block)
        self._ahead: ProducerIdBlock | None = None
        self._take_lock = trio.Lock()
        self._wanted = trio.Event()
        self.blocks_taken = 0

    def statistics(self) -> dict[str, int]:
        return {"ids_left": max(self._last - self._next + 1, 0), "block_ahead": int(self._ahead is not None),
                "blocks_taken": self.blocks_taken}

    async def take_block(self) -> ProducerIdBlock:
        """Allocate the next block in ZooKeeper (compare-and-set on the znode's version)."""
        from server.zookeeper.client import BadVersion, NodeExists

        while True:
            found = await self.zk.get(PRODUCER_ID_BLOCK_PATH)
            if found is None:  # made empty by every broker at start; absent only if removed by hand
                try:
                    await self.zk.create(PRODUCER_ID_BLOCK_PATH, b"", make_parents=True)
                except NodeExists:
                    pass
                continue
            data, stat = found
            current = ProducerIdBlock.decode(data)
            block = current.next_block(self.broker_id, self.block_size) if current is not None \
                else ProducerIdBlock(self.broker_id, 0, self.block_size - 1)
            try:
                await self.zk.set(PRODUCER_ID_BLOCK_PATH, block.encode(), stat.version)
            except BadVersion:
                log.debug("producer id block taken by another broker meanwhile; reading again")
                continue
            self.blocks_taken += 1
            log.info("broker %d took producer ids %d..%d", self.broker_id, block.first, block.last)
            return block

    async def _ensure_ahead(self) -> None:
        async with self._take_lock:
            if self._ahead is None:
                self._ahead = await self.take_block()

    async def next_id(self) -> int:
        """A producer id no broker of the cluster has handed out; KafkaError
        (COORDINATOR_LOAD_IN_PROGRESS) if no block could be taken within `wait_s`."""
        from server.zookeeper.client import ZooKeeperError

        while self._next > self._last:
            if self._ahead is not None:
                self._next, self._last = self._ahead.first, self._ahead.last
                self._ahead = None
                break
            with trio.move_on_after(self.wait_s) as scope:
                try:
                    await self._ensure_ahead()
                except ZooKeeperError as exc:
                    raise KafkaError(f"no producer id block from ZooKeeper: {exc}",
                                     ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) from exc
            if scope.cancelled_caught:
                raise KafkaError(f"no producer id block from ZooKeeper within {self.wait_s} s",
                                 ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        pid = self._next
        self._next += 1
        used = self.block_size - (self._last - self._next + 1)
        if self._ahead is None and used >= PREFETCH_FRACTION * self.block_size:
            self._wanted.set()
        return pid

    async def run(self) -> None:
        """Take the next block ahead whenever `next_id` asks for it."""
        from server.zookeeper.client import ZooKeeperError

        while True:
            await self._wanted.wait()
            self._wanted = trio.Event()
            try:
                await self._ensure_ahead()
            except ZooKeeperError as exc:
                log.warning("taking the next producer id block failed (%s); retrying", exc)
                await trio.sleep(_RETRY_S)
                self._wanted.set()
