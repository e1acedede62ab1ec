"""Broker configuration: Kafka's `server.properties` names, from file, environment and flags.

Precedence, lowest first: built-in defaults, `--config FILE`, `TRAFKA_*` environment
variables (TRAFKA_NUM_PARTITIONS sets num.partitions: upper case, dots as underscores),
then command-line flags. Each value remembers where it came from, because DescribeConfigs
reports it (DEFAULT_CONFIG vs STATIC_BROKER_CONFIG).

Two more layers sit on top (KIP-226 dynamic broker configs, Kafka's DynamicBrokerConfig):
the cluster-wide defaults (`config/brokers/<default>`), then this broker's own
(`config/brokers/<id>`), kept in ZooKeeper in a cluster and in the data directory of a
single broker (server/broker_configs.py fills them). `get`
and `raw` always answer the effective value, so code that reads a setting when it needs
it (rather than once at start) follows a change without a restart; code that must act on
a change registers with `add_listener`.
"""

from __future__ import annotations

import logging
import os
import pathlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from server.listeners import inter_broker_listener, parse_listeners
from server.startup import ConfigError  # raised here, and importable from here as ever

log = logging.getLogger("trafka.config")


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _replica_selector(text: str) -> str:
    """replica.selector.class: Kafka's class names, of which Trafka has the one Kafka ships
    (KIP-392); empty is Kafka's null (consumers are sent to the leader)."""
    text = text.strip()
    if text not in ("", RACK_AWARE_REPLICA_SELECTOR):
        raise ValueError(f"unknown replica selector class (known: {RACK_AWARE_REPLICA_SELECTOR})")
    return text


AUTHORIZER_CLASSES = ("kafka.security.authorizer.AclAuthorizer",
                      "org.apache.kafka.metadata.authorizer.StandardAuthorizer")


def _authorizer_class(text: str) -> str:
    """authorizer.class.name: Kafka's authorizer classes all mean the ACL authorizer
    (server/security/authorizer.py); empty is none; any other class cannot be loaded, as in Kafka."""
    text = text.strip()
    if text and text not in AUTHORIZER_CLASSES:
        raise ValueError(f"unknown authorizer class (known: {', '.join(AUTHORIZER_CLASSES)})")
    return text


def _registry_listener(text: str) -> str:
    """schema.registry.listeners / rest.proxy.listeners: one HOST:PORT (an http:// prefix
    is allowed, as in Confluent's `listeners`); empty turns that side off."""
    text = text.strip()
    if text:
        host, sep, port = text.removeprefix("http://").rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError("must be HOST:PORT or empty")
    return text


def _zookeeper_connect(text: str) -> str:
    """zookeeper.connect: HOST:PORT[,HOST:PORT...][/chroot] (a host without a port is
    ZooKeeper's 2181); empty: a single broker. Checked here so a typo is one line at
    start-up, not a failure deep in the ZooKeeper client."""
    text = text.strip()
    if not text:
        return text
    hosts, _, _chroot = text.partition("/")
    for item in hosts.split(","):
        item = item.strip()
        if item.startswith("["):  # [IPv6] or [IPv6]:PORT
            host, _, rest = item[1:].partition("]")
            malformed = bool(rest) and not rest.startswith(":")
            port = rest[1:] if rest else None
        else:
            host, _, port = item.rpartition(":") if ":" in item else (item, "", None)
            malformed = ":" in host  # an IPv6 address needs its brackets
        bad_port = port is not None and not (port.isdigit() and 0 < int(port) <= 65535)
        if not host or malformed or bad_port:
            raise ValueError("must be HOST:PORT[,HOST:PORT...][/chroot]")
    return text


def _fsync(text: str) -> str:
    if text not in ("never", "interval", "always"):
        raise ValueError("must be never, interval or always")
    return text


def _http_listeners(text: str) -> str:
    """http.listeners: HOST:PORT of the HTTP listener (/metrics, /healthz, /readyz:
    server/http/), optionally written http://HOST:PORT; empty turns it off."""
    text = text.strip()
    if text.startswith("http://"):
        text = text[len("http://"):]
    if not text:
        return ""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError("must be HOST:PORT (or empty: no HTTP listener)")
    return text


@dataclass(frozen=True)
class Setting:
    name: str
    parse: Callable[[str], Any]
    default: str
    doc: str
    kafka_type: str = "STRING"  # DescribeConfigs config_type names: BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD


def _s(name: str, parse: Callable[[str], Any], default: str, doc: str) -> Setting:
    kind = {int: "LONG", _bool: "BOOLEAN", str: "STRING", _fsync: "STRING", float: "DOUBLE"}.get(parse, "STRING")
    return Setting(name, parse, default, doc, kind)


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        _s("node.id", int, "1", "This broker's id in Metadata responses."),
        _s("broker.id", int, "1", "Alias of node.id kept for Kafka configuration files."),
        _s("cluster.id", str, "", "Cluster id; generated and stored in the data dir when empty."),
        _s("listeners", str, "PLAINTEXT://0.0.0.0:9092", "Where to listen: NAME://host:port, comma separated (host:port after --listen is PLAINTEXT)."),
        _s("advertised.listeners", str, "", "Addresses clients are told to use, NAME://host:port per listener; defaults to the listen address."),
        _s("listener.security.protocol.map", str, "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
           "Security protocol of each listener name (NAME:PROTOCOL, comma separated)."),
        _s("security.inter.broker.protocol", str, "PLAINTEXT", "Security protocol between brokers (or inter.broker.listener.name, not both)."),
        _s("log.dirs", str, "./data", "The data directory (one)."),
        _s("num.partitions", int, "1", "Partitions of auto-created topics."),
        _s("default.replication.factor", int, "1", "Replication factor of auto-created topics (must be 1 on a single broker)."),
        _s("zookeeper.connect", _zookeeper_connect, "", "ZooKeeper of the cluster (host:port[,host:port][/chroot]); empty: a single broker."),
        _s("zookeeper.session.timeout.ms", int, "18000", "ZooKeeper session timeout: how soon a dead broker is noticed."),
        _s("broker.rack", str, "", "Rack of this broker, for rack-aware replica assignment."),
        Setting("replica.selector.class", _replica_selector, "",
                "Picks the replica a consumer with client.rack should fetch from (KIP-392); "
                "empty: the leader.", "CLASS"),
        _s("inter.broker.listener.name", str, "PLAINTEXT", "Listener other brokers use to reach this one."),
        _s("min.insync.replicas", int, "1", "Replicas that must have an acks=all write before it is acknowledged."),
        _s("replica.lag.time.max.ms", int, "30000", "A follower that has not caught up for this long leaves the ISR."),
        _s("unclean.leader.election.enable", _bool, "false", "Elect a replica outside the ISR when no ISR member is alive (may lose data)."),
        _s("offsets.topic.replication.factor", int, "3", "Replication factor of __consumer_offsets in a cluster (not created until that many brokers are live)."),
        _s("transaction.state.log.replication.factor", int, "3", "Replication factor of __transaction_state in a cluster (not created until that many brokers are live)."),
        _s("transaction.state.log.min.isr", int, "2", "min.insync.replicas of __transaction_state in a cluster."),
        _s("replica.fetch.max.bytes", int, "1048576", "Bytes a follower asks per partition in one fetch."),
        _s("replica.fetch.wait.max.ms", int, "500", "How long a follower's fetch waits at the leader for data."),
        _s("replica.fetch.backoff.ms", int, "1000", "Pause after a failed follower fetch."),
        _s("leader.replication.throttled.rate", int, "9223372036854775807", "Bytes/s a leader sends out-of-sync followers of its leader.replication.throttled.replicas (KIP-73; a dynamic broker config)."),
        _s("follower.replication.throttled.rate", int, "9223372036854775807", "Bytes/s a follower fetches for its out-of-sync follower.replication.throttled.replicas (KIP-73; a dynamic broker config)."),
        _s("quota.window.num", int, "11", "Samples of a client quota's rate (server/security/quotas.py)."),
        _s("quota.window.size.seconds", int, "1", "Length of one client quota sample."),
        _s("max.connection.creation.rate", int, "2147483647", "New connections per second the broker accepts (KIP-612); over it an accept waits."),
        _s("replication.quota.window.num", int, "11", "Samples of the replication throttle's rate."),
        _s("replication.quota.window.size.seconds", int, "1", "Length of one replication throttle sample."),
        _s("max.incremental.fetch.session.cache.slots", int, "1000", "Fetch sessions (KIP-227) the broker keeps; when full a new one evicts an idle, small or unprivileged one or is not created (session_id 0: full fetches)."),
        _s("min.incremental.fetch.session.eviction.ms", int, "120000", "A fetch session idle this long may be evicted for a new one; younger ones only by a larger or a follower's session."),
        _s("num.replica.fetchers", int, "1", "Replica fetchers per source broker, each with a connection of its own; partitions are spread over them by Kafka's hash."),
        _s("auto.leader.rebalance.enable", _bool, "true", "The controller moves leadership back to preferred replicas (the first of each assignment) when a broker's imbalance is above leader.imbalance.per.broker.percentage."),
        _s("leader.imbalance.check.interval.seconds", int, "300", "How often the controller checks the leader imbalance (auto.leader.rebalance.enable)."),
        _s("leader.imbalance.per.broker.percentage", int, "10", "Share of a broker's preferred partitions led elsewhere, in percent, above which the controller runs preferred elections for them."),
        _s("controlled.shutdown.enable", _bool, "true", "Move leadership away (ControlledShutdown) before stopping."),
        _s("auto.create.topics.enable", _bool, "true", "Create unknown topics on Metadata and Produce."),
        _s("delete.topic.enable", _bool, "true", "Allow DeleteTopics."),
        _s("max.request.partition.size.limit", int, "2000", "Most partitions one DescribeTopicPartitions response describes; a client asking for more gets this many and a cursor (KIP-966)."),
        _s("log.retention.ms", int, "604800000", "Default retention.ms of topics (-1: keep forever)."),
        _s("log.retention.bytes", int, "-1", "Default retention.bytes of partitions (-1: no limit)."),
        _s("log.segment.bytes", int, "1073741824", "Default segment.bytes."),
        _s("log.roll.ms", int, "604800000", "Default segment.ms."),
        _s("log.cleanup.policy", str, "delete", "Default cleanup.policy."),
        _s("log.retention.check.interval.ms", int, "300000", "How often retention and compaction run (the first run 30 s after start-up, as Kafka's)."),
        _s("log.flush.interval.messages", int, "9223372036854775807", "fsync after this many messages (interval policy)."),
        _s("log.flush.interval.ms", int, "1000", "fsync at least this often (interval policy)."),
        _s("log.open.files.max", int, "-1", "Segment files open at once; idle ones are closed and reopened when used (-1: half the soft RLIMIT_NOFILE at start)."),
        _s("log.flush.offset.checkpoint.interval.ms", int, "60000", "How often the recovery-point-offset-checkpoint is rewritten (what a restart after a crash scans starts there)."),
        _s("trafka.log.warmup.enable", _bool, "true", "After a clean shutdown the broker listens before opening its logs (each opens at first use); true: open the rest in the background right after, so retention and compaction reach them. false: only at first use."),
        _s("trafka.fsync.policy", _fsync, "never", "never (page cache, Kafka's default), interval, or always (fsync before acking)."),
        _s("trafka.preallocate.bytes", int, "33554432", "Disk blocks kept reserved ahead of a busy active segment's end (0: none)."),
        _s("log.message.timestamp.type", str, "CreateTime", "Default message.timestamp.type."),
        _s("message.max.bytes", int, "1048588", "Largest record batch accepted (default max.message.bytes)."),
        _s("socket.request.max.bytes", int, "104857600", "Largest request frame; bigger frames close the connection."),
        _s("max.connections", int, "2147483647", "Connections accepted at once; further ones are closed at accept."),
        _s("connections.max.idle.ms", int, "600000", "Close connections idle (or stuck mid-frame) this long."),
        _s("trafka.max.partitions", int, "100000", "Total partitions the broker accepts across topics."),
        _s("schema.registry.listeners", _registry_listener, "127.0.0.1:8081",
           "Where the Schema Registry (Confluent's REST API, schema_registry/) listens: HOST:PORT; empty: off."),
        _s("rest.proxy.listeners", _registry_listener, "127.0.0.1:8082",
           "Where the REST Proxy (Confluent's v2/v3 REST API, rest_proxy/) listens: HOST:PORT; empty: off."),
        _s("consumer.instance.timeout.ms", int, "300000",
           "REST Proxy: a consumer instance not used this long is closed and forgotten."),
        _s("trafka.rest.proxy.max.consumer.instances", int, "1000",
           "REST Proxy: consumer instances at once (each is a librdkafka consumer with its threads); more are refused with 429."),
        _s("group.min.session.timeout.ms", int, "6000", "Smallest session.timeout.ms a group member may ask for."),
        _s("group.max.session.timeout.ms", int, "1800000", "Largest session.timeout.ms a group member may ask for."),
        _s("group.initial.rebalance.delay.ms", int, "3000", "Wait for more members before the first rebalance of an empty group (KIP-134; Kafka's default)."),
        _s("group.max.size", int, "2147483647", "Members a group may hold."),
        _s("group.share.session.timeout.ms", int, "45000", "KIP-932: a share-group member not heard from this long is removed."),
        _s("group.share.heartbeat.interval.ms", int, "5000", "KIP-932: how often share-group members are told to heartbeat."),
        _s("group.share.record.lock.duration.ms", int, "30000", "KIP-932: how long a share consumer holds acquired records before they are available again."),
        _s("group.share.delivery.count.limit", int, "5", "KIP-932: deliveries of a record before it is archived (a poison record)."),
        _s("group.share.max.size", int, "200", "KIP-932: members a share group may hold."),
        _s("group.share.partition.max.record.locks", int, "2000", "KIP-932: acquired records a share partition holds at once."),
        _s("share.coordinator.state.topic.num.partitions", int, "1", "Partitions of __share_group_state (a cluster: 50 unless set, as Kafka)."),
        _s("share.coordinator.state.topic.replication.factor", int, "3", "Replication factor of __share_group_state in a cluster (not created until that many brokers are live)."),
        _s("share.coordinator.state.topic.min.isr", int, "2", "min.insync.replicas of __share_group_state in a cluster."),
        _s("group.consumer.session.timeout.ms", int, "45000", "KIP-848 consumer groups: a member silent this long is fenced."),
        _s("group.consumer.min.session.timeout.ms", int, "45000", "Lower bound of group.consumer.session.timeout.ms."),
        _s("group.consumer.max.session.timeout.ms", int, "60000", "Upper bound of group.consumer.session.timeout.ms."),
        _s("group.consumer.heartbeat.interval.ms", int, "5000", "KIP-848 consumer groups: how often members heartbeat."),
        _s("group.consumer.min.heartbeat.interval.ms", int, "5000", "Lower bound of group.consumer.heartbeat.interval.ms."),
        _s("group.consumer.max.heartbeat.interval.ms", int, "15000", "Upper bound of group.consumer.heartbeat.interval.ms."),
        _s("group.consumer.assignors", str, "uniform,range", "Server-side assignors of consumer groups; the first is the default."),
        _s("group.consumer.max.size", int, "2147483647", "Members a KIP-848 consumer group may hold."),
        # The bounds and defaults of the group configs (GROUP config resources,
        # server/groups/group_config.py): a group's own value must lie within its min/max
        # settings; a group without one takes the setting itself. Kafka 4.4's names and defaults.
        _s("group.consumer.assignment.interval.ms", int, "1000", "Default consumer.assignment.interval.ms of KIP-848 consumer groups."),
        _s("group.consumer.min.assignment.interval.ms", int, "0", "Lower bound of a group's consumer.assignment.interval.ms."),
        _s("group.consumer.max.assignment.interval.ms", int, "15000", "Upper bound of a group's consumer.assignment.interval.ms."),
        _s("group.consumer.assignor.offload.enable", _bool, "true", "Default of the internal group config consumer.assignor.offload.enable."),
        _s("group.share.min.session.timeout.ms", int, "45000", "Lower bound of a share group's share.session.timeout.ms."),
        _s("group.share.max.session.timeout.ms", int, "60000", "Upper bound of a share group's share.session.timeout.ms."),
        _s("group.share.min.heartbeat.interval.ms", int, "5000", "Lower bound of a share group's share.heartbeat.interval.ms."),
        _s("group.share.max.heartbeat.interval.ms", int, "15000", "Upper bound of a share group's share.heartbeat.interval.ms."),
        _s("group.share.min.record.lock.duration.ms", int, "15000", "Lower bound of a share group's share.record.lock.duration.ms."),
        _s("group.share.max.record.lock.duration.ms", int, "60000", "Upper bound of a share group's share.record.lock.duration.ms."),
        _s("group.share.min.delivery.count.limit", int, "2", "Lower bound of a share group's share.delivery.count.limit."),
        _s("group.share.max.delivery.count.limit", int, "10", "Upper bound of a share group's share.delivery.count.limit."),
        _s("group.share.min.partition.max.record.locks", int, "100", "Lower bound of a share group's share.partition.max.record.locks."),
        _s("group.share.max.partition.max.record.locks", int, "4000", "Upper bound of a share group's share.partition.max.record.locks."),
        _s("group.share.assignment.interval.ms", int, "1000", "Default share.assignment.interval.ms of share groups."),
        _s("group.share.min.assignment.interval.ms", int, "0", "Lower bound of a share group's share.assignment.interval.ms."),
        _s("group.share.max.assignment.interval.ms", int, "15000", "Upper bound of a share group's share.assignment.interval.ms."),
        _s("group.share.assignor.offload.enable", _bool, "true", "Default of the internal group config share.assignor.offload.enable."),
        _s("group.streams.session.timeout.ms", int, "45000", "Default streams.session.timeout.ms of streams groups (KIP-1071; Trafka has no streams groups: a group config's default and bound only)."),
        _s("group.streams.min.session.timeout.ms", int, "45000", "Lower bound of a group's streams.session.timeout.ms."),
        _s("group.streams.max.session.timeout.ms", int, "60000", "Upper bound of a group's streams.session.timeout.ms."),
        _s("group.streams.heartbeat.interval.ms", int, "5000", "Default streams.heartbeat.interval.ms of streams groups."),
        _s("group.streams.min.heartbeat.interval.ms", int, "5000", "Lower bound of a group's streams.heartbeat.interval.ms."),
        _s("group.streams.max.heartbeat.interval.ms", int, "15000", "Upper bound of a group's streams.heartbeat.interval.ms."),
        _s("group.streams.num.standby.replicas", int, "0", "Default streams.num.standby.replicas of streams groups."),
        _s("group.streams.max.standby.replicas", int, "2", "Upper bound of a group's streams.num.standby.replicas."),
        _s("group.streams.initial.rebalance.delay.ms", int, "3000", "Default streams.initial.rebalance.delay.ms of streams groups."),
        _s("group.streams.assignment.interval.ms", int, "1000", "Default streams.assignment.interval.ms of streams groups."),
        _s("group.streams.min.assignment.interval.ms", int, "0", "Lower bound of a group's streams.assignment.interval.ms."),
        _s("group.streams.max.assignment.interval.ms", int, "15000", "Upper bound of a group's streams.assignment.interval.ms."),
        _s("group.streams.assignors", str, "sticky", "Task assignors of streams groups; a group's streams.assignor.name must be one of them."),
        _s("group.streams.rack.aware.assignment.tags", str, "", "Default streams.rack.aware.assignment.tags of streams groups."),
        _s("group.streams.assignor.offload.enable", _bool, "true", "Default of the internal group config streams.assignor.offload.enable."),
        _s("group.streams.task.offset.interval.ms", int, "60000", "Default of the internal group config streams.task.offset.interval.ms."),
        _s("group.streams.min.task.offset.interval.ms", int, "15000", "Lower bound of a group's streams.task.offset.interval.ms."),
        _s("group.streams.num.warmup.replicas", int, "2", "Default of the internal group config streams.num.warmup.replicas."),
        _s("group.streams.max.warmup.replicas", int, "20", "Upper bound of a group's streams.num.warmup.replicas."),
        _s("group.streams.acceptable.recovery.lag", int, "10000", "Default of the internal group config streams.acceptable.recovery.lag."),
        _s("share.coordinator.snapshot.update.records.per.snapshot", int, "500",
           "ShareUpdate records written after a share partition's ShareSnapshot before the next snapshot."),
        _s("group.consumer.migration.policy", str, "bidirectional", "Classic and consumer members in one group (KIP-848 online upgrade/downgrade): bidirectional (Kafka 4.0's default), upgrade, downgrade or disabled (Kafka 3.9's default)."),
        _s("offsets.retention.minutes", int, "10080", "Keep committed offsets of empty groups this long."),
        _s("offsets.retention.check.interval.ms", int, "600000", "How often expired offsets are removed."),
        _s("offsets.topic.num.partitions", int, "1", "Partitions of __consumer_offsets."),
        _s("transactional.id.expiration.ms", int, "604800000", "Forget idle transactional ids (and their producer ids) after this long."),
        _s("transaction.max.timeout.ms", int, "900000", "Largest transaction.timeout.ms a producer may ask for."),
        _s("transaction.state.log.num.partitions", int, "1", "Partitions of __transaction_state."),
        _s("transaction.state.log.segment.bytes", int, "104857600", "segment.bytes of __transaction_state."),
        _s("transaction.abort.timed.out.transaction.cleanup.interval.ms", int, "10000", "How often transactions past their timeout are aborted."),
        _s("transaction.remove.expired.transaction.cleanup.interval.ms", int, "3600000", "How often expired transactional ids are removed."),
        _s("transaction.partition.verification.enable", _bool, "true", "KIP-890: a transactional batch is accepted only for a partition added to its transaction."),
        _s("authorizer.class.name", _authorizer_class, "", "Turns authorization on: kafka.security.authorizer.AclAuthorizer or org.apache.kafka.metadata.authorizer.StandardAuthorizer (empty: everything is allowed)."),
        _s("super.users", str, "", "Principals allowed everything, ';'-separated (User:admin;User:ops)."),
        _s("allow.everyone.if.no.acl.found", _bool, "false", "Allow an operation on a resource no ACL applies to."),
        _s("shutdown.timeout.ms", int, "10000", "How long in-flight requests get to finish on SIGTERM."),
        _s("http.listeners", _http_listeners, "127.0.0.1:8080",
           "HOST:PORT of the HTTP listener serving /metrics (Prometheus), /healthz, /readyz and the web console; empty: none."),
        _s("trafka.console.enable", _bool, "true",
           "Serve the web console (/, /static/, /api/) on http.listeners; false: only /metrics, /healthz and /readyz."),
        # TLS (server/security/tls.py); each may also be set per listener as
        # listener.name.<lower-case name>.ssl.* (Kafka's prefix).
        _s("ssl.keystore.type", str, "JKS", "PEM or PKCS12 (JKS: read as PKCS12, as Java's keystore.type.compat does)."),
        _s("ssl.keystore.location", str, "", "The broker's key and certificate chain (PEM file or PKCS12 store)."),
        Setting("ssl.keystore.password", str, "", "Password of the keystore (PKCS12) or of its key (PEM).", "PASSWORD"),
        Setting("ssl.key.password", str, "", "Password of the private key in the keystore.", "PASSWORD"),
        _s("ssl.keystore.certificate.chain", str, "", "KIP-651: the certificate chain as PEM text (ssl.keystore.type=PEM)."),
        Setting("ssl.keystore.key", str, "", "KIP-651: the private key as PEM text (ssl.keystore.type=PEM).", "PASSWORD"),
        _s("ssl.truststore.type", str, "JKS", "PEM or PKCS12: the CAs trusted for client (and broker) certificates."),
        _s("ssl.truststore.location", str, "", "The trusted CA certificates (PEM file or PKCS12 store)."),
        Setting("ssl.truststore.password", str, "", "Password of a PKCS12 truststore.", "PASSWORD"),
        _s("ssl.truststore.certificates", str, "", "KIP-651: trusted CA certificates as PEM text (ssl.truststore.type=PEM)."),
        _s("ssl.client.auth", str, "none", "none, requested or required: ask clients for a certificate (mTLS)."),
        _s("ssl.principal.mapping.rules", str, "DEFAULT", "RULE:pattern/replacement/[LU] rules mapping a certificate's subject DN to a principal name."),
        _s("ssl.enabled.protocols", str, "TLSv1.2,TLSv1.3", "TLS versions accepted."),
        _s("ssl.protocol", str, "TLSv1.3", "TLS protocol of the broker's own connections to other brokers."),
        _s("ssl.cipher.suites", str, "", "Cipher suites (OpenSSL or IANA names, comma separated); empty: the defaults."),
        _s("ssl.endpoint.identification.algorithm", str, "https", "https: the inter-broker client checks the broker's host name; empty: not."),
        _s("trafka.ssl.handshake.timeout.ms", int, "10000", "A TLS handshake not finished in this time closes the connection."),
        # SASL (server/security/sasl/): each may also be given per listener as listener.name.<l>.<name>.
        _s("sasl.enabled.mechanisms", str, "GSSAPI", "SASL mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (Kafka's default GSSAPI is not supported)."),
        _s("sasl.mechanism.inter.broker.protocol", str, "GSSAPI", "SASL mechanism of this broker's connections to the others when the inter-broker listener is SASL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512."),
        Setting("sasl.jaas.config", str, "", "JAAS login module entry (PLAIN users: user_<name>=\"<password>\").", "PASSWORD"),
        _s("connection.failed.authentication.delay.ms", int, "100", "A connection whose authentication failed is closed this long after the answer (KIP-306)."),
        _s("connections.max.reauth.ms", int, "0", "KIP-368: SASL sessions last this long, then must re-authenticate (0: forever)."),
        Setting("sasl.server.callback.handler.class", str, "", "OAUTHBEARER: org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler validates JWTs against a JWKS.", "CLASS"),
        _s("sasl.oauthbearer.jwks.endpoint.url", str, "", "JWKS of the OAUTHBEARER validator (file://, http://, https://)."),
        _s("sasl.oauthbearer.expected.issuer", str, "", "Required iss claim of OAUTHBEARER tokens (empty: not checked)."),
        _s("sasl.oauthbearer.expected.audience", str, "", "Accepted aud claims of OAUTHBEARER tokens, comma-separated (empty: not checked)."),
        _s("sasl.oauthbearer.sub.claim.name", str, "sub", "Claim of OAUTHBEARER tokens that names the principal."),
        _s("sasl.oauthbearer.clock.skew.seconds", int, "30", "Clock skew allowed when checking OAUTHBEARER token times."),
    ]
}


# BrokerConfig.source() of the two dynamic layers (DescribeConfigs' DYNAMIC_BROKER_CONFIG and
# DYNAMIC_DEFAULT_BROKER_CONFIG).
DYNAMIC_BROKER = "dynamic_broker"
DYNAMIC_DEFAULT = "dynamic_default"


@dataclass
class BrokerConfig:
    """Resolved broker settings plus where each came from."""

    values: dict[str, str] = field(default_factory=dict)  # the static layer: file, env, flags
    sources: dict[str, str] = field(default_factory=dict)  # name -> "default" | "file" | "env" | "flag"
    dynamic_default: dict[str, str] = field(default_factory=dict)  # config/brokers/<default>
    dynamic_broker: dict[str, str] = field(default_factory=dict)  # config/brokers/<this id>
    listeners: list[Callable[[set[str]], None]] = field(default_factory=list)
    listen_host: str = "0.0.0.0"
    listen_port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    # server/listeners.py: every listener (the first is listen_host/listen_port)
    # and the inter-broker listener's name.
    listener_list: tuple = ()
    inter_broker_listener: str = "PLAINTEXT"

    def get(self, name: str) -> Any:
        setting = SETTINGS[name]
        raw = self.raw(name)
        try:
            return setting.parse(raw)
        except ValueError as exc:  # pragma: no cover - validated at load
            raise ConfigError(f"{name}={raw!r}: {exc}") from None

    def raw(self, name: str) -> str:
        """The effective value as given (per-broker dynamic > cluster default > static >
        built-in default); an unknown key has only the value it was given with."""
        for layer in (self.dynamic_broker, self.dynamic_default, self.values):
            value = layer.get(name)
            if value is not None:
                return value
        return SETTINGS[name].default

    def explicit(self, name: str) -> bool:
        """Whether the user set `name` (file, environment, flag, dynamic), rather than
        leaving it at its default."""
        return self.source(name) != "default"

    def source(self, name: str) -> str:
        """Where the effective value comes from: DYNAMIC_BROKER, DYNAMIC_DEFAULT, "file",
        "env", "flag" or "default"."""
        if name in self.dynamic_broker:
            return DYNAMIC_BROKER
        if name in self.dynamic_default:
            return DYNAMIC_DEFAULT
        return self.sources.get(name, "default")

    def layers(self, name: str) -> list[tuple[str, str]]:
        """Every value `name` has, most specific first, as (source, value): Kafka's synonym
        chain of one broker setting in DescribeConfigs (include_synonyms)."""
        chain = []
        if name in self.dynamic_broker:
            chain.append((DYNAMIC_BROKER, self.dynamic_broker[name]))
        if name in self.dynamic_default:
            chain.append((DYNAMIC_DEFAULT, self.dynamic_default[name]))
        if name in self.values:
            chain.append((self.sources.get(name, "file"), self.values[name]))
        if name in SETTINGS and self.sources.get(name) != "default":  # a launcher's default replaces the built-in
            chain.append(("default", SETTINGS[name].default))
        return chain

    def set_dynamic(self, default: Mapping[str, str], broker: Mapping[str, str]) -> set[str]:
        """Replace both dynamic layers; returns the names whose effective value changed and
        tells the listeners (each gets the changed names; one failing does not stop the others)."""
        names = set(self.dynamic_default) | set(self.dynamic_broker) | set(default) | set(broker)
        before = {n: self._effective_or_none(n) for n in names}
        self.dynamic_default = dict(default)
        self.dynamic_broker = dict(broker)
        changed = {n for n in names if self._effective_or_none(n) != before[n]}
        if changed:
            for listener in list(self.listeners):
                try:
                    listener(changed)
                except Exception:
                    log.exception("applying the changed broker configs %s", sorted(changed))
        return changed

    def add_listener(self, listener: Callable[[set[str]], None]) -> None:
        """Call `listener(changed_names)` after each change of the dynamic layers."""
        self.listeners.append(listener)

    def _effective_or_none(self, name: str) -> str | None:
        try:
            return self.raw(name)
        except KeyError:
            return None

    def listener_setting(self, listener: str | None, name: str) -> str:
        """`name` for one listener: Kafka's `listener.name.<lower-case name>.<name>` when
        set, else the broker-wide value."""
        if listener:
            value = self.values.get(f"listener.name.{listener.lower()}.{name}")
            if value is not None:
                return value
        return self.raw(name)

    def advertised_for(self, listener: str | None) -> tuple[str, int] | None:
        """The address `listener` advertises (None: the broker has no such listener);
        None as the name means the first listener, as for connections of in-process tests."""
        for item in self.listener_list:
            if listener is None or item.name == listener:
                return item.advertised_host, item.advertised_port
        return self.advertised if listener is None or not self.listener_list else None

    def set(self, name: str, value: str, source: str) -> None:
        setting = SETTINGS.get(name)
        if setting is None and name.startswith("listener.name."):
            # per-listener settings (listener.name.ssl.ssl.keystore.location): known when
            # their suffix is; kept in the static layer for listener_setting.
            suffix = name[len("listener.name."):].partition(".")[2]
            if suffix in SETTINGS:
                try:
                    SETTINGS[suffix].parse(value)
                except ValueError as exc:
                    raise ConfigError(f"{name}={value!r}: {exc}") from None
                self.values[name] = value
                self.sources[name] = source
                return
        if setting is None:
            # Kafka ignores unknown keys in server.properties with a warning; we keep them
            # so DescribeConfigs can show them, but they change nothing.
            if not name.startswith("listener.name."):  # per-listener settings: known by their suffix
                log.warning("the configuration '%s' was supplied but isn't a known config", name)
            self.values[name] = value
            self.sources[name] = source
            return
        try:
            setting.parse(value)
        except ValueError as exc:
            raise ConfigError(f"{name}={value!r}: {exc}") from None
        self.values[name] = value
        self.sources[name] = source

    @property
    def data_dir(self) -> pathlib.Path:
        return pathlib.Path(self.raw("log.dirs"))

    @property
    def node_id(self) -> int:
        if "node.id" in self.values:
            return self.get("node.id")
        return self.get("broker.id")

    @property
    def clustered(self) -> bool:
        """A cluster member (zookeeper.connect set) rather than the embedded single broker."""
        return bool(self.raw("zookeeper.connect"))

    @property
    def advertised(self) -> tuple[str, int]:
        host = self.advertised_host or self.listen_host
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1" if host != "::" else "::1"
        return host, self.advertised_port or self.listen_port


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties subset: key=value or key: value, # and ! comments, trailing \\ joins."""
    out: dict[str, str] = {}
    pending = ""
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        line = pending + line
        pending = ""
        for sep_index, ch in enumerate(line):
            if ch in "=:":
                key, value = line[:sep_index].strip(), line[sep_index + 1:].strip()
                break
        else:
            key, value = line, ""
        out[key] = value
    return out


def split_host_port(text: str, what: str) -> tuple[str, int]:
    text = text.strip()
    if "://" in text:
        text = text.split("://", 1)[1]
    if "," in text:
        text = text.split(",", 1)[0]
    host, sep, port = text.rpartition(":")
    if not sep:
        raise ConfigError(f"{what} must be HOST:PORT, got {text!r}")
    try:
        port_number = int(port)
    except ValueError:
        raise ConfigError(f"{what} port must be a number, got {port!r}") from None
    if not 0 <= port_number <= 65535:
        raise ConfigError(f"{what} port {port_number} out of range")
    return host.strip("[]") or "0.0.0.0", port_number


def parse_set_options(items: list[str]) -> dict[str, str]:
    """`--set KEY=VALUE` options (repeatable) as settings; ConfigError names a malformed one."""
    settings: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set needs KEY=VALUE, got {item!r}")
        settings[key.strip()] = value.strip()
    return settings


def load_config(
    *,
    config_file: str | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, str] | None = None,
    defaults: Mapping[str, str] | None = None,
) -> BrokerConfig:
    """Resolve settings from file, environment (TRAFKA_*) and flags, in that order.
    `defaults` (`trafka serve --default`, what a launcher of several brokers on one host
    passes) replace built-in defaults and keep their standing: DescribeConfigs shows them
    as DEFAULT_CONFIG, and an HTTP side on a taken default port is left off, not fatal."""
    cfg = BrokerConfig()
    for key, value in (defaults or {}).items():
        if key not in SETTINGS:
            raise ConfigError(f"--default {key}: not a known setting")
        cfg.set(key, value, "default")
    if config_file:
        try:
            text = pathlib.Path(config_file).read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read config file {config_file}: {exc}") from None
        for key, value in parse_properties(text).items():
            cfg.set(key, value, "file")
    env = os.environ if environ is None else environ
    by_env_name = {("TRAFKA_" + name.upper().replace(".", "_")): name for name in SETTINGS}
    for env_name, name in by_env_name.items():
        if env_name in env:
            cfg.set(name, env[env_name], "env")
    for key, value in (overrides or {}).items():
        cfg.set(key, value, "flag")
    cfg.listener_list = parse_listeners(cfg)
    cfg.inter_broker_listener = inter_broker_listener(cfg, cfg.listener_list).name
    first = cfg.listener_list[0]
    cfg.listen_host, cfg.listen_port = first.host, first.port
    if cfg.raw("advertised.listeners") and (first.advertised_host, first.advertised_port) != (first.host, first.port):
        cfg.advertised_host, cfg.advertised_port = first.advertised_host, first.advertised_port
    if cfg.get("default.replication.factor") != 1 and not cfg.raw("zookeeper.connect"):
        raise ConfigError("default.replication.factor must be 1 on a single broker (no zookeeper.connect)")
    return cfg
