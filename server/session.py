"""`Session`: what the broker knows about one client connection, for as long as it is open.

One per connection, made when the connection is accepted and handed to every handler
through `RequestContext.session`. It holds what requests teach us about the client — the
client id it last sent, the software it named in ApiVersions (KIP-511), the version of
each API it used — next to where it came from. Later issues add to it rather than
threading new arguments through the network loop:
- `principal` is "User:ANONYMOUS" until authentication (SASL) sets it;
- `tls` is None until a TLS listener stores the negotiated state (protocol, cipher,
  peer certificate);
- `listener` names the listener the connection came in on ("PLAINTEXT", "SSL", "CLIENT"...)
  and `security_protocol` its protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL): SASL
  code checks it to know whether a connection must authenticate;
- an mTLS client's `principal` is its certificate's subject mapped by
  ssl.principal.mapping.rules (server/security/principal.py).
- `sasl` is None on a listener without SASL, else the connection's SASL state machine
  (server/security/sasl/state.py): the network loop admits only the handshake requests
  until it says authenticated (and again once a KIP-368 session has expired).
"""

from __future__ import annotations

import itertools
import time

ANONYMOUS = "User:ANONYMOUS"

_ids = itertools.count(1)


class Session:
    """One connection's client, as seen from the broker."""

    __slots__ = ("connection_id", "host", "port", "listener", "opened", "client_id", "client_software_name",
                 "client_software_version", "api_versions", "principal", "tls", "security_protocol", "sasl", "throttle")

    def __init__(self, host: str, port: int, *, listener: str | None = None,
                 security_protocol: str = "PLAINTEXT") -> None:
        self.connection_id: int = next(_ids)
        self.host = host
        self.port = port
        self.listener = listener
        self.security_protocol = security_protocol
        self.opened = time.time()  # wall clock: for display and metrics, never for deadlines
        self.client_id: str | None = None  # the last one seen (clients may change it per request)
        self.client_software_name: str | None = None
        self.client_software_version: str | None = None
        # api_key -> the version of its last request: which APIs and versions a client uses.
        self.api_versions: dict[int, int] = {}
        self.principal = ANONYMOUS
        self.tls: object | None = None
        self.security_protocol = security_protocol
        self.sasl = None  # server.security.sasl.state.SaslState on a SASL_* listener
        # (seconds, mute after the response?) set by a quota violation (server/security/quotas.py);
        # the network loop waits it out before it reads the connection's next request.
        self.throttle: tuple[float, bool] | None = None

    @property
    def peer(self) -> str:
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        software = ""
        if self.client_software_name:
            software = f" {self.client_software_name}/{self.client_software_version}"
        return f"<Session {self.connection_id} from {self.peer} client_id={self.client_id!r}{software}>"
