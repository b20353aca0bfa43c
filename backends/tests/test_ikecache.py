"""The IKE-cache analyser on a synthetic trace whose answers are computed by hand below."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supergw_gateway.ra.ikecache import (
    Connection,
    TraceError,
    actual,
    analyse,
    needed,
    needed_clocked_reauth,
    read_charon_log,
    read_session_log,
)
from supergw_gateway.ra.ikecache_cli import byte_sizes, durations, main
from supergw_gateway.ra.sessions import SessionRecord

H = 3600.0
MB = 10**6

# alice: four connections, bob: three (start, end in seconds; bytes in + out)
#   A1   0h    - 1h    10 MB        B1  0     - 600 s   0.5 MB
#   A2   5h    - 6h     1 MB        B2  1800  - 2400 s  0.5 MB
#   A3  10h    - 10.5h 30 MB        B3  7200  - 9000 s  5 MB
#   A4  30h    - 31h    1 MB
TRACE = [
    Connection("alice", 0, 1 * H, 10 * MB),
    Connection("alice", 5 * H, 6 * H, 1 * MB),
    Connection("alice", 10 * H, 10.5 * H, 30 * MB),
    Connection("alice", 30 * H, 31 * H, 1 * MB),
    Connection("bob", 0, 600, MB // 2),
    Connection("bob", 1800, 2400, MB // 2),
    Connection("bob", 7200, 9000, 5 * MB),
]


def test_actual_counts_connections_that_began_with_a_full_exchange() -> None:
    assert actual(TRACE) == 7
    assert actual([*TRACE, Connection("carol", 0, 1, 0, full_exchange=False)]) == 7


@pytest.mark.parametrize(("lifetime", "expected"), [
    # L = 1h: alice A1 new (t0=0); A2 5h-0 >= 1h new; A3 10h-5h new; A4 new -> 4.
    #         bob B1 new; B2 1800-0 < 3600 resumes; B3 7200-0 >= 3600 new -> 2.      total 6
    (1 * H, 6),
    # L = 8h: alice A1 new; A2 5h < 8h resumes; A3 10h-0 >= 8h new (t0=10h); A4 20h later new -> 3.
    #         bob B1 new, B2 and B3 resume (both < 8h after B1) -> 1.                   total 4
    (8 * H, 4),
    # L = 24h: alice A1 new; A2, A3 resume; A4 30h >= 24h new -> 2; bob 1.          total 3
    (24 * H, 3),
    # L = 30 min: alice 4 new; bob B2 1800-0 is not < 1800 -> new, B3 new -> 3.     total 7
    (0.5 * H, 7),
])
def test_clocked(lifetime: float, expected: int) -> None:
    assert needed(TRACE, "clocked", lifetime) == expected


@pytest.mark.parametrize(("lifetime", "expected"), [
    # L = 2h of connected time: alice A1 new (used 1h); A2: 1h < 2h resumes (used 2h); A3: 2h is
    #   not < 2h -> new (used 0.5h); A4: 0.5h < 2h resumes -> 2.
    #   bob: B1 new (600 s), B2 resumes (1200 s), B3 resumes (1200 < 7200) -> 1.          total 3
    (2 * H, 3),
    # L = 1h: alice A1 new (used 1h); A2: 1h not < 1h -> new (used 1h); A3 new (0.5h); A4 resumes
    #   (0.5h < 1h) -> 3.  bob: 600, 1200 s used: all resume after B1 -> 1.               total 4
    (1 * H, 4),
])
def test_established(lifetime: float, expected: int) -> None:
    assert needed(TRACE, "established", lifetime) == expected


@pytest.mark.parametrize(("lifetime", "expected"), [
    # B = 20 MB: alice A1 new (10 MB); A2 resumes (11 MB); A3 resumes (41 MB); A4: 41 >= 20 new -> 2.
    #   bob: 0.5, 1.0 MB before B2, B3: both resume -> 1.                                  total 3
    (20 * MB, 3),
    # B = 5 MB: alice A1 new (10 MB); A2: 10 >= 5 new (1 MB); A3 resumes (31 MB); A4 new -> 3.
    #   bob: B2 (0.5 < 5) and B3 (1.0 < 5) resume -> 1.                                     total 4
    (5 * MB, 4),
])
def test_data(lifetime: float, expected: int) -> None:
    assert needed(TRACE, "data", lifetime) == expected


def test_clocked_with_the_gateways_mid_connection_reauthentication() -> None:
    # L = 8h: no connection lasts past t0 + 8h, so the same 4 as clocked.
    assert needed_clocked_reauth(TRACE, 8 * H) == 4
    # L = 30 min: alice A1 new at 0, reauth at 0.5h (still up until 1h) -> 2; A2 new at 5h, reauth
    #   at 5.5h -> 4; A3 new at 10h (ends exactly at 10.5h: no reauth) -> 5; A4 new at 30h, reauth
    #   at 30.5h -> 7.  bob: B1 new; B2 new (1800 - 0 is not < 1800); B3 new -> 3.       total 10
    assert needed_clocked_reauth(TRACE, 0.5 * H) == 10


def test_analysis_rows_and_bad_lifetimes() -> None:
    a = analyse(TRACE, [1 * H, 8 * H], [5 * MB])
    assert (a.connections, a.clients, a.actual) == (7, 2, 7)
    assert [r.needed for r in a.time_rows] == [
        {"clocked": 6, "clocked+reauth": needed_clocked_reauth(TRACE, 1 * H), "established": 4},
        {"clocked": 4, "clocked+reauth": 4, "established": 2},
    ]
    assert a.data_rows[0].needed == {"data": 4}
    with pytest.raises(ValueError, match="positive"):
        needed(TRACE, "clocked", 0)


def _records(path: Path) -> None:
    lines = []
    for i, c in enumerate(TRACE):
        lines.append(SessionRecord(
            ike_id=i + 1, identity=c.client, remote_host=f"198.51.100.{i + 1}", remote_port=4500,
            initiator_spi=f"{i + 1:016x}", responder_spi=f"01{i + 1:014x}", vips=["10.90.0.1"],
            established_at=1_700_000_000 + c.start, bytes_in=c.bytes // 2, bytes_out=c.bytes - c.bytes // 2,
            present=False, present_s=c.duration, gateway="gw1", ended_at=1_700_000_000 + c.end,
            end_reason="deleted", addresses=[f"198.51.100.{i + 1}"]).model_dump_json())
    path.write_text("\n".join(lines) + "\n")


def test_session_log_roundtrip_gives_the_same_answers(tmp_path: Path) -> None:
    log = tmp_path / "ra-sessions.jsonl"
    _records(log)
    conns = read_session_log(log)
    assert needed(conns, "clocked", 8 * H) == 4 and needed(conns, "data", 5 * MB) == 4
    by_address = read_session_log(log, key="address")
    assert needed(by_address, "clocked", 100 * H) == 7  # every connection came from another address


@pytest.mark.parametrize(("content", "needle"), [
    ("{not json\n", ":1: not JSON"),
    ('{"v": 1}\n', ":1: not a session record"),
])
def test_bad_session_logs_name_file_and_line(tmp_path: Path, content: str, needle: str) -> None:
    log = tmp_path / "bad.jsonl"
    log.write_text(content)
    with pytest.raises(TraceError, match=needle):
        read_session_log(log)


def test_session_ending_before_it_began_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    _records(log)
    rec = json.loads(log.read_text().splitlines()[2])
    rec["ended_at"] = rec["established_at"] - 1
    log.write_text(log.read_text() + json.dumps(rec) + "\n")
    with pytest.raises(TraceError, match=r":8: ended_at .* is before established_at"):
        read_session_log(log)


CHARON_LOG = """\
2026-11-25 10:00:00.000 14[IKE] <ra|1> IKE_SA ra[1] established between 203.0.113.1[vpn.sgw.test]...10.77.0.10[alice]
2026-11-25 10:30:00.000 11[IKE] <ra|1> closing CHILD_SA ra-net{1} with SPIs c0d4e869_i (1000 bytes) e9920336_o (500 bytes) and TS 10.80.0.0/24 === 10.90.0.1/32
2026-11-25 10:30:00.500 12[IKE] <ra|1> IKE_SA deleted
2026-11-25 11:00:00.000 14[IKE] <ra|2> IKE_SA ra[2] established between 203.0.113.1[vpn.sgw.test]...10.77.0.11[bob]
2026-11-25 11:10:00.000 14[IKE] <ra|2> IKE_SA ra[3] rekeyed between 203.0.113.1[vpn.sgw.test]...10.77.0.11[bob]
2026-11-25 11:40:00.000 12[IKE] <ra|3> IKE_SA deleted
2026-11-25 11:50:00.000 14[IKE] <sgw-gw1|4> IKE_SA sgw-gw1[4] established between 192.0.2.1[gw1]...192.0.2.2[peer]
"""


def test_charon_log_reader(tmp_path: Path) -> None:
    log = tmp_path / "charon.log"
    log.write_text(CHARON_LOG)
    conns = sorted(read_charon_log(log, conn="ra"), key=lambda c: c.client)
    # alice: 10:00 - 10:30:00.5 with 1500 bytes; bob: 11:00 - 11:40 over a rekey (SA 2 -> 3).
    assert [(c.client, c.duration, c.bytes) for c in conns] == [("alice", 1800.5, 1500), ("bob", 2400.0, 0)]
    assert len(read_charon_log(log)) == 3  # without --conn the site-to-site SA counts too


def test_charon_log_without_timestamps_is_a_clear_error(tmp_path: Path) -> None:
    log = tmp_path / "charon.log"
    log.write_text("14[IKE] <ra|1> IKE_SA ra[1] established between a[b]...c[d]\n")
    with pytest.raises(TraceError, match="no line starts with a timestamp"):
        read_charon_log(log)


def test_cli_table_png_json_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "s.jsonl"
    _records(log)
    png = tmp_path / "fig6.png"
    assert main([str(log), "--lifetimes", "30m,8h", "--data-lifetimes", "5M,20MB", "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "7 connections of 2 clients; actual IKE exchanges (IKE_SA_INIT + IKE_AUTH): 7" in out
    assert "8h" in out and "5MB" in out and "20MB" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main([str(log), "--json", "--lifetimes", "8h", "--data-lifetimes", "20M"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["time"] == [{"lifetime_s": 8 * H, "clocked": 4, "clocked+reauth": 4, "established": 2}]
    assert doc["data"] == [{"lifetime_bytes": 20 * MB, "data": 3}]
    assert main([str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
    empty = tmp_path / "empty.log"
    empty.write_text("")
    assert main([str(empty)]) == 2
    assert "no connections" in capsys.readouterr().err


def test_lifetime_arguments() -> None:
    assert durations("90s,5m,1h,1d,2") == [2, 90, 300, 3600, 86400]
    assert byte_sizes("1k,20M,1Gi,3MiB") == [1000, 3 * 2**20, 20 * 10**6, 2**30]
    for bad in ("0", "5x", "-1h", ""):
        with pytest.raises(Exception, match="positive"):
            durations(bad)
