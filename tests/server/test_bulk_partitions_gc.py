"""Partitions created in bulk are frozen out of the cyclic collector's full passes
(gc.freeze), as the start-up heap is; small creations are left to the collector."""

from __future__ import annotations

import gc

from server.broker import FREEZE_AFTER_PARTITIONS, Broker
from server.config import load_config


def test_a_bulk_created_topic_is_frozen_out_of_the_collector(tmp_path):
    config = load_config(overrides={"log.dirs": str(tmp_path / "data"), "listeners": "127.0.0.1:0",
                                    "http.listeners": ""})
    broker = Broker(config)
    broker.open()
    try:
        gc.unfreeze()  # what earlier tests froze would hide a freeze that did not happen
        broker.create_topic("small", 3)
        assert gc.get_freeze_count() == 0
        broker.create_topic("bulk", FREEZE_AFTER_PARTITIONS)
        frozen = gc.get_freeze_count()
        assert frozen > 0
        partition = broker.partitions[("bulk", FREEZE_AFTER_PARTITIONS - 1)]
        # The frozen partitions still work (freezing changes nothing but collection).
        assert partition.log_end_offset == 0
    finally:
        broker.close()
        gc.unfreeze()
