"""Fixtures for the ZooKeeper-mode tests: one real ZooKeeper per test session.

`zookeeper` is the running `ZooKeeperServer` (the session skips these tests, with the
reason, when no java or no Debian `zookeeper` package is installed); `zk_connect` is a
connect string with a fresh chroot ("127.0.0.1:PORT/test-<hex>"), so a test sees only the
znodes it makes. A test that restarts or kills the server must leave it running.
"""

from __future__ import annotations

import pytest

from cli.zookeeper_server import ZooKeeperServer


@pytest.fixture(scope="session")
def zookeeper():
    reason = ZooKeeperServer.unavailable_reason()
    if reason:
        pytest.skip(f"no ZooKeeper: {reason}")
    server = ZooKeeperServer().start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> str:
    if not zookeeper.running:  # a previous test killed it
        zookeeper.start()
    return zookeeper.chroot_connect_string()
