"""The states of a classic group (Kafka's GroupState; the strings are what DescribeGroups
and ListGroups report). A module of its own so that group.py and offsets.py can both use
it (the offsets rules depend on the state: retention counts from Empty)."""

from __future__ import annotations

import enum


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value
