"""Fixtures for the operator CLI tests: one plain broker process per module (`broker`), and
the ZooKeeper fixtures of tests/cluster for the 3-broker cluster test."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess
from tests.cluster.conftest import zk_connect, zookeeper  # noqa: F401  (fixtures, re-exported)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("cli") / "data", "--set", "num.partitions=1") as proc:
        yield proc
