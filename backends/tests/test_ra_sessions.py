"""Session tracking from VICI events and polls (messages shaped as charon 5.9.8 sends them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from supergw_gateway.ra.config import CachePolicy
from supergw_gateway.ra.ikecache import read_session_log
from supergw_gateway.ra.sessions import Redirects, SessionLog, SessionTracker, evictions
from supergw_gateway.statesync.ownership import SpiOwnership
from supergw_proto.reports import ClientSession

CONN = "ra"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def ike(uid: int, host: str = "198.51.100.7", rspi: str = "0100000000000001", established: int = 0,
        state: str = "ESTABLISHED", children: dict[str, Any] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"uniqueid": str(uid), "state": state, "remote-host": host, "remote-port": "4500",
                         "remote-id": "alice.example", "initiator-spi": "aaaaaaaaaaaaaaaa", "responder-spi": rspi,
                         "established": str(established), "remote-vips": ["10.90.0.1"]}
    if children is not None:
        d["child-sas"] = children
    return d


def child(uid: int, b_in: int, b_out: int, use_in: int | None = None) -> dict[str, Any]:
    c = {"name": "ra-net", "uniqueid": str(uid), "state": "INSTALLED", "bytes-in": str(b_in),
         "bytes-out": str(b_out)}
    if use_in is not None:
        c["use-in"] = str(use_in)
    return c


def test_a_session_through_mobike_rekeys_and_down(tmp_path: Path) -> None:
    clock = Clock()
    t = SessionTracker("gw1", CONN, idle_s=5, clock=clock)
    assert t.event("ike-updown", {"up": "yes", CONN: ike(1)})
    assert not t.event("ike-updown", {"up": "yes", "sgw-gw1": ike(9)})  # the site-to-site SA: not a client
    s = t.live()[0]
    assert (s.ike_id, s.identity, str(s.remote_host), s.established_at) == (1, "alice.example", "198.51.100.7", 1000)
    clock.t = 1002
    t.poll([{CONN: ike(1, established=2, children={"ra-net-1": child(1, 500, 700, use_in=0)})}], 1002)
    clock.t = 1004
    t.poll([{CONN: ike(1, established=4, children={"ra-net-1": child(1, 900, 1100, use_in=1)})}], 1004)
    s = t.live()[0]
    assert (s.bytes_in, s.bytes_out, s.present, s.present_s) == (900, 1100, True, 2.0)
    # MOBIKE: a new outer address
    assert t.event("ike-update", {"remote-host": "198.51.100.8", CONN: ike(1, host="198.51.100.8")})
    assert str(t.live()[0].remote_host) == "198.51.100.8"
    # CHILD rekey: the old child's final counters stay, the new one adds
    t.event("child-rekey", {CONN: dict(ike(1, host="198.51.100.8"), **{"child-sas": {"ra-net": {
        "old": child(1, 1000, 1200), "new": child(2, 0, 0)}}})})
    # IKE rekey: new SPIs and id, same session
    assert t.event("ike-rekey", {CONN: {"old": ike(1), "new": ike(2, host="198.51.100.8", rspi="0100000000000002")}})
    s = t.live()[0]
    assert (s.ike_id, s.responder_spi, s.ike_rekeys) == (2, "0100000000000002", 1)
    clock.t = 1010
    t.event("child-updown", {CONN: dict(ike(2), **{"child-sas": {"ra-net-2": child(2, 50, 60)}})})
    assert t.event("ike-updown", {CONN: ike(2)})
    assert t.live() == []
    [rec] = t.take_finished()
    assert (rec.bytes_in, rec.bytes_out, rec.ended_at, rec.end_reason) == (1050, 1260, 1010, "deleted")
    assert rec.addresses == ["198.51.100.7", "198.51.100.8"] and rec.gateway == "gw1"
    log = tmp_path / "s.jsonl"
    SessionLog(log).append([rec])
    [conn] = read_session_log(log)
    assert (conn.client, conn.start, conn.end, conn.bytes) == ("alice.example", 1000, 1010, 2310)


def test_poll_adopts_unknown_sas_and_closes_vanished_ones() -> None:
    clock = Clock()
    t = SessionTracker("gw1", CONN, idle_s=5, clock=clock)
    t.event("ike-updown", {"up": "yes", CONN: ike(1)})
    clock.t = 1100
    # SA 1 is gone without a down event; SA 7 was made while the agent was not listening.
    t.poll([{CONN: ike(7, host="198.51.100.9", established=40)}], listed_at=1099)
    [s] = t.live()
    assert (s.ike_id, s.established_at) == (7, 1060)
    [rec] = t.take_finished()
    assert rec.ike_id == 1 and rec.end_reason.startswith("vanished")
    # An SA that came up after the list was taken is not "vanished" by it.
    t.event("ike-updown", {"up": "yes", CONN: ike(8)})
    t.poll([{CONN: ike(7, established=41)}], listed_at=1099)
    assert {s.ike_id for s in t.live()} == {7, 8}


def test_a_deleting_sa_ends_when_deletion_began() -> None:
    clock = Clock()
    t = SessionTracker("gw1", CONN, idle_s=5, clock=clock)
    t.event("ike-updown", {"up": "yes", CONN: ike(1)})
    clock.t = 1022
    t.poll([{CONN: ike(1, state="DELETING")}], 1022)
    clock.t = 1036  # the DELETE to an absent client timed out only now
    t.event("ike-updown", {CONN: ike(1)})
    [rec] = t.take_finished()
    assert rec.ended_at == 1022


def test_presence_and_evictions() -> None:
    clock = Clock()
    t = SessionTracker("gw1", CONN, idle_s=5, clock=clock)
    t.event("ike-updown", {"up": "yes", CONN: ike(1)})
    for now, use_in in ((1001, 0), (1004, 0), (1007, 0), (1010, 3), (1013, 6), (1016, 9)):
        clock.t = now
        t.poll([{CONN: ike(1, established=int(now - 1000),
                           children={"c": child(1, 10 * int(now - 1000), 0, use_in=use_in)})}], now)
    s = t.live()[0]
    # present at 1001..1010 (9 s counted between polls), absent from 1013 (no inbound for 6 s >= 5)
    assert (s.present, s.present_s) == (False, 9.0)
    established = CachePolicy(strategy="established", lifetime_s=9, idle_s=5)
    assert evictions(established, [s]) == [(1, "evicted: present 9s >= established lifetime 9s")]
    assert evictions(CachePolicy(strategy="established", lifetime_s=10, idle_s=5), [s]) == []
    data = CachePolicy(strategy="data", lifetime_bytes=160)
    assert evictions(data, [s]) == [(1, "evicted: 160 bytes >= data lifetime 160 bytes")]
    assert evictions(CachePolicy(strategy="clocked", lifetime_s=1), [s]) == []  # charon's job
    present = s.model_copy(update={"present": True})
    assert evictions(established, [present]) == [] and evictions(data, [present]) == []
    t.mark_evicted(1, "evicted: test")
    t.event("ike-updown", {CONN: ike(1)})
    assert t.take_finished()[0].end_reason == "evicted: test"


def test_an_unwritable_session_log_loses_nothing(tmp_path: Path) -> None:
    import socket

    from supergw_gateway.ra.sessions import ClientMonitor

    def no_charon() -> socket.socket:
        raise OSError("no charon here")

    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the log's directory should be")
    m = ClientMonitor("gw1", CONN, no_charon, CachePolicy(), blocked / "s.jsonl")
    m.handle_event("ike-updown", {"up": "yes", CONN: ike(1)})
    m.handle_event("ike-updown", {CONN: ike(1)})  # the session ends; the log cannot be written
    assert m.log_error is not None and "s.jsonl" in m.log_error
    blocked.unlink()
    m.log = SessionLog(tmp_path / "s.jsonl")  # the operator fixed the path
    m.handle_event("ike-updown", {"up": "yes", CONN: ike(2)})
    m.handle_event("ike-updown", {CONN: ike(2)})
    assert m.log_error is None and len(read_session_log(tmp_path / "s.jsonl")) == 2
    assert [json.loads(line)["ike_id"] for line in (tmp_path / "s.jsonl").read_text().splitlines()] == [1, 2]


def test_redirects_each_sa_once_name_the_ones_that_stay_and_start_over_when_withdrawn() -> None:
    clock = Clock()
    t = SessionTracker("gw1", CONN, idle_s=30, clock=clock)
    t.poll([{CONN: ike(1)}, {CONN: ike(2, host="198.51.100.8")}], clock.t)
    r = Redirects(grace_s=35, clock=clock)
    assert [s.ike_id for s in r.due(t.live())] == [1, 2]
    r.done(1)
    r.done(2)
    assert r.due(t.live()) == [] and r.sent_total == 2
    # a client that came since (its IKE_SA_INIT was on its way before the pins went) is due
    t.poll([{CONN: ike(1)}, {CONN: ike(2, host="198.51.100.8")}, {CONN: ike(3, host="198.51.100.9")}], clock.t)
    assert [s.ike_id for s in r.due(t.live())] == [3]
    r.done(3)
    # 1 followed (its SA is gone); 2 is still here after the grace time: named once
    clock.t += 10
    t.poll([{CONN: ike(2, host="198.51.100.8")}, {CONN: ike(3, host="198.51.100.9")}], clock.t)
    assert r.overdue(t.live()) == [] and r.due(t.live()) == [] and set(r.sent) == {2, 3}
    clock.t += 30
    assert [s.ike_id for s in r.overdue(t.live())] == [2, 3]
    assert r.overdue(t.live()) == []
    # undrained and drained again: everyone still here is redirected again
    r.stop()
    assert [s.ike_id for s in r.due(t.live())] == [2, 3]


def esp_child(uid: int, spi_in: str, state: str = "INSTALLED") -> dict[str, Any]:
    return dict(child(uid, 10, 10, use_in=0), **{"spi-in": spi_in, "state": state})


def test_a_taken_over_client_is_reported_renewed_once_its_child_sas_carry_this_gateways_spis(tmp_path: Path) -> None:
    ours = SpiOwnership(ike_label=3 << 56, ike_mask=0xFF << 56, esp_min=0xC2000000, esp_max=0xC2FFFFFF)
    clock = Clock()
    t = SessionTracker("gw2", CONN, idle_s=5, clock=clock, ours=ours)

    def renewed(*children: dict[str, Any]) -> bool | None:
        t.poll([{CONN: ike(1, children={f"ra-net-{c['uniqueid']}": c for c in children})}], clock())
        [s] = t.live()
        return s.esp_renewed

    assert renewed(esp_child(1, "c1000001")) is False  # taken over from gw1 (its range), not rekeyed
    assert renewed(esp_child(1, "c1000001", "REKEYING"), esp_child(2, "c2000002", "INSTALLING")) is False
    assert renewed(esp_child(1, "c1000001", "REKEYED"), esp_child(2, "c2000002")) is True  # the old one carries none
    assert renewed(esp_child(2, "c2000002"), esp_child(3, "c1000003")) is False  # every carrying CHILD SA counts
    # the report carries it; the session log (a record of the session, not of routing) does not
    assert ClientSession.model_validate_json(t.live()[0].model_dump_json()).esp_renewed is False
    t.event("ike-updown", {CONN: ike(1)})
    [rec] = t.take_finished()
    SessionLog(tmp_path / "s.jsonl").append([rec])
    assert "esp_renewed" not in (tmp_path / "s.jsonl").read_text()
    # a tracker that does not know its ranges, or a session not polled yet, says nothing
    plain = SessionTracker("gw2", CONN, idle_s=5, clock=clock)
    plain.poll([{CONN: ike(1, children={"ra-net-1": esp_child(1, "c1000001")})}], clock())
    assert plain.live()[0].esp_renewed is None
    t.event("ike-updown", {"up": "yes", CONN: ike(5, children={"ra-net-5": esp_child(5, "c1000005")})})
    assert t.live()[0].esp_renewed is None
