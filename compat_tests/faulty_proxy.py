"""A Kafka-aware TCP proxy that makes a healthy broker misbehave in one precise way.

    python -m compat_tests.faulty_proxy --listen 127.0.0.1:PORT --target 127.0.0.1:BROKER \
        --fault drop-produce|strip-apiversions-tags|none

It exists to prove the suite: a scenario pointed at a broker that loses data must fail.

How it works: each client connection gets its own upstream connection and two threads.
Requests are read frame by frame (4-byte size prefix), their api key and version taken from
the request header, and forwarded; every request that expects an answer leaves an entry in a
FIFO. Answers from the broker are matched to that FIFO, so the proxy knows what each response
is, and answers it makes up itself are slotted into the same FIFO so the client still sees
responses in request order (clients check correlation ids in order).

Faults:
- drop-produce: the first Produce request that carries data for a topic the proxy has not
  seen before is not forwarded; the proxy answers it with success (error 0, base offset 0).
  So the first batch written to every topic silently vanishes, acks and all: exactly the
  "broker acknowledged then lost it" failure. Every later request passes untouched.
- strip-apiversions-tags: ApiVersions v3+ responses lose their tagged fields (Tansu always
  sends four, which librdkafka < 2.2 mis-parses,
  docs/design/clients.md#no-tagged-fields-at-their-default). Used only to check
  the kcat adapter against Tansu; it changes no data.
- none: a transparent proxy.
"""

from __future__ import annotations

import argparse
import collections
import socket
import struct
import sys
import threading

from compat_tests import kafka_wire as kw

FAULTS = ("drop-produce", "strip-apiversions-tags", "none")


def log(msg: str) -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------------- Produce


def parse_produce_request(payload: bytes) -> tuple[int, int, int, int, list[tuple[str, list[int]]]]:
    """(version, correlation_id, acks, timeout_ms, [(topic, [partitions with records])])."""
    r = kw.Reader(payload)
    r.int16()  # api_key
    version, corr = r.int16(), r.int32()
    r.string(False)  # client_id, never compact
    flexible = version >= kw.FLEXIBLE_FROM[kw.API_PRODUCE]
    if flexible:
        r.skip_tags()
    if version >= 3:
        r.string(flexible)  # transactional_id
    acks, timeout_ms = r.int16(), r.int32()
    topics = []
    for _ in range(r.array_len(flexible)):
        name = r.string(flexible)
        parts = []
        for _ in range(r.array_len(flexible)):
            index = r.int32()
            records = r.bytes_(flexible)
            if flexible:
                r.skip_tags()
            if records:
                parts.append(index)
        if flexible:
            r.skip_tags()
        topics.append((name, parts))
    return version, corr, acks, timeout_ms, topics


def fake_produce_response(version: int, corr: int, topics: list[tuple[str, list[int]]]) -> bytes:
    """A Produce response saying every partition was written at offset 0."""
    flexible = version >= kw.FLEXIBLE_FROM[kw.API_PRODUCE]

    def array(n: int) -> bytes:
        return kw.varint_unsigned(n + 1) if flexible else struct.pack(">i", n)

    out = bytearray(struct.pack(">i", corr))
    if flexible:
        out += b"\x00"  # response header v1 tags
    out += array(len(topics))
    for name, parts in topics:
        out += kw.string(name, flexible)
        out += array(len(parts))
        for index in parts:
            out += struct.pack(">ihq", index, 0, 0)  # index, error_code, base_offset
            if version >= 2:
                out += struct.pack(">q", -1)  # log_append_time_ms
            if version >= 5:
                out += struct.pack(">q", 0)  # log_start_offset
            if version >= 8:
                out += array(0)  # record_errors
                out += kw.string(None, flexible)  # error_message
            if flexible:
                out += b"\x00"
        if flexible:
            out += b"\x00"
    if version >= 1:
        out += struct.pack(">i", 0)  # throttle_time_ms
    if flexible:
        out += b"\x00"
    return bytes(out)


# --------------------------------------------------------------------------- ApiVersions


def strip_api_versions_tags(payload: bytes) -> bytes:
    """Re-encode an ApiVersions v3+ response with every tag buffer empty."""
    r = kw.Reader(payload)
    corr, error = r.int32(), r.int16()
    if error == kw.UNSUPPORTED_VERSION:
        return payload  # v0 body: nothing flexible in it
    out = bytearray(struct.pack(">ih", corr, error))
    n = r.array_len(True)
    out += kw.varint_unsigned(n + 1)
    for _ in range(n):
        out += r.take(6)
        r.skip_tags()
        out += b"\x00"
    out += struct.pack(">i", r.int32())  # throttle_time_ms
    r.skip_tags()
    out += b"\x00"
    return bytes(out)


# --------------------------------------------------------------------------- proxy


class Proxy:
    def __init__(self, listen: tuple[str, int], target: tuple[str, int], fault: str) -> None:
        self.listen = listen
        self.target = target
        self.fault = fault
        self.seen_topics: set[str] = set()
        self.seen_lock = threading.Lock()

    def serve_forever(self) -> None:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(self.listen)
        server.listen(64)
        log(f"faulty_proxy: {self.listen[0]}:{self.listen[1]} -> "
            f"{self.target[0]}:{self.target[1]} fault={self.fault}")
        while True:
            client, _addr = server.accept()
            try:
                upstream = socket.create_connection(self.target, timeout=10)
                upstream.settimeout(None)
            except OSError as exc:
                log(f"upstream connect failed: {exc}")
                client.close()
                continue
            _Connection(self, client, upstream).start()

    def should_drop(self, topics: list[tuple[str, list[int]]]) -> bool:
        if self.fault != "drop-produce":
            return False
        with self.seen_lock:
            fresh = [t for t, parts in topics if parts and t not in self.seen_topics]
            self.seen_topics.update(t for t, parts in topics if parts)
        return bool(fresh)


class _Connection:
    def __init__(self, proxy: Proxy, client: socket.socket, upstream: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.lock = threading.Lock()
        # ("upstream", api_key, api_version) or ("fake", response payload)
        self.pending: collections.deque = collections.deque()

    def start(self) -> None:
        for target in (self._requests, self._responses):
            threading.Thread(target=target, daemon=True).start()

    def _close(self) -> None:
        for sock in (self.client, self.upstream):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _flush_fakes(self) -> None:
        while self.pending and self.pending[0][0] == "fake":
            self.client.sendall(kw.frame(self.pending.popleft()[1]))

    def _requests(self) -> None:
        try:
            while True:
                payload = kw.read_frame(self.client)
                key, version, corr = kw.request_api(payload)
                expects_response = True
                if key == kw.API_PRODUCE:
                    version, corr, acks, _timeout, topics = parse_produce_request(payload)
                    expects_response = acks != 0
                    if self.proxy.should_drop(topics):
                        log(f"drop-produce: swallowed Produce v{version} corr={corr} "
                            f"acks={acks} topics={topics}")
                        with self.lock:
                            if expects_response:
                                self.pending.append(
                                    ("fake", fake_produce_response(version, corr, topics)))
                            self._flush_fakes()
                        continue
                with self.lock:
                    if expects_response:
                        self.pending.append(("upstream", key, version))
                self.upstream.sendall(kw.frame(payload))
        except (OSError, ConnectionError, kw.WireError, struct.error):
            pass
        finally:
            self._close()

    def _responses(self) -> None:
        try:
            while True:
                payload = kw.read_frame(self.upstream)
                with self.lock:
                    self._flush_fakes()
                    if not self.pending:
                        raise kw.WireError("response without a request")
                    _kind, key, version = self.pending.popleft()
                    if (key == kw.API_API_VERSIONS and version >= 3
                            and self.proxy.fault == "strip-apiversions-tags"):
                        payload = strip_api_versions_tags(payload)
                    self.client.sendall(kw.frame(payload))
                    self._flush_fakes()
        except (OSError, ConnectionError, kw.WireError, struct.error):
            pass
        finally:
            self._close()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, type=_address)
    parser.add_argument("--target", required=True, type=_address)
    parser.add_argument("--fault", choices=FAULTS, default="drop-produce")
    args = parser.parse_args(argv)
    if args.listen[0] not in ("127.0.0.1", "localhost"):
        parser.error("the proxy only listens on loopback")
    try:
        Proxy(args.listen, args.target, args.fault).serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
