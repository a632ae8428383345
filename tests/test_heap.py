"""Frozen start-up heap: objects alive at start-up leave the collector's passes until thawed."""

from __future__ import annotations

import gc

from semo.engine.heap import freeze_startup_heap, thaw_heap


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector can free it


def _in_collected_generations(obj: object) -> bool:
    return any(o is obj for generation in range(3) for o in gc.get_objects(generation))


def test_objects_alive_at_start_up_are_frozen_then_given_back():
    alive = _Node()
    try:
        assert freeze_startup_heap() > 0
        assert not _in_collected_generations(alive)
        made_later = _Node()
        assert _in_collected_generations(made_later)
    finally:
        thaw_heap()
    assert gc.get_freeze_count() == 0
    assert _in_collected_generations(alive)


def test_garbage_at_freeze_time_is_collected_not_frozen():
    _Node()  # unreachable at once: freed by the freeze's own collection, not kept for ever
    try:
        freeze_startup_heap()
    finally:
        thaw_heap()
    assert not [o for o in gc.get_objects() if type(o) is _Node]
