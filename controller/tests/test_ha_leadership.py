"""Leadership on a real etcd (loopback, started by the test): terms, fencing, takeover rules."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from typing import cast

import pytest

from etcd_server import EtcdServer
from supergw_controller.ha.fence import Fenced, LeaseFence
from supergw_controller.ha.leadership import Leadership
from supergw_controller.ha.term import HA_ID_BASE, election_id, format_id, term_of


def _lead(etcd: EtcdServer, name: str, ttl: int = 1) -> Leadership:
    return Leadership([etcd.endpoint], "/sgw-test", name, f"http://{name}", ttl, 1.0)


def test_election_ids_are_monotonic_and_above_static_ids() -> None:
    assert election_id(1) > ((2**63 - 1) << 64) | (2**64 - 1)  # above every static id with high < 2**63
    assert election_id(2) > election_id(1)
    assert term_of(election_id(42)) == 42
    assert term_of(7) is None
    assert format_id(election_id(5)) == f"{HA_ID_BASE >> 64}:5"
    with pytest.raises(ValueError, match="not an etcd revision"):
        election_id(0)


def test_fence_counts_from_the_send_time_and_refuses_after_revoke() -> None:
    now = [100.0]
    f = LeaseFence(2.0, 0.5, clock=lambda: now[0])
    with pytest.raises(Fenced, match="not the leader"):
        f.check()
    f.grant(7, sent_at=99.0)  # valid until 99 + 2 - 0.5 = 100.5
    f.check()
    now[0] = 100.6
    with pytest.raises(Fenced, match="last confirmed more than 1.5s ago"):
        f.check()
    f.grant(7, sent_at=100.6)
    f.check()
    f.revoke("lost the switch stream")
    with pytest.raises(Fenced, match="lost the switch stream"):
        f.check()
    with pytest.raises(ValueError, match="below the lease TTL"):
        LeaseFence(1.0, 1.0)


def test_one_leader_terms_grow_and_revoke_hands_over(etcd_server: EtcdServer) -> None:
    async def main() -> None:
        a, b = _lead(etcd_server, "a"), _lead(etcd_server, "b")
        try:
            won_a, _ = await a.campaign()
            won_b, _ = await b.campaign()
            assert won_a.won and not won_b.won
            assert won_b.leader == won_a.leader and won_b.leader.replica == "a"
            assert await a.keepalive(won_a.leader.lease)
            changes = cast(AsyncGenerator[None, None], b.changes())
            waiter = asyncio.ensure_future(changes.__anext__())
            await asyncio.sleep(0.2)  # the watch is registered
            # b learns (as from the switch) that a's stream is gone: it revokes a's lease.
            await b.revoke(won_a.leader.lease)
            await asyncio.wait_for(waiter, 5)
            assert await b.leader() is None
            assert not await a.keepalive(won_a.leader.lease)  # a sees its lease gone
            won_b2, _ = await b.campaign()
            assert won_b2.won and won_b2.leader.term > won_a.leader.term
            await changes.aclose()
            # a stale resign (old term) deletes nothing.
            await a.resign(won_a.leader.term, won_a.leader.lease)
            assert (await b.leader()) == won_b2.leader
            await b.resign(won_b2.leader.term, won_b2.leader.lease)
            assert await a.leader() is None
        finally:
            await a.close()
            await b.close()

    asyncio.run(main())


def test_an_unrefreshed_lease_expires_and_the_key_goes(etcd_server: EtcdServer) -> None:
    async def main() -> None:
        a = _lead(etcd_server, "a")
        try:
            won, _ = await a.campaign()
            assert won.won
            # 1 s TTL + etcd's expiry tick; bounded generously because a loaded machine
            # (CI on 2 cores) delays etcd's lessor, which once took longer than 10 s here
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and await a.leader() is not None:
                await asyncio.sleep(0.1)
            assert await a.leader() is None
            assert not await a.keepalive(won.leader.lease)
        finally:
            await a.close()

    asyncio.run(main())


def test_unreachable_etcd_is_a_quick_clear_error(etcd_server: EtcdServer) -> None:
    from supergw_controller.etcd_kv import EtcdUnavailable

    async def main() -> None:
        a = _lead(etcd_server, "a")
        etcd_server.pause()
        try:
            with pytest.raises(EtcdUnavailable, match="did not answer"):
                await a.campaign()
        finally:
            etcd_server.resume()
            await a.close()

    asyncio.run(main())
