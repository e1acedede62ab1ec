"""KIP-890 part 1 from a partition leader: is this partition in the producer's transaction?

Before a producer's first transactional write to a partition (Produce) or to its group's
offsets (TxnOffsetCommit) the leader asks the transactional id's coordinator. On one broker
that is `TransactionCoordinator.verify_partition`, in-process. In a cluster the coordinator
is the leader of the `__transaction_state` partition the id hashes to (the FindCoordinator
rule, docs/design/replication.md#coordinator-placement), looked up in the metadata cache: this
broker, asked in-process, or
another one, asked with AddPartitionsToTxn v4 `verify_only` on connections of its own
(Kafka's AddPartitionsToTxnManager; a long-polling replica Fetch on the shared connections
must not delay a produce). The leader's errors are Kafka's (AddPartitionsToTxnManager):
no `__transaction_state` in the cache or no live leader for the id's partition →
COORDINATOR_NOT_AVAILABLE; no answer (connection lost, timeout) → NETWORK_EXCEPTION; a
top-level UNSUPPORTED_VERSION → UNKNOWN_SERVER_ERROR; PRODUCER_FENCED →
INVALID_PRODUCER_EPOCH, the code a partition gives a fenced producer. What a client then
sees is each caller's mapping (Produce: retriable ones become NOT_ENOUGH_REPLICAS).
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.coordinator_log import partition_for_key

log = logging.getLogger("trafka.txn")

E = ErrorCode
TXN_TOPIC = "__transaction_state"
ADD_PARTITIONS_TO_TXN_VERIFY_VERSION = 4  # the first with verify_only (KIP-890)
VERIFY_TIMEOUT_S = 30.0  # request.timeout.ms

TopicPartition = tuple[str, int]


class TxnVerifier:
    """Asks transactional ids' coordinators whether a partition is in a transaction (see the
    module docstring). One per broker; `close()` at shutdown."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self._channels = None  # BrokerChannels of our own, made on the first remote question
        self.remote_requests = 0

    def close(self) -> None:
        if self._channels is not None:
            self._channels.close()
            self._channels = None

    def coordinator_of(self, transactional_id: str) -> tuple[ErrorCode, int]:
        """(NONE, broker id) of the id's coordinator in the metadata cache, or
        (COORDINATOR_NOT_AVAILABLE, -1)."""
        cache = self.broker.cluster.cache
        partitions = cache.topics.get(TXN_TOPIC)
        if not partitions:
            return E.COORDINATOR_NOT_AVAILABLE, -1  # no transaction can have started
        info = partitions.get(partition_for_key(transactional_id, max(partitions) + 1))
        if info is None or info.leader < 0 or not cache.alive(info.leader):
            return E.COORDINATOR_NOT_AVAILABLE, -1
        return E.NONE, info.leader

    async def verify(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                     tp: TopicPartition) -> ErrorCode:
        broker = self.broker
        txn = broker.txn
        if broker.cluster is None or not txn.verification or transactional_id is None:
            return txn.verify_partition(transactional_id, producer_id, producer_epoch, tp)
        code, coordinator = self.coordinator_of(transactional_id)
        if code != E.NONE:
            return code
        if coordinator == broker.node_id:
            code = txn.verify_partition(transactional_id, producer_id, producer_epoch, tp)
        else:
            code = await self._ask(coordinator, transactional_id, producer_id, producer_epoch, tp)
        return E.INVALID_PRODUCER_EPOCH if code == E.PRODUCER_FENCED else code

    async def _ask(self, coordinator: int, transactional_id: str, producer_id: int, producer_epoch: int,
                   tp: TopicPartition) -> ErrorCode:
        from server.cluster.client import BrokerChannels, BrokerClientError
        from server.security.tls import inter_broker_client_options

        if self._channels is None:
            self._channels = BrokerChannels(client_id=f"trafka-txn-verify-{self.broker.node_id}",
                                           **inter_broker_client_options(self.broker.config))
        self._channels.update_endpoints({b.broker_id: (b.host, b.port)
                                         for b in self.broker.cluster.cache.brokers.values()})
        body = {"transactions": [{"transactional_id": transactional_id, "producer_id": producer_id,
                                  "producer_epoch": producer_epoch, "verify_only": True,
                                  "topics": [{"name": tp[0], "partitions": [tp[1]]}]}]}
        self.remote_requests += 1
        try:
            response = await self._channels.request(coordinator, ApiKey.ADD_PARTITIONS_TO_TXN,
                                                    ADD_PARTITIONS_TO_TXN_VERIFY_VERSION, body,
                                                    timeout_s=VERIFY_TIMEOUT_S)
        except BrokerClientError as exc:
            log.info("verifying %s-%d for transactional id %r with broker %d: %s", tp[0], tp[1], transactional_id,
                     coordinator, exc)
            return E.NETWORK_EXCEPTION
        top = response.get("error_code", 0)
        if top != E.NONE:
            return E.UNKNOWN_SERVER_ERROR if top == E.UNSUPPORTED_VERSION else _code(top)
        for result in response["results_by_transaction"]:
            for topic in result["topic_results"]:
                for p in topic["results_by_partition"]:
                    if (topic["name"], p["partition_index"]) == tp:
                        return _code(p["partition_error_code"])
        return E.UNKNOWN_SERVER_ERROR  # the coordinator left our partition out


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return E.UNKNOWN_SERVER_ERROR
