"""The broker process over real loopback sockets: handshake, bad frames, shutdown."""

from __future__ import annotations

import socket
import struct

import pytest

from server.handlers import missing_handlers
from tests.brokerproc import BrokerProcess, recv_exact
from wire import ApiKey, decode_response, encode_request
from wire.errors import ErrorCode
from wire.registry import API_VERSIONS


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "data") as proc:
        yield proc



def roundtrip(port: int, api_key: int, version: int, body: dict, correlation_id: int = 7) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(encode_request(api_key, version, correlation_id, body))
        size = struct.unpack(">i", recv_exact(sock, 4))[0]
        return size, recv_exact(sock, size)


def test_every_advertised_api_has_a_handler():
    assert missing_handlers() == []


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_every_version(broker, version):
    _size, frame = roundtrip(broker.port, ApiKey.API_VERSIONS, version,
                             {"client_software_name": "tests", "client_software_version": "1"})
    cid, body = decode_response(ApiKey.API_VERSIONS, version, frame)
    assert cid == 7
    assert body["error_code"] == ErrorCode.NONE
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    assert ranges == {k: v for k, v in API_VERSIONS.items()}
    if version >= 3:
        # No tagged fields at all: librdkafka < 2.2 cannot skip them
        # (docs/design/clients.md#no-tagged-fields-at-their-default).
        assert frame.endswith(b"\x00") and "supported_features" not in body


def test_api_versions_unsupported_version_answers_v0_layout(broker):
    # A version above ours gets a v0 body with UNSUPPORTED_VERSION and our ApiVersions range.
    frame = struct.pack(">hhih", ApiKey.API_VERSIONS, 9, 42, -1) + b"\x00\x00"
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", recv_exact(sock, 4))[0]
        reply = recv_exact(sock, size)
    cid, body = decode_response(ApiKey.API_VERSIONS, 0, reply)
    assert cid == 42
    assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    assert body["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 4}]


def test_garbage_frame_closes_only_that_connection(broker):
    bad = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    good = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    try:
        # A Metadata v9 header followed by a body that lies about its array count.
        frame = struct.pack(">hhih", ApiKey.METADATA, 9, 1, -1) + b"\x00" + b"\xff\xff\xff\x0f"
        bad.sendall(struct.pack(">i", len(frame)) + frame)
        assert bad.recv(10) == b""  # closed by the broker
        good.sendall(encode_request(ApiKey.API_VERSIONS, 0, 5, {}))
        size = struct.unpack(">i", recv_exact(good, 4))[0]
        cid, body = decode_response(ApiKey.API_VERSIONS, 0, recv_exact(good, size))
        assert cid == 5 and body["error_code"] == ErrorCode.NONE
    finally:
        bad.close()
        good.close()


def test_oversized_frame_closes_connection(tmp_path):
    with BrokerProcess(tmp_path / "data", "--set", "socket.request.max.bytes=1024") as proc:
        with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as sock:
            sock.sendall(struct.pack(">i", 2048) + b"\x00" * 16)
            assert sock.recv(10) == b""
        # The broker still serves others.
        _size, frame = roundtrip(proc.port, ApiKey.API_VERSIONS, 0, {})
        assert decode_response(ApiKey.API_VERSIONS, 0, frame)[1]["error_code"] == 0


def test_requests_answered_in_order_when_pipelined(broker):
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        frames = b"".join(encode_request(ApiKey.API_VERSIONS, 0, cid, {}) for cid in range(20))
        frames += encode_request(ApiKey.METADATA, 1, 20, {"topics": []})
        sock.sendall(frames)
        seen = []
        for expected in range(21):
            size = struct.unpack(">i", recv_exact(sock, 4))[0]
            frame = recv_exact(sock, size)
            key = ApiKey.API_VERSIONS if expected < 20 else ApiKey.METADATA
            seen.append(decode_response(key, 0 if expected < 20 else 1, frame)[0])
        assert seen == list(range(21))


def test_sigterm_exits_cleanly_and_keeps_data(tmp_path):
    proc = BrokerProcess(tmp_path / "data").start()
    _size, frame = roundtrip(proc.port, ApiKey.CREATE_TOPICS, 4,
                             {"topics": [{"name": "kept", "num_partitions": 2, "replication_factor": 1}],
                              "timeout_ms": 5000})
    assert decode_response(ApiKey.CREATE_TOPICS, 4, frame)[1]["topics"][0]["error_code"] == 0
    assert proc.stop() == 0
    proc.start()
    try:
        _size, frame = roundtrip(proc.port, ApiKey.METADATA, 1, {"topics": [{"name": "kept"}]})
        topic = decode_response(ApiKey.METADATA, 1, frame)[1]["topics"][0]
        assert topic["error_code"] == 0 and len(topic["partitions"]) == 2
    finally:
        assert proc.stop() == 0
