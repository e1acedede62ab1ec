"""ApiVersions (18): the handshake every client starts with.

Implements v0-4. Advertises exactly the APIs that have a handler, at the versions in
`wire.registry`. Versions we do not serve never reach this handler: the network layer
answers them in the v0 layout with UNSUPPORTED_VERSION (KIP-511) so clients fall back.
Tagged fields (SupportedFeatures, FinalizedFeatures, ZkMigrationReady) are left out on
purpose: librdkafka before 2.2 (Debian's kcat) fails on any tag it receives.
From v3 the request names the client software (KIP-511); it is kept on the connection's
`Session` (for logs and, later, metrics), as Kafka keeps it on its channel metadata. A name
or version outside KIP-511's pattern (letters, digits, '-' and '.', starting and ending
with a letter or digit; so not empty) is INVALID_REQUEST with no APIs, as Kafka answers
(ApiVersionsRequest.isValid).

The share-group APIs (76-79) are advertised by every broker, single or clustered
(`server/groups/share/`), as Kafka 4.1 does with share groups on.
"""

from __future__ import annotations

import logging
import re

from wire.errors import ErrorCode
from wire.registry import API_VERSIONS, ApiKey

from server.context import RequestContext

API_KEY = ApiKey.API_VERSIONS
MAY_BLOCK = False

log = logging.getLogger("trafka.api_versions")

# Kafka's ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN (KIP-511).
SOFTWARE_NAME_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def advertised() -> list[dict]:
    from server.handlers import HANDLERS

    return [
        {"api_key": key, "min_version": lo, "max_version": hi}
        for key, (lo, hi) in sorted(API_VERSIONS.items())
        if key in HANDLERS
    ]


async def handle(ctx: RequestContext, request: dict) -> dict:
    if ctx.api_version >= 3:
        name, version = request.get("client_software_name") or "", request.get("client_software_version") or ""
        if not (SOFTWARE_NAME_VERSION.fullmatch(name) and SOFTWARE_NAME_VERSION.fullmatch(version)):
            log.warning("ApiVersions v%d from %s: client software %r %r is not a KIP-511 name and version",
                        ctx.api_version, ctx.client_id, name[:100], version[:100])
            return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": [], "throttle_time_ms": 0}
        session = ctx.session
        session.client_software_name = request.get("client_software_name")
        session.client_software_version = request.get("client_software_version")
    return {"error_code": ErrorCode.NONE, "api_keys": advertised(), "throttle_time_ms": 0}
