from __future__ import annotations

import pytest

from supergw_controller.backups import ring_backups


def test_each_gateway_is_backed_by_its_ring_successor() -> None:
    assert ring_backups(["g1", "g2", "g3", "g4"], {"g1", "g2", "g3", "g4"}) == {
        "g1": "g2", "g2": "g3", "g3": "g4", "g4": "g1"}


def test_a_gateway_that_cannot_serve_is_skipped_and_still_has_a_backup() -> None:
    # g2 dead: g3 takes over g2's state, and g1's state moves to g3 as well.
    assert ring_backups(["g1", "g2", "g3", "g4"], {"g1", "g3", "g4"}) == {
        "g1": "g3", "g2": "g3", "g3": "g4", "g4": "g1"}


def test_no_backup_without_another_serving_gateway() -> None:
    assert ring_backups(["g1", "g2"], {"g1"}) == {"g1": None, "g2": "g1"}
    assert ring_backups(["g1"], {"g1"}) == {"g1": None}
    assert ring_backups([], set()) == {}


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicates"):
        ring_backups(["g1", "g1"], {"g1"})
