"""`gcpolicy`: when the controller freezes the survivors of a full garbage collection, and what
freezing keeps and what it gives up (with the real collector; every test unfreezes after)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from supergw_controller.gcpolicy import FREEZE_AT, GcPolicy, should_freeze


class Cycle:
    """An object in a reference cycle with itself: only the collector frees it."""

    def __init__(self) -> None:
        self.me = self


class Plain:
    """An object in no reference cycle."""


@pytest.fixture
def thawed() -> Iterator[None]:
    """The real collector, nothing frozen before or after the test."""
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()


def test_it_freezes_from_freeze_at_survivors_on() -> None:
    assert not should_freeze(FREEZE_AT - 1) and should_freeze(FREEZE_AT) and should_freeze(10 * FREEZE_AT)
    assert not should_freeze(0, 1) and should_freeze(1, 1)
    with pytest.raises(ValueError, match="freeze_at must be >= 1"):
        GcPolicy(freeze_at=0)


def test_only_the_end_of_a_full_collection_with_enough_survivors_freezes() -> None:
    survivors = [10]
    frozen: list[int] = []
    policy = GcPolicy(freeze_at=10, survivors=lambda: survivors[0], freeze=lambda: frozen.append(survivors[0]))
    stop = {"collected": 0, "uncollectable": 0}
    policy("start", {"generation": 2})
    policy("stop", {"generation": 0} | stop)
    policy("stop", {"generation": 1} | stop)
    assert frozen == []  # a young collection leaves the old generation as it was: nothing to decide
    policy("stop", {"generation": 2} | stop)
    assert frozen == [10] and (policy.freezes, policy.frozen_objects) == (1, 10)
    survivors[0] = 9
    policy("stop", {"generation": 2} | stop)
    assert frozen == [10] and policy.freezes == 1  # too few to be worth it: the next full walks them
    survivors[0] = 25
    policy("stop", {"generation": 2} | stop)
    assert frozen == [10, 25] and (policy.freezes, policy.frozen_objects) == (2, 35)


def test_installed_for_the_block_only_and_thawed_after(thawed: None) -> None:
    policy = GcPolicy(freeze_at=1)
    with policy.installed() as p:
        assert p is policy and gc.callbacks.count(policy) == 1
        gc.collect()
        assert policy.freezes == 1 and gc.get_freeze_count() > 0
    assert policy not in gc.callbacks and gc.get_freeze_count() == 0


def test_a_full_collection_freezes_the_live_and_frees_the_garbage(thawed: None) -> None:
    live = [[i] for i in range(30_000)]  # 30,001 tracked objects that stay
    garbage = Cycle()
    dead = weakref.ref(garbage)
    del garbage
    policy = GcPolicy(freeze_at=30_000)
    with policy.installed():
        gc.collect()
        assert dead() is None  # collected before the freeze: no garbage is frozen
        assert policy.freezes == 1 and gc.get_freeze_count() >= len(live) + 1
        # What the next full collection walks: not the frozen lists
        assert not any(obj is live for obj in gc.get_objects())
        later = Cycle()  # made after the freeze: the collector's as before
        later_ref = weakref.ref(later)
        del later
        gc.collect()
        assert later_ref() is None


def test_the_trade_a_frozen_cycle_is_never_collected_a_frozen_object_still_freed(thawed: None) -> None:
    kept_cycle: Any = Cycle()
    cycle_ref = weakref.ref(kept_cycle)
    plain: Any = Plain()  # in no cycle: freed by its reference count, frozen or not
    plain_ref = weakref.ref(plain)
    with GcPolicy(freeze_at=1).installed():
        gc.collect()
        assert gc.get_freeze_count() > 0
        del plain
        assert plain_ref() is None  # reference counting frees a frozen object at once
        del kept_cycle
        gc.collect()
        assert cycle_ref() is not None  # frozen in a cycle: no collection reaches it (the trade)
    gc.collect()
    assert cycle_ref() is None  # thawed when the policy is removed: garbage again
