"""A backup's host mirror: every poll for a small site, a bounded share of its time for a large one."""

from __future__ import annotations

from supergw_controller.mirror_pace import MirrorPace


def test_a_quick_read_is_repeated_every_poll() -> None:
    pace = MirrorPace(poll_s=1.0)
    assert pace.due(0.0)
    pace.done(0.0, 0.01)
    assert not pace.due(0.5) and pace.due(1.01)


def test_a_slow_read_waits_twenty_times_as_long() -> None:
    pace = MirrorPace(poll_s=1.0)
    pace.done(10.0, 12.0)  # 65,536 hosts: 2 s to read and rebuild
    assert not pace.due(51.9) and pace.due(52.0)
    pace.done(52.0, 52.02)  # the site shrank: back to every poll
    assert not pace.due(53.0) and pace.due(53.02)
