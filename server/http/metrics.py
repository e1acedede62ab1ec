"""The broker's Prometheus metrics, named as the Prometheus JMX exporter names Kafka's MBeans.

Why this shape: the broker moves millions of messages a second, so nothing here runs per
record and no prometheus_client object is touched on the data path. The data path bumps
plain ints — `Partition.messages_in/bytes_in/bytes_out/isr_shrinks/isr_expands` per batch
or read, `Broker.purgatory` per wait, `PartitionLog.flush_stats` per fsync, and
`RequestMetrics` below once per request — and `BrokerCollector` turns them, plus state
the broker keeps anyway (high watermarks, log sizes, ISRs, committed offsets), into metric
families when Prometheus scrapes. Consumer-group lag is computed then too, from committed
offsets and high watermarks, instead of by a background loop.

Each broker has its own CollectorRegistry (`build_registry`): tests run several brokers in
one process, and the global registry would mix them.

Units: request latency (`kafka_network_requestmetrics_totaltimems`) and flush latency
(`kafka_log_logflushstats_logflushrateandtimems`) are histograms in milliseconds, as the
"Ms" in Kafka's MBean names says. Error counts include error="NONE" as Kafka's
ErrorsPerSec does (one per error_code field that is 0: per partition in Produce and
Fetch); the generated walker sums them in a local and updates the dict once per response.

`collect` may run in a worker thread (server/http/app.py renders off the event loop): it
only reads, and takes snapshots (`list(d.items())`, copy-on-write dicts such as
`Broker.partitions`) of whatever the trio thread may change meanwhile.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator

from wire.definitions import MESSAGES
from wire.errors import ErrorCode

if TYPE_CHECKING:  # pragma: no cover
    from server.broker import Broker

# Request latency buckets, milliseconds (a caught-up consumer's Fetch long-poll lands at
# fetch.max.wait.ms, 500 by default).
LATENCY_BUCKETS_MS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0,
                      5000.0, 10000.0, 30000.0)


def request_name(api_key: int) -> str:
    """Kafka's name of an API (ApiKeys.name: "Produce", "OffsetCommit"), the `request`
    label of RequestMetrics."""
    try:
        name = MESSAGES[(api_key, "request")]["name"]
    except KeyError:
        return str(api_key)
    return name[:-len("Request")] if name.endswith("Request") else name


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


# ---- where a response carries error codes ------------------------------------------------
# A tree per API, built once from the message definitions: (has error_code here, children
# as (field, subtree, is_array)), only branches that lead to an error_code.
_Tree = tuple[bool, tuple]


def _tree(fields: list[tuple]) -> _Tree | None:
    has = False
    children = []
    for name, typ, _versions, _nullable, _tagged, _tag, _default, _flex, kids in fields:
        if name == "error_code" and typ == "int16":
            has = True
        elif kids:
            sub = _tree(kids)
            if sub is not None:
                children.append((name, sub, typ.startswith("[]")))
    if not has and not children:
        return None
    return has, tuple(children)


def _walker_source(tree: _Tree, var: str, depth: int, lines: list[str]) -> None:
    has, children = tree
    pad = "    " * (depth + 1)
    if has:
        lines.append(f"{pad}code = {var}.get('error_code')")
        lines.append(f"{pad}if code:")
        lines.append(f"{pad}    counts[code] = counts.get(code, 0) + 1")
        lines.append(f"{pad}elif code is not None:  # absent: a field this response does not carry")
        lines.append(f"{pad}    none += 1")
    for index, (name, sub, is_array) in enumerate(children):
        child = f"v{depth}_{index}"
        if is_array:
            lines.append(f"{pad}for {child} in {var}.get({name!r}) or ():")
        else:
            lines.append(f"{pad}{child} = {var}.get({name!r})")
            lines.append(f"{pad}if {child} is not None:")
        _walker_source(sub, child, depth + 1, lines)


def _error_walker(api_key: int) -> Callable[[dict, dict], None] | None:
    """A function counting the error codes of a response body of this API into `counts`,
    NONE (0) included as Kafka's ErrorsPerSec counts it: nested loops generated from the
    message definition, no recursion (it runs once per request: ~0.3 µs for a
    one-partition Produce response)."""
    msg = MESSAGES.get((api_key, "response"))
    tree = _tree(msg["fields"]) if msg is not None else None
    if tree is None:
        return None
    lines = ["def walk(body, counts):", "    none = 0"]
    _walker_source(tree, "body", 0, lines)
    # NONE is counted in a local and added once: one dict update per response, not per partition.
    lines += ["    if none:", "        counts[0] = counts.get(0, 0) + none"]
    namespace: dict = {}
    exec("\n".join(lines), namespace)  # noqa: S102 - source built above from field names only
    return namespace["walk"]


MAX_VERSION = 64  # request versions counted per API (Kafka's go up to 17)


class ApiStats:
    """One API's counters: requests per version, the latency histogram, errors per code.

    `record` is a closure over plain lists (no attribute lookups: it runs once per
    request); the collector reads the lists."""

    __slots__ = ("api_key", "versions", "buckets", "total_ms", "errors", "record")

    def __init__(self, api_key: int) -> None:
        self.api_key = api_key
        versions = self.versions = [0] * MAX_VERSION
        buckets = self.buckets = [0] * (len(LATENCY_BUCKETS_MS) + 1)  # the last: above every bound (+Inf)
        total_ms = self.total_ms = [0.0]
        errors = self.errors = {}
        walk = _error_walker(api_key)

        def record(api_version: int, started: float, body: Any, perf_counter=time.perf_counter,
                   bisect_left=bisect_left, bounds=LATENCY_BUCKETS_MS) -> None:
            ms = (perf_counter() - started) * 1000.0
            versions[api_version] += 1
            buckets[bisect_left(bounds, ms)] += 1
            total_ms[0] += ms
            if walk is not None and type(body) is dict:
                try:
                    walk(body, errors)
                except Exception:  # a body shape the definitions did not foresee: never fail the request
                    pass

        self.record = record

    @property
    def count(self) -> int:
        return sum(self.versions)


class RequestMetrics:
    """Kafka's RequestMetrics (RequestsPerSec, TotalTimeMs, ErrorsPerSec) as plain counters,
    bumped by the network layer once per request (server/network.py `_dispatch`)."""

    def __init__(self) -> None:
        self.apis: dict[int, ApiStats] = {}
        self._recorders: dict[int, Callable[[int, float, Any], None]] = {}

    def record(self, api_key: int, api_version: int, started: float, body: Any) -> None:
        """A request answered (`body`: its response, None for acks=0) after `started`
        (time.perf_counter() when it was dispatched)."""
        try:
            self._recorders[api_key](api_version, started, body)
        except KeyError:
            stats = self.apis[api_key] = ApiStats(api_key)
            self._recorders[api_key] = stats.record
            stats.record(api_version, started, body)
        except IndexError:  # a version past MAX_VERSION: not counted
            pass

    def timed(self, finish: Callable[[], Awaitable[Any]], api_key: int, api_version: int,
              started: float) -> Callable[[], Awaitable[Any]]:
        """Wrap a DelayedResponse's `finish` (acks=all): recorded when the answer is ready."""

        async def finish_and_record() -> Any:
            body = await finish()
            self.record(api_key, api_version, started, body)
            return body

        return finish_and_record


# ---- the scrape-time collector --------------------------------------------------------------
class BrokerCollector:
    """Every metric of one broker, built from its state when Prometheus scrapes."""

    def __init__(self, broker: "Broker", server: Any = None, requests: RequestMetrics | None = None) -> None:
        self.broker = broker
        self.server = server  # server.network.Server once it exists (connections)
        self.requests = requests

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        broker = self.broker
        partitions = list(broker.partitions.values())  # copy-on-write dict: a consistent view
        node_id = broker.node_id

        # BrokerTopicMetrics, per topic
        messages_in: dict[str, int] = {}
        bytes_in: dict[str, int] = {}
        bytes_out: dict[str, int] = {}
        for p in partitions:
            topic = p.topic
            messages_in[topic] = messages_in.get(topic, 0) + p.messages_in
            bytes_in[topic] = bytes_in.get(topic, 0) + p.bytes_in
            bytes_out[topic] = bytes_out.get(topic, 0) + p.bytes_out
        for name, values, doc in (
                ("messagesin", messages_in, "Messages appended by producers (Kafka's MessagesInPerSec)."),
                ("bytesin", bytes_in, "Record bytes appended by producers (BytesInPerSec)."),
                ("bytesout", bytes_out, "Record bytes sent to consumers (BytesOutPerSec; followers not counted).")):
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", doc, labels=["topic"])
            for topic, value in sorted(values.items()):
                family.add_metric([topic], value)
            yield family

        # RequestMetrics
        if self.requests is not None:
            apis = sorted(self.requests.apis.items())
            requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                           "Requests answered, per API and version (RequestsPerSec).",
                                           labels=["request", "version"])
            errors = CounterMetricFamily("kafka_network_requestmetrics_errors",
                                         "Error codes in responses, per API, NONE included (ErrorsPerSec).",
                                         labels=["request", "error"])
            latency = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                            "Request time in milliseconds from dispatch to the response "
                                            "(TotalTimeMs; acks=all until replicated).",
                                            labels=["request"])
            bounds = [repr(b) for b in LATENCY_BUCKETS_MS] + ["+Inf"]
            for api_key, stats in apis:
                name = request_name(api_key)
                for version, count in enumerate(list(stats.versions)):
                    if count:
                        requests.add_metric([name, str(version)], count)
                for code, count in sorted(list(stats.errors.items())):
                    errors.add_metric([name, error_name(code)], count)
                cumulative = 0
                buckets = []
                for bound, count in zip(bounds, list(stats.buckets)):
                    cumulative += count
                    buckets.append((bound, cumulative))
                latency.add_metric([name], buckets, stats.total_ms[0])
            yield requests
            yield errors
            yield latency

        # SocketServer
        if self.server is not None:
            # Kafka's is per listener and network processor; Trafka's one event loop has no
            # processors, so the label is the listener name only (sum by listener in Kafka).
            connection_count = GaugeMetricFamily("kafka_server_socketservermetrics_connection_count",
                                                 "Open client connections, per listener.", labels=["listener"])
            for listener, count in sorted(list(self.server.listener_connections.items())):
                connection_count.add_metric([listener], count)
            yield connection_count

        # ReplicaManager
        cluster = broker.cluster
        led = [p for p in partitions if p.leader_id == node_id]
        under = sum(1 for p in led if len(p.isr) < len(p.replicas))
        under_min = sum(1 for p in led if len(p.isr) < p.min_insync_replicas)
        yield GaugeMetricFamily("kafka_server_replicamanager_partitioncount",
                                "Partitions with a replica on this broker.", value=len(partitions))
        yield GaugeMetricFamily("kafka_server_replicamanager_leadercount",
                                "Partitions this broker leads.", value=len(led))
        yield GaugeMetricFamily("kafka_server_replicamanager_underreplicatedpartitions",
                                "Partitions led here whose ISR is smaller than their replica set.", value=under)
        yield GaugeMetricFamily("kafka_server_replicamanager_underminisrpartitioncount",
                                "Partitions led here whose ISR is below min.insync.replicas.", value=under_min)
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks",
                                  "ISR shrinks of partitions led here (IsrShrinksPerSec).",
                                  value=sum(p.isr_shrinks for p in partitions))
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands",
                                  "ISR expansions of partitions led here (IsrExpandsPerSec).",
                                  value=sum(p.isr_expands for p in partitions))

        # KafkaController: reported by the active controller only, as in Kafka (sum over brokers)
        active = 1 if cluster is None else int(bool(getattr(cluster.controller, "active", False)))
        offline = 0
        if cluster is not None and active:
            states = list(cluster.controller.ctx.states.values())
            offline = sum(1 for state in states if state.leader < 0)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_activecontrollercount",
                                "1 on the active controller (a single broker is its own).", value=active)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_offlinepartitionscount",
                                "Partitions without a leader (reported by the active controller).", value=offline)

        # Purgatories
        size = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize",
                                 "Watches of waiting requests (a request waits on each of its partitions).",
                                 labels=["delayedOperation"])
        ops = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_numdelayedoperations",
                                "Requests waiting: Fetch and ShareFetch long-polls, acks=all Produce replication.",
                                labels=["delayedOperation"])
        for kind in ("Produce", "Fetch", "ShareFetch"):  # Kafka's DelayedShareFetch has its own purgatory
            size.add_metric([kind], broker.purgatory_watchers.get(kind, 0))
            ops.add_metric([kind], broker.purgatory.get(kind, 0))
        yield size
        yield ops

        # Log: per partition sizes and offsets, flush latency
        log_size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log segments.",
                                     labels=["topic", "partition"])
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "The partition's log end offset.",
                                labels=["topic", "partition"])
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "The partition's log start offset.",
                                  labels=["topic", "partition"])
        segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of the partition's log.",
                                     labels=["topic", "partition"])
        flush_buckets = None
        flush_sum = 0.0
        for p in partitions:
            if not p.is_open:
                continue  # left for its first use since a clean restart: not opened for a scrape
            labels = [p.topic, str(p.index)]
            plog = p.log
            segs = plog.segments
            log_size.add_metric(labels, sum(s.size for s in segs))
            segments.add_metric(labels, len(segs))
            end.add_metric(labels, plog.log_end_offset)
            start.add_metric(labels, plog.log_start_offset)
            stats = getattr(plog, "flush_stats", None)
            if stats is not None and stats.count:
                if flush_buckets is None:
                    flush_buckets = [0] * len(stats.buckets)
                for i, n in enumerate(list(stats.buckets)):
                    flush_buckets[i] += n
                flush_sum += stats.sum_ms
        yield log_size
        yield GaugeMetricFamily("trafka_log_unopened_logs",
                                "Logs a clean shutdown left to open at first use or by the warm-up after "
                                "start-up (Kafka opens every log before it listens); left out of the "
                                "kafka_log_log_* gauges until opened.",
                                value=self.broker.logs.statistics()["logs_deferred"])
        yield end
        yield start
        yield segments
        from storage.log import FLUSH_BUCKETS_MS

        flush = HistogramMetricFamily("kafka_log_logflushstats_logflushrateandtimems",
                                      "fsync time of log flushes in milliseconds (LogFlushRateAndTimeMs).")
        flush_buckets = flush_buckets or [0] * (len(FLUSH_BUCKETS_MS) + 1)
        cumulative = 0
        buckets = []
        for bound, count in zip([repr(b) for b in FLUSH_BUCKETS_MS] + ["+Inf"], flush_buckets):
            cumulative += count
            buckets.append((bound, cumulative))
        flush.add_metric([], buckets, flush_sum)
        yield flush

        # Consumer groups: lag from committed offsets and high watermarks, now
        yield from self._group_lag(partitions)

    def _group_lag(self, partitions: list) -> Iterator[Any]:
        """kafka_exporter's names (kafka_consumergroup_lag{consumergroup,topic,partition}):
        Kafka's JMX has no per-group lag. `groups` holds classic and KIP-848 consumer
        groups alike, both GroupOffsets (server/groups/offsets.py), so both are reported;
        KIP-932 share groups (broker.share) keep share-partition state, not committed
        offsets, and are left out (Kafka reports their lag differently). Only
        partitions with a replica here that knows the high watermark (the leader) are
        reported: a coordinator in a cluster does not see the rest."""
        from prometheus_client.core import GaugeMetricFamily

        high_watermarks = {(p.topic, p.index): p.high_watermark for p in partitions
                           if p.leader_id == self.broker.node_id}
        lag = GaugeMetricFamily("kafka_consumergroup_lag",
                                "High watermark minus the group's committed offset.",
                                labels=["consumergroup", "topic", "partition"])
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "The group's committed offset.",
                                    labels=["consumergroup", "topic", "partition"])
        groups = getattr(self.broker.groups, "groups", {})
        for group_id, group in sorted(list(groups.items())):
            offsets = getattr(group, "offsets", None)
            if not offsets:
                continue
            for (topic, index), committed in sorted(list(offsets.items())):
                hw = high_watermarks.get((topic, index))
                if hw is None:
                    continue
                labels = [group_id, topic, str(index)]
                offset = committed.offset
                current.add_metric(labels, offset)
                lag.add_metric(labels, max(hw - offset, 0))
        yield lag
        yield current


def build_registry(collector: BrokerCollector) -> Any:
    """A CollectorRegistry of this broker only (never prometheus_client's global one)."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry
