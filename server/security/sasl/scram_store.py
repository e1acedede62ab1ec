"""SCRAM credentials, durable: what AlterUserScramCredentials stores and SCRAM reads.

Single broker: `<data dir>/__security/scram_credentials.json`, replaced whole with
storage's atomic_write at each change (old or new after a crash, never half), read once at
start. Each entry keeps Kafka's ZooKeeper text form per mechanism ("salt=..,stored_key=..,
server_key=..,iterations=.."), so the file reads like Kafka's /config/users/<user> znodes.
A credential is usable by the next authentication after the write returns.
"""

from __future__ import annotations

import json
import logging
import pathlib
import weakref

from storage.files import atomic_write

from server.security.sasl.scram import ScramCredential

log = logging.getLogger("trafka.security.scram")

FILE = pathlib.Path("__security") / "scram_credentials.json"


class ScramStore:
    def __init__(self, data_dir: pathlib.Path) -> None:
        self.path = pathlib.Path(data_dir) / FILE
        self._users: dict[str, dict[str, str]] = {}
        try:
            data = json.loads(self.path.read_text())
            self._users = {user: dict(mechs) for user, mechs in data.get("users", {}).items()}
        except FileNotFoundError:
            pass
        except (OSError, ValueError, AttributeError) as exc:
            log.error("cannot read %s (%s); starting with no SCRAM credentials", self.path, exc)

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        text = self._users.get(user, {}).get(mechanism)
        if text is None:
            return None
        try:
            return ScramCredential.from_kafka(text)
        except (KeyError, ValueError) as exc:
            log.error("unreadable SCRAM credential of user %s (%s): %s", user, mechanism, exc)
            return None

    def users(self) -> dict[str, dict[str, int]]:
        """user -> mechanism -> iterations, for DescribeUserScramCredentials."""
        out = {}
        for user, mechs in self._users.items():
            out[user] = {m: ScramCredential.from_kafka(t).iterations for m, t in mechs.items()}
        return out

    def apply(self, changes: list[tuple[str, str, ScramCredential | None]]) -> None:
        """Set (credential) or delete (None) each (user, mechanism), then write the file once."""
        users = {u: dict(m) for u, m in self._users.items()}
        for user, mechanism, credential in changes:
            if credential is None:
                users.get(user, {}).pop(mechanism, None)
                if not users.get(user):
                    users.pop(user, None)
            else:
                users.setdefault(user, {})[mechanism] = credential.to_kafka()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps({"version": 1, "users": users}, indent=1, sort_keys=True).encode())
        self._users = users


_stores: "weakref.WeakKeyDictionary[object, ScramStore]" = weakref.WeakKeyDictionary()


def store_of(broker) -> ScramStore:
    """The broker's store, opened at first use (kept beside the broker, not in it, so
    the broker needs no change to carry it)."""
    store = _stores.get(broker)
    if store is None:
        store = _stores[broker] = ScramStore(broker.data_dir)
    return store
