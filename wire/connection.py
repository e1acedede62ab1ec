"""`Connection`: the broker side of one Kafka connection, sans-IO (the h11 shape).

How this works: the caller feeds bytes with `receive_data`, then calls `next_request`
until it returns `NEED_DATA`. Each call peels one size-prefixed frame off the buffer and
decodes its header and body at the version the header names. Responses are turned into
parts with `send(request, body)`; the caller writes them. Nothing here touches a socket,
so the same object is driven by the trio server, by tests byte by byte, and by tools.

Rules carried here rather than in handlers:
- request header v2 (with tagged fields) for flexible requests, v1 otherwise;
- response header v1 for flexible responses, v0 otherwise — and ApiVersions responses
  always v0, so a client that sent a version we do not know can still read the error
  (KIP-511; docs/design/clients.md#apiversions-error-answer);
- a size prefix above `max_frame_size` or below the smallest header is a `FrameTooLarge`
  / `MalformedFrame` raised before any allocation for the body;
- an API key or version we do not serve is returned as `UnsupportedRequest`, never raised:
  the server answers it with UNSUPPORTED_VERSION;
- frames are decoded where they lie in the receive buffer, never copied out of it, and a
  produced batch comes out as a writable view of that buffer (see `Connection`);
- malformed input raises `MalformedFrame` / `FrameTooLarge` (`RemoteProtocolError`s)
  carrying the api key, version and correlation id where known; a body that does not fit
  its schema on the way out raises `EncodeError` (a `LocalProtocolError`). All three are
  `ProtocolError`s: the server closes that one connection, and no struct.error,
  construct error or IndexError escapes;
- a response is a list of parts: bytes, and `Region`s where a `records` value is a
  region (a span of a segment file the server sends with sendfile). The frame's size
  prefix counts the regions; the codec writes their length prefixes and never their
  bytes. A response without regions is one bytes part, as cheap as a plain encode.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field
from typing import Any

from construct import ConstructError

from wire import primitives as p
from wire.errors import EncodeError, FrameTooLarge, MalformedFrame
from wire.primitives import Region
from wire.registry import ApiKey, is_supported
from wire.schema import is_flexible, message_struct
from wire.definitions import MESSAGES

_SIZE = struct.Struct(">i")
_HEADER_FIXED = struct.Struct(">hhi")
_PREFIX_AND_ID = struct.Struct(">ii")

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default


class _NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA = _NeedData()

_CLIENT_ID = p.String(False, True, None)
_TAGS = p.TaggedFields({})


@dataclass(slots=True)
class Request:
    """A decoded request: header fields plus the body as a dict (see wire.schema)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: dict[str, Any]
    size: int = 0
    header_tags: dict = field(default_factory=dict)
    # Bytes after the body. Kafka's request parser ignores them, and librdkafka 2.16 sends
    # three after some Metadata v12 requests, so they are counted, not refused.
    trailing: int = 0


@dataclass(slots=True)
class UnsupportedRequest:
    """A frame whose API key or version we do not serve; the body was not decoded."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int = 0


def request_header_version(api_key: int, api_version: int) -> int:
    if (api_key, "request") in MESSAGES and is_flexible(api_key, "request", api_version):
        return 2
    return 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    if (api_key, "response") in MESSAGES and is_flexible(api_key, "response", api_version):
        return 1
    return 0


# What a malformed frame can raise from inside the codec; all become MalformedFrame.
_DECODE_ERRORS = (ConstructError, struct.error, ValueError, IndexError, KeyError, OverflowError, MemoryError)
# What a body of the wrong shape can raise while encoding; all become EncodeError.
_ENCODE_ERRORS = (ConstructError, struct.error, ValueError, TypeError, AttributeError, KeyError, OverflowError)


_CODECS: dict[tuple[int, int, str], tuple[bool, p.KStruct]] = {}


def _codec(api_key: int, api_version: int, kind: str) -> tuple[bool, p.KStruct]:
    """(flexible header?, body struct) of one message version, looked up once.

    KeyError for an API or version without a schema.
    """
    codec = _CODECS.get((api_key, api_version, kind))
    if codec is None:
        if kind == "request":
            flexible_header = request_header_version(api_key, api_version) >= 2
        else:
            flexible_header = response_header_version(api_key, api_version) >= 1
        codec = _CODECS[(api_key, api_version, kind)] = (flexible_header, message_struct(api_key, kind, api_version))
    return codec


def decode_request(frame: bytes | bytearray | memoryview) -> Request | UnsupportedRequest:
    """Decode one frame (without its size prefix) into a request.

    Nothing is copied: fields are read out of `frame`, and `records` fields are views of
    it when it is writable (see `wire.primitives.Records`).
    """
    r = p.Reader(frame)
    size = r.end
    if size < _HEADER_FIXED.size:
        raise MalformedFrame(f"frame of {size} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _HEADER_FIXED.unpack_from(r.buf, 0)
    r.pos = _HEADER_FIXED.size
    try:
        client_id = _CLIENT_ID._parse(r, None, "client_id")
    except _DECODE_ERRORS as exc:
        raise MalformedFrame(
            f"bad request header: {exc}", api_key=api_key, api_version=api_version, correlation_id=correlation_id
        ) from None
    if not is_supported(api_key, api_version):
        return UnsupportedRequest(api_key, api_version, correlation_id, client_id, size)
    try:
        header_tags: dict = {}
        flexible_header, struct_ = _codec(api_key, api_version, "request")
        if flexible_header:
            _TAGS.parse_into(r, header_tags)
        body = struct_._parse(r, None, "")
    except _DECODE_ERRORS as exc:
        raise MalformedFrame(
            f"cannot decode request body: {exc}",
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
        ) from None
    return Request(api_key, api_version, correlation_id, client_id, body, size, header_tags, size - r.pos)


def _finish(stream: io.BytesIO) -> bytes:
    """Write the size prefix into the reserved first four bytes and return the frame."""
    buf = stream.getbuffer()
    _SIZE.pack_into(buf, 0, len(buf) - 4)
    del buf
    return stream.getvalue()


def _encode_response_stream(api_key: int, api_version: int, correlation_id: int, body: dict[str, Any],
                            regions: list | None) -> io.BytesIO:
    """Size prefix placeholder + response header + body, written to a stream; `regions`
    (when a list) collects the region-valued `records` fields (see `wire.primitives.Region`)."""
    stream = io.BytesIO()
    try:
        stream.write(_PREFIX_AND_ID.pack(0, correlation_id))
        flexible_header, struct_ = _codec(api_key, api_version, "response")
        if flexible_header:
            stream.write(b"\x00")
        struct_._build(body, stream, regions, "")
    except _ENCODE_ERRORS as exc:
        raise EncodeError(
            f"cannot encode response: {exc}", api_key=api_key, api_version=api_version, correlation_id=correlation_id
        ) from None
    return stream


def encode_response(api_key: int, api_version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    """Size prefix + response header + body.

    The header is v1 (a tag buffer after the correlation id) for flexible versions, v0
    otherwise — and always v0 for ApiVersions (KIP-511).
    """
    return _finish(_encode_response_stream(api_key, api_version, correlation_id, body, None))


def encode_response_parts(api_key: int, api_version: int, correlation_id: int,
                          body: dict[str, Any]) -> list[bytes | Region]:
    """A response frame as parts: [bytes] alone, or bytes and regions in frame order.

    `records` values may be regions (see `wire.primitives.Region`). The size prefix
    counts every part, regions included, so sending the parts in order is the frame.
    The regions in the returned parts are the caller's to send (and to release, if
    they hold anything); on EncodeError nothing has been taken from `body`.
    """
    regions: list[tuple[int, Region]] = []  # (offset in stream, region), filled by `Records`
    stream = _encode_response_stream(api_key, api_version, correlation_id, body, regions)
    if not regions:
        return [_finish(stream)]
    size = stream.tell() - 4 + sum(len(region) for _at, region in regions)
    if size > 0x7FFFFFFF:
        raise EncodeError(f"response of {size} bytes exceeds the int32 size prefix", api_key=api_key,
                          api_version=api_version, correlation_id=correlation_id)
    buf = stream.getbuffer()
    _SIZE.pack_into(buf, 0, size)
    del buf
    data = stream.getvalue()
    parts: list[bytes | Region] = []
    at = 0
    for offset, region in regions:
        if offset > at:
            parts.append(data[at:offset])
        parts.append(region)
        at = offset
    if at < len(data):
        parts.append(data[at:])
    return parts


def encode_api_versions_fallback(correlation_id: int, error_code: int, api_keys: list[dict]) -> bytes:
    """An ApiVersions v0 body: what a client gets when it asked at a version we lack."""
    return encode_response(ApiKey.API_VERSIONS, 0, correlation_id, {"error_code": error_code, "api_keys": api_keys})


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    body: dict[str, Any],
    client_id: str | None = "trafka",
    header_tags: dict | None = None,
) -> bytes:
    """Client side: a framed request (used by tools, the health check and tests).

    `header_tags` (request header v2 only) is what `Request.header_tags` holds.
    """
    stream = io.BytesIO()
    try:
        stream.write(b"\x00\x00\x00\x00")
        stream.write(_HEADER_FIXED.pack(api_key, api_version, correlation_id))
        _CLIENT_ID._build(client_id, stream, None, "client_id")
        flexible_header, struct_ = _codec(api_key, api_version, "request")
        if flexible_header:
            _TAGS.build_from(stream, header_tags or {})
        struct_._build(body, stream, None, "")
    except _ENCODE_ERRORS as exc:
        raise EncodeError(
            f"cannot encode request: {exc}", api_key=api_key, api_version=api_version, correlation_id=correlation_id
        ) from None
    return _finish(stream)


def decode_response(api_key: int, api_version: int, frame: bytes | bytearray | memoryview) -> tuple[int, dict]:
    """Client side: (correlation id, body) of one frame without its size prefix."""
    r = p.Reader(frame)
    correlation_id = None
    try:
        correlation_id = p.INT32._parse(r, None, "correlation_id")
        flexible_header, struct_ = _codec(api_key, api_version, "response")
        if flexible_header:
            _TAGS.parse_into(r, {})
        body = struct_._parse(r, None, "")
    except _DECODE_ERRORS as exc:
        raise MalformedFrame(
            f"cannot decode response: {exc}", api_key=api_key, api_version=api_version, correlation_id=correlation_id
        ) from None
    if r.pos != r.end:
        raise MalformedFrame(
            f"{r.end - r.pos} trailing bytes after the response body",
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
        )
    return correlation_id, body


class Connection:
    """Broker side of one connection: bytes in, requests out, responses to bytes.

    Frames are handed to the decoder as views of the receive buffer, not copies. Once a
    view has been handed out the buffer is frozen (a bytearray cannot be resized while it
    is viewed): the next `receive_data` continues in a fresh buffer, taking along only the
    partial frame that follows. A decoded request's `records` thus point into the memory
    the socket read into, and stay valid as long as the request is referenced.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._pos = 0
        self._frozen = False
        self.requests_received = 0

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        if self._frozen:
            # Frames handed out still view this buffer: continue in a new one with the
            # partial frame that follows them (usually nothing, or a few KiB).
            self._buffer = self._buffer[self._pos:]
            self._pos = 0
            self._frozen = False
        self._buffer += data

    @property
    def buffered(self) -> int:
        """Bytes received but not yet consumed as a whole frame."""
        return len(self._buffer) - self._pos

    def pending_frame_size(self) -> int | None:
        """Declared size of the frame being received, if its prefix has arrived."""
        if self.buffered < 4:
            return None
        return _SIZE.unpack_from(self._buffer, self._pos)[0]

    def next_request(self) -> Request | UnsupportedRequest | _NeedData:
        """The next whole request, or NEED_DATA.

        Raises FrameTooLarge for a size prefix outside 0..max_frame_size (before the body
        arrives, so nothing is buffered for it) and MalformedFrame for a frame that does
        not decode; that frame is consumed either way.
        """
        buffer = self._buffer
        pos = self._pos
        buffered = len(buffer) - pos
        if buffered < 4:
            return NEED_DATA
        size = _SIZE.unpack_from(buffer, pos)[0]
        if size < 0 or size > self.max_frame_size:
            context = {}
            if buffered >= 4 + _HEADER_FIXED.size:
                api_key, api_version, correlation_id = _HEADER_FIXED.unpack_from(buffer, pos + 4)
                context = dict(api_key=api_key, api_version=api_version, correlation_id=correlation_id)
            raise FrameTooLarge(f"frame size {size} outside 0..{self.max_frame_size}", **context)
        if buffered - 4 < size:
            return NEED_DATA
        start = pos + 4
        end = start + size
        frame = memoryview(buffer)[start:end]
        if end == len(buffer):
            # Everything consumed: the frame keeps this buffer, the next read starts a new one.
            self._buffer = bytearray()
            self._pos = 0
            self._frozen = False
        else:
            self._pos = end
            self._frozen = True
        self.requests_received += 1
        return decode_request(frame)

    def next_frame(self) -> bytes | _NeedData:
        """The next whole frame's bytes, not decoded as a request, or NEED_DATA: the raw
        SASL tokens a client sends after a v0 SaslHandshake (KIP-152). FrameTooLarge as
        `next_request`."""
        buffered = len(self._buffer) - self._pos
        if buffered < 4:
            return NEED_DATA
        size = _SIZE.unpack_from(self._buffer, self._pos)[0]
        if size < 0 or size > self.max_frame_size:
            raise FrameTooLarge(f"frame size {size} outside 0..{self.max_frame_size}")
        if buffered - 4 < size:
            return NEED_DATA
        start = self._pos + 4
        frame = bytes(self._buffer[start:start + size])
        self._pos = start + size
        if self._pos == len(self._buffer) and not self._frozen:
            self._buffer = bytearray()
            self._pos = 0
        return frame

    def send(self, request: Request | UnsupportedRequest, body: dict[str, Any]) -> list[bytes | Region]:
        """The response to `request` as parts (see `encode_response_parts`)."""
        return encode_response_parts(request.api_key, request.api_version, request.correlation_id, body)
