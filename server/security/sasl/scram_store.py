"""SCRAM credentials, durable: what AlterUserScramCredentials stores and SCRAM reads.

Single broker: `<data dir>/__security/scram_credentials.json`, replaced whole with
storage's atomic_write at each change (old or new after a crash, never half), read once at
start. Each entry keeps Kafka's ZooKeeper text form per mechanism ("salt=..,stored_key=..,
server_key=..,iterations=.."), so the file reads like Kafka's /config/users/<user> znodes.
A credential is usable by the next authentication after the write returns.

In a cluster (zookeeper.connect set) ZooKeeper holds them as Kafka's ZooKeeper mode does:
`/config/users/<sanitized user>` = `{"version":1,"config":{"SCRAM-SHA-256":"salt=..,..."}}`
(other keys of that znode, client quotas, are kept), then a change notice
`{"version":2,"entity_path":"users/<user>"}` under `/config/changes`. Every broker reads
all users at start and re-reads one at each notice (server/cluster/config_manager.py), so
a credential made on any broker authenticates on all of them; the file is not used there.
"""

from __future__ import annotations

import json
import logging
import pathlib
import urllib.parse

from storage.files import atomic_write

from server.security.sasl.scram import HASHES, ScramCredential

USERS_PATH = "/config/users"

log = logging.getLogger("trafka.security.scram")

FILE = pathlib.Path("__security") / "scram_credentials.json"


class ScramStore:
    def __init__(self, data_dir: pathlib.Path, zk=None) -> None:
        self.path = pathlib.Path(data_dir) / FILE
        self.zk = zk  # a cluster's ZooKeeper client: the credentials live there
        self._users: dict[str, dict[str, str]] = {}
        if zk is not None:
            return
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


    async def write(self, changes: list[tuple[str, str, ScramCredential | None]]) -> None:
        """`apply`, to ZooKeeper in a cluster (one znode and one notice per user)."""
        if self.zk is None:
            self.apply(changes)
            return
        from server.zookeeper import znodes as zn

        by_user: dict[str, list[tuple[str, ScramCredential | None]]] = {}
        for user, mechanism, credential in changes:
            by_user.setdefault(user, []).append((mechanism, credential))
        for user, items in by_user.items():
            path = f"{USERS_PATH}/{sanitize(user)}"
            found = await self.zk.get(path)
            config = zn.decode_entity_config(found[0] if found else None)
            for mechanism, credential in items:
                if credential is None:
                    config.pop(mechanism, None)
                else:
                    config[mechanism] = credential.to_kafka()
            if found is not None:
                await self.zk.set(path, zn.encode_entity_config(config), -1)
            else:
                await self.zk.create(path, zn.encode_entity_config(config), make_parents=True)
            await self.zk.create(zn.CONFIG_CHANGES_PATH + "/" + zn.CONFIG_CHANGE_PREFIX,
                                 zn.encode_config_change_notification(f"users/{sanitize(user)}"), sequential=True,
                                 make_parents=True)
            self._set_user(user, config)

    def _set_user(self, user: str, config: dict[str, str]) -> None:
        scram = {k: v for k, v in config.items() if k in HASHES}
        if scram:
            self._users[user] = scram
        else:
            self._users.pop(user, None)

    async def refresh(self, sanitized: str) -> None:
        """Re-read one user's znode (a `users/<user>` change notice)."""
        from server.zookeeper import znodes as zn

        found = await self.zk.get(f"{USERS_PATH}/{sanitized}")
        self._set_user(desanitize(sanitized), zn.decode_entity_config(found[0] if found else None))

    async def load_all(self) -> None:
        """Every user of /config/users (at start, before the notices are followed)."""
        from server.zookeeper.client import NoNode

        try:
            children = await self.zk.children(USERS_PATH)
        except NoNode:
            children = []
        for child in children:
            await self.refresh(child)


def sanitize(user: str) -> str:
    """Kafka's Sanitizer: URL-encoding (java.net.URLEncoder), '*' as %2A, space as %20."""
    return urllib.parse.quote(user, safe="-_.*").replace("*", "%2A").replace("~", "%7E")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


def store_of(broker, zk=None) -> ScramStore:
    """The broker's store, opened at first use (an attribute the broker does not declare:
    the broker needs no change to carry it). `zk`: the cluster's client, when the caller
    has it at hand (the config manager); else the broker's cluster's, if any."""
    store = getattr(broker, "_scram_store", None)
    if store is None:
        cluster = getattr(broker, "cluster", None)
        zk = zk if zk is not None else cluster.zk if cluster is not None else None
        store = ScramStore(getattr(broker, "data_dir", pathlib.Path(".")), zk)
        broker._scram_store = store
    return store
