"""Every gateway's replication orders (the ring of `ring_backups`) and the board that numbers
them and answers long-polls."""

from __future__ import annotations

import asyncio
import time

from supergw_controller.replication_orders import OrdersBoard, RingInput, ring_orders
from supergw_proto.replication import ReplicationOrders, ReplicationPeer

ORDER = ["g1", "g2", "g3", "g4"]
EP = {g: f"10.0.0.{i}:4520" for i, g in enumerate(ORDER, 1)}


def ring(serving: set[str], *, holders: dict[str, str] | None = None, fenced: set[str] | None = None,
         replicating: set[str] | None = None, endpoints: dict[str, str] | None = None) -> dict[str, ReplicationOrders | None]:
    return ring_orders(RingInput(ORDER, serving, EP if endpoints is None else endpoints, holders or {}, fenced or set(),
                                 set(ORDER) if replicating is None else replicating))


def peer(g: str) -> ReplicationPeer:
    return ReplicationPeer(name=g, endpoint=EP[g])


def test_every_serving_gateway_backs_up_its_predecessor_and_is_backed_up_by_its_successor() -> None:
    o = ring(set(ORDER))
    assert {g: (x.backup, x.protects) for g, x in o.items() if x} == {
        "g1": (peer("g2"), "g4"), "g2": (peer("g3"), "g1"), "g3": (peer("g4"), "g2"), "g4": (peer("g1"), "g3"),
    }
    assert all(x is not None and x.generation == 0 and x.take_over == () and not x.fenced for x in o.values())


def test_a_gateway_out_of_the_ring_is_skipped_and_gets_no_backup() -> None:
    o = ring({"g1", "g2", "g4"})  # g3 dead, drained or withheld
    assert o["g2"] is not None and o["g2"].backup == peer("g4")
    assert o["g4"] is not None and o["g4"].protects == "g2"
    assert o["g3"] is not None and (o["g3"].backup, o["g3"].protects) == (None, None)


def test_a_gateway_without_an_endpoint_cannot_serve_and_one_alone_has_no_backup() -> None:
    o = ring(set(ORDER), endpoints={"g2": EP["g2"]})
    assert o["g2"] is not None and (o["g2"].backup, o["g2"].protects) == (None, None)
    assert o["g1"] is not None and (o["g1"].backup, o["g1"].protects) == (None, None)


def test_takeover_and_fence_are_said_to_the_holder_and_the_fenced() -> None:
    o = ring({"g1", "g2", "g4"}, holders={"g3": "g4", "g1": "g4"}, fenced={"g3"})
    assert o["g4"] is not None and o["g4"].take_over == ("g1", "g3")  # the config's order
    assert o["g3"] is not None and o["g3"].fenced and o["g3"].backup is None


def test_an_agent_that_says_nothing_of_replication_gets_no_orders() -> None:
    o = ring(set(), replicating=set(), endpoints={})
    assert o == {g: None for g in ORDER}
    # ... unless it must hear something: it is fenced, or holds another's state
    o = ring(set(), replicating=set(), endpoints={}, holders={"g1": "g2"}, fenced={"g3"})
    assert o["g1"] is None and o["g4"] is None
    assert o["g2"] is not None and o["g2"].take_over == ("g1",)
    assert o["g3"] is not None and o["g3"].fenced


def test_the_board_bumps_one_generation_on_any_change_and_stamps_it() -> None:
    board = OrdersBoard(1000)
    assert board.generation == 1000 and board.orders("g1") is None
    assert board.publish(ring(set(ORDER)))
    assert board.generation == 1001
    assert not board.publish(ring(set(ORDER)))  # the same orders: no new generation
    assert board.generation == 1001
    o = board.orders("g2")
    assert o is not None and o.generation == 1001 and o.protects == "g1"
    assert board.publish(ring({"g1", "g2", "g4"}))
    g1 = board.orders("g1")
    assert board.generation == 1002 and g1 is not None and g1.generation == 1002  # every gateway's orders carry it


async def test_long_poll_answers_at_once_on_change_or_after_its_wait() -> None:
    board = OrdersBoard(5)
    t0 = time.monotonic()
    await board.wait_past(4, 10.0)  # already past
    assert time.monotonic() - t0 < 0.5
    t0 = time.monotonic()
    await board.wait_past(5, 0.05)  # nothing changes: after the wait
    assert 0.04 <= time.monotonic() - t0 < 1.0
    waiter = asyncio.create_task(board.wait_past(5, 10.0))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    board.publish(ring(set(ORDER)))
    await asyncio.wait_for(waiter, 1.0)  # woken by the change, not by its 10 s
    closing = asyncio.create_task(board.wait_past(board.generation, 10.0))
    await asyncio.sleep(0.01)
    board.close()
    await asyncio.wait_for(closing, 1.0)  # the controller stops: waiters answer now
    t0 = time.monotonic()
    await board.wait_past(board.generation, 10.0)  # and later ones at once
    assert time.monotonic() - t0 < 0.5
