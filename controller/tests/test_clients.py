"""`clients.ClientBook`: reports -> the remote-access tables. Pins follow the clients a live
gateway lists, go when it stops listing them or dies; labels, ranges and pools come from
each gateway's accepted `remote_access`; overlapping or foreign claims are refused; a
restarted controller keeps what the switch holds for gateways that have not reported; a
taken-over client's return route goes to its holder as soon as its own CHILD SAs are renewed."""

from __future__ import annotations

import ipaddress
import logging

import pytest

from supergw_controller import clients as clients_mod
from supergw_controller.clients import ClientBook, esp_prefixes
from supergw_controller.southbound.domain import RaTables, Ternary

from rakit import PUBLIC_IP, client, ra_info, repl, report

NONE = RaTables.empty()


def book(pins: bool = True) -> ClientBook:
    return ClientBook(["g1", "g2", "g3"], ipaddress.IPv4Address(PUBLIC_IP), pins=pins)


def test_esp_prefixes_cover_exactly_the_range() -> None:
    assert esp_prefixes(0xC1000000, 0xC1FFFFFF) == [Ternary(0xC1000000, 0xFF000000)]
    parts = esp_prefixes(0x100, 0x2FF)
    assert parts == [Ternary(0x100, 0xFFFFFF00), Ternary(0x200, 0xFFFFFF00)]
    odd = esp_prefixes(0x101, 0x104)  # 0x101, 0x102-0x103, 0x104
    assert [(t.value, t.mask) for t in odd] == [(0x101, 0xFFFFFFFF), (0x102, 0xFFFFFFFE), (0x104, 0xFFFFFFFF)]
    with pytest.raises(ValueError, match="empty"):
        esp_prefixes(5, 4)


def test_labels_ranges_and_pools_from_reports() -> None:
    b = book()
    b.report(report("g1", ra_info(1), []))
    b.report(report("g2", ra_info(2), []))
    w = b.wanted(NONE)
    assert w.labels == {Ternary(2 << 56, 0xFF << 56): "g1", Ternary(3 << 56, 0xFF << 56): "g2"}
    assert w.ranges == {Ternary(0xC1000000, 0xFF000000): "g1", Ternary(0xC2000000, 0xFF000000): "g2"}
    assert w.pools == {"10.90.1.0/24": "g1", "10.90.2.0/24": "g2"}
    assert w.pins == {}
    # a report without remote_access withdraws it
    b.report(report("g2", None, None))
    assert set(b.wanted(NONE).pools.values()) == {"g1"}


@pytest.mark.parametrize(
    ("info", "says"),
    [
        (ra_info(2, public_address="198.51.100.1"), "is not remote_access.public_ip"),
        (ra_info(2, pool="10.90.1.128/25"), "overlaps gateway g1's 10.90.1.0/24"),
        (ra_info(2, esp_spi_min=0xC1800000, esp_spi_max=0xC2FFFFFF), "ESP SPI range"),
        (ra_info(2, ike_spi_label=2 << 56), "IKE SPI label"),
        (ra_info(2, ike_spi_label=0, ike_spi_mask=0), "non-zero mask"),
        (ra_info(2, esp_spi_min=0x101, esp_spi_max=0xC2000000), "prefixes"),
    ],
)
def test_conflicting_claims_are_refused_and_logged(info: object, says: str, caplog: pytest.LogCaptureFixture) -> None:
    b = book()
    b.report(report("g1", ra_info(1), []))
    with caplog.at_level(logging.ERROR):
        b.report(report("g2", info, []))  # type: ignore[arg-type]
    assert says in (b.refused("g2") or "")
    assert "g2" not in b.wanted(NONE).labels.values()
    assert "remote_access refused" in caplog.text and says in caplog.text
    # once fixed, accepted
    b.report(report("g2", ra_info(2), []))
    assert b.refused("g2") is None and "g2" in b.wanted(NONE).labels.values()


def test_pins_follow_the_listed_clients() -> None:
    b = book()
    b.report(report("g1", ra_info(1), [client("198.51.100.1", 1), client("198.51.100.2", 2)]))
    b.report(report("g2", ra_info(2), [client("198.51.100.3", 3)]))
    assert b.wanted(NONE).pins == {"198.51.100.1": "g1", "198.51.100.2": "g1", "198.51.100.3": "g2"}
    b.report(report("g1", ra_info(1), [client("198.51.100.2", 2)]))  # client 1's IKE SA went down
    assert b.wanted(NONE).pins == {"198.51.100.2": "g1", "198.51.100.3": "g2"}
    assert [c.identity for c in b.clients("g1")] == ["client2"]


def test_a_mobike_move_repins_the_new_address() -> None:
    b = book()
    b.report(report("g1", ra_info(1), [client("198.51.100.1", 1)]))
    b.report(report("g1", ra_info(1), [client("198.51.100.77", 1)]))
    assert b.wanted(NONE).pins == {"198.51.100.77": "g1"}


def test_clients_behind_one_nat_share_one_pin_that_does_not_flap() -> None:
    b = book()
    nat = "198.51.100.9"
    b.report(report("g1", ra_info(1), [client(nat, 1, 4500)]))
    b.report(report("g2", ra_info(2), [client(nat, 2, 4501), client(nat, 3, 4502)]))
    # no pin held yet: the gateway listing the most clients there
    first = b.wanted(NONE).pins
    assert first == {nat: "g2"}
    # held on g1 and g1 still lists one: it stays (no flapping between gateways)
    held = RaTables({nat: "g1"}, {}, {}, {})
    assert b.wanted(held).pins == {nat: "g1"}
    # g1's client leaves: the pin goes to g2
    b.report(report("g1", ra_info(1), []))
    assert b.wanted(held).pins == {nat: "g2"}


def test_a_dead_gateways_pins_go_and_come_back_only_with_its_next_report() -> None:
    b = book()
    b.report(report("g1", ra_info(1), [client("198.51.100.1", 1)]))
    b.report(report("g2", ra_info(2), [client("198.51.100.2", 2)]))
    b.set_alive("g1", False)
    w = b.wanted(RaTables({"198.51.100.1": "g1", "198.51.100.2": "g2"}, {}, {}, {}))
    assert w.pins == {"198.51.100.2": "g2"}
    # its labels, ranges and pool stay (nobody else holds those SAs or addresses)
    assert "g1" in w.labels.values() and "g1" in w.pools.values()
    b.set_alive("g1", True)
    assert b.wanted(NONE).pins == {"198.51.100.2": "g2"}
    b.report(report("g1", ra_info(1), [client("198.51.100.1", 1)]))
    assert b.wanted(NONE).pins["198.51.100.1"] == "g1"
    # a dead gateway that still reports (its agent talks) gets no pins
    b.set_alive("g1", False)
    b.report(report("g1", ra_info(1), [client("198.51.100.1", 1)]))
    assert "198.51.100.1" not in b.wanted(NONE).pins


def test_restart_adopts_what_the_switch_holds_until_the_gateway_reports() -> None:
    b = book()
    label, rng = Ternary(2 << 56, 0xFF << 56), Ternary(0xC1000000, 0xFF000000)
    held = RaTables({"198.51.100.1": "g1", "198.51.100.5": "nobody"}, {label: "g1"}, {rng: "g1"}, {"10.90.1.0/24": "g1"})
    w = b.wanted(held)
    assert w == RaTables({"198.51.100.1": "g1"}, {label: "g1"}, {rng: "g1"}, {"10.90.1.0/24": "g1"})
    b.report(report("g1", ra_info(1), []))  # its first report: now its own word counts
    w = b.wanted(held)
    assert w.pins == {} and w.labels == {label: "g1"}
    # a dead gateway's held pins are not adopted
    b2 = book()
    b2.set_alive("g1", False)
    assert b2.wanted(held).pins == {}


def test_pins_off_leaves_the_hash_alone() -> None:
    b = book(pins=False)
    b.report(report("g1", ra_info(1), [client("198.51.100.1", 1)]))
    assert b.wanted(NONE).pins == {}


def test_unknown_gateway_is_ignored() -> None:
    b = book()
    b.report(report("g9", ra_info(1), [client("198.51.100.1", 1)]))
    assert b.wanted(NONE) == NONE


# ---------------------------------------------------------------- takeover: each client's return route
G1_POOL = "10.90.1.0/24"
TAKEN = [client(f"198.51.100.{n}", n, vip=f"10.90.1.{n}") for n in (11, 12, 13)]
VIPS = [f"10.90.1.{n}/32" for n in (11, 12, 13)]


def taken_over_book() -> ClientBook:
    """g1 served three clients, died, and g2 took its SAs over (nothing renewed yet)."""
    b = book()
    b.report(report("g1", ra_info(1), TAKEN))
    b.report(report("g2", ra_info(2), []))
    b.report(report("g3", ra_info(3), []))
    b.set_alive("g1", False)
    b.set_takeovers({"g1": "g2"}, withheld=[])
    return b


def holder_says(b: ClientBook, renewed: list[bool | None], unrenewed: int) -> None:
    """g2's report: it lists g1's clients, each with `esp_renewed` as given, and `unrenewed`
    CHILD SAs taken over from g1 not renewed yet."""
    listed = [c.model_copy(update={"esp_renewed": r}) for c, r in zip(TAKEN, renewed)]
    b.report(report("g2", ra_info(2), listed, repl("g2", taken_over={"g1": 3},
                                                   unrenewed_children={"g1": unrenewed} if unrenewed else {})))


def held_after(w: RaTables) -> RaTables:
    """What the switches hold once `w` is written."""
    return RaTables(dict(w.pins), dict(w.labels), dict(w.ranges), dict(w.pools))


def test_each_renewed_client_gets_its_return_route_before_its_pool_moves() -> None:
    b = taken_over_book()
    holder_says(b, [False, False, False], unrenewed=3)
    w = b.wanted(NONE)
    assert w.pools == {G1_POOL: "g1", "10.90.2.0/24": "g2", "10.90.3.0/24": "g3"}  # all wait (g1 is fenced)
    # 2 of 3 renewed: their /32s go to g2, the pool waits for the third
    holder_says(b, [True, False, True], unrenewed=1)
    w = b.wanted(held_after(w))
    assert w.pools[G1_POOL] == "g1"
    assert {k: v for k, v in w.pools.items() if k.endswith("/32")} == {VIPS[0]: "g2", VIPS[2]: "g2"}
    assert list(w.pools)[:2] == [VIPS[0], VIPS[2]]  # written before the pools
    # the next report says the same: the /32s, now held, stay
    w = b.wanted(held_after(w))
    assert {k: v for k, v in w.pools.items() if k.endswith("/32")} == {VIPS[0]: "g2", VIPS[2]: "g2"}
    # all 3: the pool moves to g2 and the /32s go
    holder_says(b, [True, True, True], unrenewed=0)
    w = b.wanted(held_after(w))
    assert w.pools == {G1_POOL: "g2", "10.90.2.0/24": "g2", "10.90.3.0/24": "g3"}


def test_a_holder_that_does_not_say_per_client_keeps_todays_behaviour() -> None:
    b = taken_over_book()
    holder_says(b, [None, None, None], unrenewed=1)  # an older agent: no esp_renewed
    w = b.wanted(NONE)
    assert not [k for k in w.pools if k.endswith("/32")] and w.pools[G1_POOL] == "g1"
    holder_says(b, [None, None, None], unrenewed=0)
    assert b.wanted(held_after(w)).pools[G1_POOL] == "g2"


def test_a_renewed_client_takes_its_route_from_a_dead_gateway_s_held_32() -> None:
    # a client of an earlier takeover whose /32 is held for g3, dead now: g2 renewed it
    b = taken_over_book()
    b.set_alive("g3", False)
    held = RaTables({}, {}, {}, {VIPS[0]: "g3"})
    holder_says(b, [True, False, False], unrenewed=2)
    assert b.wanted(held).pools[VIPS[0]] == "g2"
    holder_says(b, [False, False, False], unrenewed=3)
    assert b.wanted(held).pools[VIPS[0]] == "g3"  # not renewed at g2: kept where it was, as before


def test_without_room_renewed_clients_wait_for_their_pool_and_it_is_said_once(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(clients_mod, "MAX_POOL_ENTRIES", 4)  # 3 pools + one /32
    b = taken_over_book()
    holder_says(b, [True, True, True], unrenewed=1)
    with caplog.at_level(logging.WARNING):
        w = b.wanted(NONE)
        assert len(w.pools) == 4 and w.pools[G1_POOL] == "g1"
        assert {k: v for k, v in w.pools.items() if k.endswith("/32")} == {VIPS[0]: "g2"}
        w = b.wanted(NONE)
    said = [r for r in caplog.records if "room for 1 of the 3 /32 routes" in r.getMessage()]
    assert len(said) == 1
    # once the pool moves, nothing is short any more; a later shortage is said again
    holder_says(b, [True, True, True], unrenewed=0)
    assert b.wanted(held_after(w)).pools[G1_POOL] == "g2"
    holder_says(b, [True, True, True], unrenewed=1)
    with caplog.at_level(logging.WARNING):
        b.wanted(NONE)
    assert len([r for r in caplog.records if "room for" in r.getMessage()]) == 2


def test_a_second_takeover_by_the_same_holder_does_not_take_back_the_first_pool() -> None:
    b = taken_over_book()
    holder_says(b, [True, True, True], unrenewed=0)
    assert b.wanted(NONE).pools[G1_POOL] == "g2"
    # g3 dies too and g2 takes it over: g3's pool waits for g2's renewals, g1's stays at g2
    b.report(report("g3", ra_info(3), [client("198.51.100.31", 31, vip="10.90.3.31")]))
    b.set_alive("g3", False)
    b.set_takeovers({"g1": "g2", "g3": "g2"}, withheld=[])
    b.report(report("g2", ra_info(2), TAKEN, repl("g2", taken_over={"g1": 3, "g3": 1},
                                                   unrenewed_children={"g3": 1})))
    pools = b.wanted(NONE).pools
    assert (pools[G1_POOL], pools["10.90.3.0/24"]) == ("g2", "g3")
