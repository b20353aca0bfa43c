"""The deploy test's steps build on each other: after a failed step the rest are skipped
(naming it) instead of failing again for the same cause."""

from __future__ import annotations

import pytest

FIRST_FAILURE = pytest.StashKey[str]()


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    if call.excinfo is not None and call.when in ("setup", "call") and FIRST_FAILURE not in item.session.stash:
        if not call.excinfo.errisinstance(pytest.skip.Exception):
            item.session.stash[FIRST_FAILURE] = item.name


def pytest_runtest_setup(item: pytest.Item) -> None:
    first = item.session.stash.get(FIRST_FAILURE, None)
    if first is not None:
        pytest.skip(f"an earlier step failed: {first}")
