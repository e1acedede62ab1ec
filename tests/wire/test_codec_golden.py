"""Golden frames from real clients and brokers decode, and re-encode to the same bytes.

The frames in tests/wire/golden/*.hex were captured by tests/wire/capture_golden.py:
confluent-kafka, kafka-python and aiokafka against Tansu 0.6, and kcat (librdkafka 2.0.2)
against Trafka, through a recording proxy. Requests go through `decode_request` and
`encode_request`; each response through `decode_response` and `encode_response` at the
version of the request it answers. Records inside are checked with wire.records (header,
CRC) so the batches are whole too.
"""

from __future__ import annotations

import pathlib

import pytest

from wire.connection import (
    NEED_DATA,
    Connection,
    Request,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from wire.records import iter_headers

GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"


def _load() -> list[tuple[str, int, str, int, int, bytes]]:
    """(file, line, direction, api_key, version, frame) for every stored frame."""
    out = []
    for path in sorted(GOLDEN.glob("*.hex")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            direction, key, version, hexdata = line.split()
            out.append((path.stem, lineno, direction, int(key), int(version), bytes.fromhex(hexdata)))
    return out


FRAMES = _load()


def test_golden_folder_is_present_and_small():
    files = list(GOLDEN.glob("*.hex"))
    assert {p.stem for p in files} >= {"confluent_kafka", "kafka_python"}, "run tests/wire/capture_golden.py"
    assert sum(p.stat().st_size for p in GOLDEN.iterdir()) < 1_000_000


def _records(value):
    """Every records field in a decoded body."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "records" and v is not None:
                yield v
            else:
                yield from _records(v)
    elif isinstance(value, list):
        for v in value:
            yield from _records(v)


@pytest.mark.parametrize("source,lineno,direction,key,version,frame",
                         FRAMES, ids=[f"{f[0]}:{f[1]}-{f[2]}-{f[3]}v{f[4]}" for f in FRAMES])
def test_golden_frame_roundtrip(source, lineno, direction, key, version, frame):
    if direction == "request":
        request = decode_request(frame)
        assert isinstance(request, Request), f"{key} v{version} not served"
        assert (request.api_key, request.api_version) == (key, version)
        again = encode_request(key, version, request.correlation_id, request.body, client_id=request.client_id,
                               header_tags=request.header_tags)
        body = request.body
    else:
        correlation_id, body = decode_response(key, version, frame)
        again = encode_response(key, version, correlation_id, body)
    assert again[4:] == frame
    for records in _records(body):
        # Produce requests carry whole batches; fetch responses may end in a partial one
        # (KIP-74), which iter_headers rejects — so only requests are checked strictly.
        if direction == "request":
            assert list(iter_headers(records)), "no batch in a produce request"


def test_golden_covers_the_client_apis():
    """The capture holds the APIs and versions the stock clients send (docs/design/clients.md)."""
    seen = {(source, direction, key, version) for source, _l, direction, key, version, _f in FRAMES}
    expected = {
        "confluent_kafka": {(18, 3), (3, 12), (0, 10), (1, 16), (10, 2), (11, 5), (14, 3), (9, 9), (8, 9),
                            (19, 4)},
        "kafka_python": {(18, 4), (3, 12), (0, 9), (22, 4), (1, 12), (2, 9), (10, 6), (11, 7), (14, 5), (9, 8),
                         (8, 8), (13, 5), (19, 7), (20, 6), (32, 4)},
        "aiokafka": {(18, 0), (3, 5), (0, 7), (1, 11), (10, 1), (11, 5), (14, 3), (9, 3), (8, 3), (19, 3)},
    }
    for source, kinds in expected.items():
        if not (GOLDEN / f"{source}.hex").exists():
            continue
        for key, version in kinds:
            assert (source, "request", key, version) in seen, f"{source}: no request {key} v{version}"
            assert (source, "response", key, version) in seen, f"{source}: no response {key} v{version}"


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


@pytest.mark.parametrize("source", sorted({f[0] for f in FRAMES}))
def test_golden_requests_through_a_connection(source):
    """Each client's requests, back to back, fed to a Connection in odd-sized pieces,
    decode as they do one by one — and re-encode from the zero-copy views too."""
    frames = [frame for s, _l, direction, _k, _v, frame in FRAMES if s == source and direction == "request"]
    stream = b"".join(len(f).to_bytes(4, "big") + f for f in frames)
    conn = Connection()
    got = []
    for start in range(0, len(stream), 113):
        conn.receive_data(stream[start:start + 113])
        while (request := conn.next_request()) is not NEED_DATA:
            got.append(request)
    assert len(got) == len(frames)
    for request, frame in zip(got, frames):
        assert _plain(request.body) == _plain(decode_request(frame).body)
        again = encode_request(request.api_key, request.api_version, request.correlation_id, request.body,
                               client_id=request.client_id, header_tags=request.header_tags)
        assert again[4:] == frame
