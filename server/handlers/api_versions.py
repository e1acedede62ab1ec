"""ApiVersions (18): the handshake every client starts with.

Implements v0-4. Advertises exactly the APIs that have a handler, at the versions in
`wire.registry`. Versions we do not serve never reach this handler: the network layer
answers them in the v0 layout with UNSUPPORTED_VERSION (KIP-511) so clients fall back.
Tagged fields (SupportedFeatures, FinalizedFeatures, ZkMigrationReady) are left out on
purpose: librdkafka before 2.2 (Debian's kcat) fails on any tag it receives.
From v3 the request names the client software (KIP-511); it is kept on the connection's
`Session` (for logs and, later, metrics), as Kafka keeps it on its channel metadata.

The share-group APIs (76-79) are advertised by every broker, single or clustered
(`server/groups/share/`), as Kafka 4.1 does with share groups on.
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import API_VERSIONS, ApiKey

from server.context import RequestContext

API_KEY = ApiKey.API_VERSIONS
MAY_BLOCK = False


def advertised() -> list[dict]:
    from server.handlers import HANDLERS

    return [
        {"api_key": key, "min_version": lo, "max_version": hi}
        for key, (lo, hi) in sorted(API_VERSIONS.items())
        if key in HANDLERS
    ]


async def handle(ctx: RequestContext, request: dict) -> dict:
    if ctx.api_version >= 3:
        session = ctx.session
        session.client_software_name = request.get("client_software_name")
        session.client_software_version = request.get("client_software_version")
    return {"error_code": ErrorCode.NONE, "api_keys": advertised(), "throttle_time_ms": 0}
