"""When Router Advertisements go out (RaSchedule, pure) and that the advertiser sends them."""

from __future__ import annotations

import asyncio
import ipaddress
import random

import pytest

from supergw_controller.errors import SwitchUnavailable
from supergw_controller.ndp import RouterAdvert, RouterSolicitation
from supergw_controller.router_adverts import (
    MAX_INITIAL_RTR_ADVERT_INTERVAL,
    MAX_INITIAL_RTR_ADVERTISEMENTS,
    MAX_RA_DELAY_TIME,
    MIN_DELAY_BETWEEN_RAS,
    RaSchedule,
    RaTiming,
    RouterAdvertiser,
)

PORTS = [1, 2, 3]


def _schedule(min_s: float = 200.0, max_s: float = 600.0, now: float = 0.0) -> RaSchedule:
    return RaSchedule(PORTS, RaTiming(min_s, max_s), random.Random(7), now)


def test_first_ra_at_once_then_initial_ones_at_most_16s_apart_then_min_max() -> None:
    s = _schedule()
    assert s.due(0.0) == PORTS
    times = [0.0]
    for _ in range(MAX_INITIAL_RTR_ADVERTISEMENTS + 5):
        t = s.next_due()
        assert s.due(t - 0.001) == []
        assert s.due(t) == PORTS
        times.append(t)
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert all(g <= MAX_INITIAL_RTR_ADVERT_INTERVAL for g in gaps[: MAX_INITIAL_RTR_ADVERTISEMENTS - 1])
    assert all(200.0 <= g <= 600.0 for g in gaps[MAX_INITIAL_RTR_ADVERTISEMENTS:])


def test_solicitation_answered_on_its_port_within_max_delay() -> None:
    s = _schedule()
    s.due(0.0)
    for _ in range(MAX_INITIAL_RTR_ADVERTISEMENTS):
        s.due(s.next_due())  # past the initial burst: the next periodic RA is minutes away
    now = s.next_due() - 150.0
    assert s.solicited(2, now)
    at = s.next_due()
    assert now <= at <= now + MAX_RA_DELAY_TIME
    assert s.due(at) == [2]  # only the solicitor's port


def test_solicited_answers_are_rate_limited_per_port() -> None:
    s = _schedule()
    s.due(0.0)
    for _ in range(MAX_INITIAL_RTR_ADVERTISEMENTS):
        s.due(s.next_due())
    t0 = s.next_due() - 150.0
    assert s.solicited(1, t0)
    sent = s.next_due()
    assert s.due(sent) == [1]
    # a storm of solicitations on port 1: one answer, MIN_DELAY_BETWEEN_RAS after the last
    assert s.solicited(1, sent + 0.1)
    assert not s.solicited(1, sent + 0.2)  # already due: that answer serves this one too
    assert s.next_due() >= sent + MIN_DELAY_BETWEEN_RAS
    # another port is not held back by port 1
    assert s.solicited(3, sent + 0.3)
    assert s.due(sent + 0.3 + MAX_RA_DELAY_TIME) == [3]
    assert s.due(sent + MIN_DELAY_BETWEEN_RAS) == [1]


def test_a_periodic_ra_due_sooner_answers_the_solicitation() -> None:
    s = _schedule()
    s.due(0.0)
    nxt = s.next_due()
    assert not s.solicited(1, nxt - 0.001)  # its answer would be due after the periodic RA
    assert s.due(nxt) == PORTS


def test_solicitation_on_a_non_host_port_is_ignored() -> None:
    s = _schedule()
    assert not s.solicited(9, 0.0)


def test_timing_validation() -> None:
    with pytest.raises(ValueError):
        RaTiming(10.0, 5.0)


class _Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[int, bytes]] = []
        self.fail = False

    async def send_packet(self, frame: bytes, port: int) -> None:
        if self.fail:
            raise SwitchUnavailable("switch gone")
        self.sent.append((port, frame))


def test_advertiser_sends_to_every_host_port_and_answers_solicitations() -> None:
    async def body() -> None:
        rec = _Recorder()
        adv = RouterAdvertiser(
            RouterAdvert(router_lifetime_s=1800), ipaddress.IPv6Address("fe80::1"), "02:88:88:00:00:00",
            PORTS, RaTiming(200.0, 600.0), rec, rng=random.Random(1),
        )
        rs = RouterSolicitation("02:00:00:00:00:11", ipaddress.IPv6Address("fe80::11"), ipaddress.IPv6Address("ff02::2"), None)
        adv.solicited(rs, 2)  # not running (not primary): nothing scheduled
        task = asyncio.create_task(adv.run())
        for _ in range(50):
            await asyncio.sleep(0.01)
            if len(rec.sent) == 3:
                break
        assert sorted(p for p, _ in rec.sent) == PORTS and all(f == adv.frame for _, f in rec.sent)
        # past the 3 s rate limit of the first RA the answer takes at most MAX_RA_DELAY_TIME:
        # this test waits the real time (the schedule's logic is tested above on a fake clock)
        await asyncio.sleep(MIN_DELAY_BETWEEN_RAS)
        adv.solicited(rs, 2)
        await asyncio.sleep(MAX_RA_DELAY_TIME + 0.2)
        assert [p for p, _ in rec.sent[3:]] == [2]
        assert adv.solicitations_total == 2 and adv.sent_total == 4
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(body())


def test_advertiser_counts_a_failed_send_and_goes_on() -> None:
    async def body() -> None:
        rec = _Recorder()
        rec.fail = True
        adv = RouterAdvertiser(
            RouterAdvert(router_lifetime_s=1800), ipaddress.IPv6Address("fe80::1"), "02:88:88:00:00:00",
            PORTS, RaTiming(200.0, 600.0), rec,
        )
        task = asyncio.create_task(adv.run())
        await asyncio.sleep(0.05)
        assert adv.send_failures_total == 3 and not task.done()
        task.cancel()

    asyncio.run(body())
