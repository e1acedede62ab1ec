"""Responses as parts: a `records` value that is a region (not bytes) becomes a part of its
own, its length prefix written by the codec and its length counted in the frame's size.

The check that matters: sending the parts in order, each region replaced by its bytes,
is byte for byte the frame `encode_response` makes from the same body with the bytes
inline — at a non-flexible version (int32 length) and a flexible one (uvarint length).
"""

from __future__ import annotations

import pytest

from wire import (
    ApiKey,
    Connection,
    EncodeError,
    FrameTooLarge,
    LocalProtocolError,
    MalformedFrame,
    ProtocolError,
    RemoteProtocolError,
    decode_response,
    encode_request,
    encode_response,
    encode_response_parts,
)


class _Span:
    """A region as the codec sees one: a length, and (for the test) the bytes it stands for."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)


def _partition(index: int, records) -> dict:
    return {"partition_index": index, "error_code": 0, "high_watermark": 10, "last_stable_offset": 10,
            "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1, "records": records}


def _fetch_body(version: int, records: list) -> dict:
    topic = {"partitions": [_partition(i, r) for i, r in enumerate(records)]}
    if version >= 13:
        topic["topic_id"] = __import__("uuid").UUID(int=7)
    else:
        topic["topic"] = "t"
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [topic]}


def _joined(parts: list) -> bytes:
    return b"".join(p if isinstance(p, bytes) else p.data for p in parts)


@pytest.mark.parametrize("version", [4, 11, 12, 16])
@pytest.mark.parametrize("sizes", [[70000], [0, 200, 130], [100000, 5, 300000]])
def test_parts_are_the_frame_with_regions_inline(version, sizes):
    datas = [bytes([i + 1]) * n for i, n in enumerate(sizes)]
    regions = [_Span(d) for d in datas]
    parts = encode_response_parts(ApiKey.FETCH, version, 42, _fetch_body(version, regions))
    assert [p for p in parts if not isinstance(p, bytes)] == regions  # in frame order, each once
    frame = encode_response(ApiKey.FETCH, version, 42, _fetch_body(version, datas))
    assert _joined(parts) == frame
    cid, body = decode_response(ApiKey.FETCH, version, frame[4:])
    assert cid == 42 and [bytes(p["records"]) for p in body["responses"][0]["partitions"]] == datas


def test_without_regions_one_bytes_part_equal_to_encode_response():
    body = _fetch_body(12, [b"abc", b""])
    assert encode_response_parts(ApiKey.FETCH, 12, 5, body) == [encode_response(ApiKey.FETCH, 12, 5, body)]
    conn = Connection()
    conn.receive_data(encode_request(ApiKey.API_VERSIONS, 3, 9, {"client_software_name": "t",
                                                                   "client_software_version": "1"}))
    request = conn.next_request()
    parts = conn.send(request, {"error_code": 0, "api_keys": [], "throttle_time_ms": 0})
    assert len(parts) == 1 and type(parts[0]) is bytes


def test_a_region_where_only_bytes_can_go_is_an_encode_error():
    # encode_response makes one bytes frame: it has nowhere to put a region.
    with pytest.raises(EncodeError, match="records"):
        encode_response(ApiKey.FETCH, 12, 1, _fetch_body(12, [_Span(b"x" * 10)]))
    for wrong in ("text", 5, object()):
        with pytest.raises(EncodeError):
            encode_response_parts(ApiKey.FETCH, 12, 1, _fetch_body(12, [wrong]))


def test_a_frame_over_the_int32_size_prefix_is_refused():
    class Huge:
        def __len__(self) -> int:
            return 0x7FFFFFF0

    with pytest.raises(EncodeError, match="int32"):
        encode_response_parts(ApiKey.FETCH, 12, 1, _fetch_body(12, [Huge(), Huge()]))


def test_protocol_errors_say_whose_fault_they_are():
    assert issubclass(MalformedFrame, RemoteProtocolError)
    assert issubclass(FrameTooLarge, RemoteProtocolError)
    assert issubclass(EncodeError, LocalProtocolError)
    for cls in (RemoteProtocolError, LocalProtocolError):
        assert issubclass(cls, ProtocolError)
    assert not issubclass(EncodeError, RemoteProtocolError)
    conn = Connection(max_frame_size=100)
    conn.receive_data(b"\x00\x00\x10\x00")
    with pytest.raises(RemoteProtocolError):
        conn.next_request()
