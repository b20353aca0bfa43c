"""`supergwctl` end to end: the real CLI against the real REST app (`create_app`) serving
over HTTP on 127.0.0.1 (uvicorn), around the composed controller core on a recording switch
session (corekit). Every command, `--json` against what the API itself answers, refused
tokens, unknown names, https with a CA file. Pure argument and formatting tests are in
proto/tests/test_ctl.py."""

from __future__ import annotations

import asyncio
import io
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from corekit import Clock, RecordingSession, bucket_writes, make_config, running_core
from tlscerts import Pki, make_pki, openssl_missing

from supergw_controller.api import API_PREFIX, create_app
from supergw_controller.compose import ControllerCore
from supergw_controller.southbound.domain import HostSeen
from supergw_proto.ctl.cli import EXIT_API, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, main
from supergw_proto.rest import trust

ADMIN = "ctl-admin-token-0123456789"
VIEWER = "ctl-viewer-token-0123456789"
API = {"tokens": [{"name": "ops", "role": "admin", "token": ADMIN}, {"name": "viewer", "role": "read-only", "token": VIEWER}]}
HOST = HostSeen(mac="02:00:00:00:00:11", port=1, ip="10.0.0.11")


@dataclass
class Served:
    url: str
    core: ControllerCore
    session: RecordingSession
    tokens: Path  # directory: admin.token, viewer.token
    ca: Path | None = None

    def env(self, token: str = "admin") -> dict[str, str]:
        env = {"SUPERGW_URL": self.url, "SUPERGW_TOKEN_FILE": str(self.tokens / f"{token}.token")}
        return env | ({"SUPERGW_CA_FILE": str(self.ca)} if self.ca else {})

    def api(self, path: str) -> Any:
        """What the API itself answers (GET, admin token), for comparing `--json` with it."""
        verify = True if self.ca is None else trust(self.ca)
        r = httpx.get(self.url + API_PREFIX + path, headers={"Authorization": f"Bearer {ADMIN}"}, verify=verify)
        assert r.status_code == 200, r.text
        return r.json()


@dataclass
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def ctl(served: Served, *argv: str, token: str = "admin", env: dict[str, str] | None = None) -> Ran:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), env=served.env(token) if env is None else env, out=out, err=err)
    return Ran(code, out.getvalue(), err.getvalue())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(tmp_path: Path, pki: Pki | None = None, hosts: tuple[HostSeen, ...] = (HOST,)) -> Iterator[Served]:
    """The app on a uvicorn server in its own thread and event loop (the core's loop too),
    with `hosts` learned."""
    port = free_port()
    started: dict[str, Any] = {}
    ready = threading.Event()

    async def run() -> None:
        config = make_config(tmp_path, api=API)
        core, session = await running_core(config, Clock())
        await core.hosts_seen(list(hosts))
        server = uvicorn.Server(uvicorn.Config(
            create_app(core, config), host="127.0.0.1", port=port, log_level="warning", lifespan="off",
            ssl_certfile=None if pki is None else str(pki.server_cert),
            ssl_keyfile=None if pki is None else str(pki.server_key),
        ))
        started.update(core=core, session=session, server=server)
        ready.set()
        await server.serve()

    thread = threading.Thread(target=asyncio.run, args=(run(),), name="controller-api", daemon=True)
    thread.start()
    assert ready.wait(20), "the core never started"
    server: uvicorn.Server = started["server"]
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the API server never started"
        time.sleep(0.02)
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    (tokens / "admin.token").write_text(ADMIN + "\n")
    (tokens / "viewer.token").write_text(VIEWER + "\n")
    (tokens / "wrong.token").write_text("not-a-token-of-this-controller\n")
    scheme = "http" if pki is None else "https"
    try:
        yield Served(f"{scheme}://127.0.0.1:{port}", started["core"], started["session"], tokens,
                     None if pki is None else pki.ca)
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    yield from serve(tmp_path)


def rows(text: str) -> dict[str, list[str]]:
    """A table printed by supergwctl: first column -> the row's cells (header skipped)."""
    return {line.split()[0]: line.split() for line in text.splitlines()[1:] if line.strip()}


# -- reading ---------------------------------------------------------------------------


def test_status(served: Served) -> None:
    ran = ctl(served, "status")
    assert ran.code == EXIT_OK, ran.err
    assert "primary (connected to switch 127.0.0.1:50700" in ran.out
    assert "3 of 3 alive" in ran.out and "16 (0 unassigned)" in ran.out
    as_json = ctl(served, "status", "--json").json()
    api = served.api("/status")
    assert set(as_json) == set(api)
    assert {k: v for k, v in as_json.items() if k != "uptime_s"} == {k: v for k, v in api.items() if k != "uptime_s"}


def test_gateways_table_and_one_gateway(served: Served) -> None:
    ran = ctl(served, "gateways")
    assert ran.code == EXIT_OK, ran.err
    table = rows(ran.out)
    assert ran.out.splitlines()[0].split()[:3] == ["NAME", "STATE", "ALIVE"]
    assert set(table) == {"g1", "g2", "g3"}
    assert table["g2"][1] == "alive" and "2" in table["g2"]  # g2 weighs 2
    assert ctl(served, "gateways", "--json").json() == served.api("/gateways")
    one = ctl(served, "gateways", "g2")
    assert one.code == EXIT_OK and "mac" in one.out and "52:54:00:00:01:02" in one.out
    assert ctl(served, "--json", "gateways", "g2").json() == served.api("/gateways/g2")


def test_buckets_all_and_one(served: Served) -> None:
    ran = ctl(served, "buckets")
    assert ran.code == EXIT_OK, ran.err
    table = rows(ran.out)
    assert [int(b) for b in table] == list(range(16))
    assert table["5"][1] == "02:5e:00:00:00:05" and table["5"][2] == "g3"  # ROUND_ROBIN: 5 % 3 -> g3
    assert ctl(served, "buckets", "--json").json() == served.api("/buckets")
    assert ctl(served, "buckets", "5", "--json").json() == served.api("/buckets/5")
    g3 = ctl(served, "buckets", "--gateway", "g3")
    assert g3.code == EXIT_OK and [int(b) for b in rows(g3.out)] == [b for b in range(16) if b % 3 == 2]
    unknown = ctl(served, "buckets", "--gateway", "g9")
    assert unknown.code != EXIT_OK and "g9" in unknown.err


def test_hosts(served: Served) -> None:
    ran = ctl(served, "hosts")
    assert ran.code == EXIT_OK, ran.err
    row = rows(ran.out)[HOST.mac]
    assert row[1] == HOST.ip and row[2] == "-" and row[3] == "1"  # no IPv6 address: "-"
    assert ran.out.strip().endswith("1 of 1 matching hosts shown (1 learned in all)")
    as_json = ctl(served, "hosts", "--json").json()
    assert [h["mac"] for h in as_json["hosts"]] == [HOST.mac]
    assert as_json == served.api("/hosts?limit=100") and as_json["next_after"] is None


MANY = tuple(HostSeen(mac=f"02:00:00:00:01:{i:02x}", port=1, ip=f"10.0.0.{100 + i}") for i in range(7))


@pytest.fixture
def served_many(tmp_path: Path) -> Iterator[Served]:
    yield from serve(tmp_path, hosts=MANY)


def test_hosts_pages_and_filters(served_many: Served) -> None:
    served = served_many
    macs = sorted(h.mac for h in MANY)
    first = ctl(served, "hosts", "--limit", "3")
    assert first.code == EXIT_OK, first.err
    assert [m for m in rows(first.out) if m in macs] == macs[:3]
    last_line = first.out.strip().splitlines()[-1]
    assert last_line == (f"3 of 7 matching hosts shown (7 learned in all); next page: "
                         f"supergwctl hosts --limit 3 --after {macs[2]}")
    second = ctl(served, "hosts", "--limit", "3", "--after", macs[2].upper())
    assert [m for m in rows(second.out) if m in macs] == macs[3:6]
    everything = ctl(served, "hosts", "--limit", "2", "--all", "--json").json()
    assert [h["mac"] for h in everything["hosts"]] == macs and everything["next_after"] is None
    # filters: the gateway holding a host's bucket, its IP, its MAC
    by_ip = ctl(served, "hosts", "--ip", "10.0.0.103", "--json").json()
    assert [h["mac"] for h in by_ip["hosts"]] == ["02:00:00:00:01:03"] and by_ip["matched"] == 1
    gw = by_ip["hosts"][0]["gateway"]
    on_gw = ctl(served, "hosts", "--gateway", gw, "--json").json()
    assert "02:00:00:00:01:03" in [h["mac"] for h in on_gw["hosts"]]
    assert all(h["gateway"] == gw for h in on_gw["hosts"]) and on_gw["total"] == 7
    assert on_gw == served.api(f"/hosts?gateway={gw}&limit=100")
    assert ctl(served, "hosts", "--mac", "02:00:00:00:01:05", "--ip", "10.0.0.103", "--json").json()["hosts"] == []


def test_hosts_bad_filters(served_many: Served) -> None:
    for argv in (["--mac", "02:00:00"], ["--ip", "10.0.0.300"], ["--limit", "0"], ["--after", "nope"]):
        ran = ctl(served_many, "hosts", *argv)
        assert ran.code == EXIT_USAGE and ran.out == "", argv
    unknown = ctl(served_many, "hosts", "--gateway", "nope")
    assert unknown.code == EXIT_API and "HTTP 404" in unknown.err and "no gateway named 'nope'" in unknown.err


def test_clients_without_remote_access(served: Served) -> None:
    ran = ctl(served, "clients")
    assert ran.code == EXIT_OK, ran.err
    assert ran.out.strip().endswith("clients per gateway: no clients")
    assert ctl(served, "clients", "--json").json() == [] == served.api("/clients")


def test_events_show_operator_actions_with_who(served: Served) -> None:
    assert ctl(served, "drain", "g1").code == EXIT_OK
    ran = ctl(served, "events", "--limit", "5")
    assert ran.code == EXIT_OK, ran.err
    drains = [line for line in ran.out.splitlines() if " operator " in line and " drain " in line]
    assert drains and " ops " in drains[0], ran.out
    events = ctl(served, "events", "--json").json()
    assert events == served.api("/events")
    newest = events[0]["id"]
    assert ctl(served, "events", "--since-id", str(newest), "--json").json() == []


# -- changing --------------------------------------------------------------------------


def test_drain_then_undrain(served: Served) -> None:
    served.session.batches.clear()  # the host learned at start
    ran = ctl(served, "drain", "g1")
    assert ran.code == EXIT_OK, ran.err
    assert "g1 drained: it gets no new buckets and carries none now" in ran.out
    gws = {g["name"]: g for g in served.api("/gateways")}
    assert gws["g1"]["state"] == "drained" and gws["g1"]["buckets"] == 0
    moved = {b: gw for batch in served.session.batches for b, gw in bucket_writes(batch).items()}
    assert sorted(moved) == [b for b in range(16) if b % 3 == 0]  # g1's buckets, written to the switch
    assert set(moved.values()) <= {"g2", "g3"}
    ran = ctl(served, "undrain", "g1", "--json")
    assert ran.code == EXIT_OK and ran.json()["drained"] is False and ran.json() == served.api("/gateways/g1")


def test_drain_warns_about_pinned_buckets(served: Served) -> None:
    assert ctl(served, "pin", "0", "g1").code == EXIT_OK
    ran = ctl(served, "drain", "g1")
    assert ran.code == EXIT_OK, ran.err
    assert "warning: g1 still carries 1 buckets: pinned buckets stay" in ran.out


def test_weight(served: Served) -> None:
    ran = ctl(served, "weight", "g2", "3.5")
    assert ran.code == EXIT_OK, ran.err
    assert "g2 weight 3.5" in ran.out and served.api("/gateways/g2")["weight"] == 3.5
    refused = ctl(served, "weight", "g2", "0")
    assert refused.code == EXIT_API
    assert "HTTP 422" in refused.err and "body.weight: Input should be greater than 0" in refused.err
    assert served.api("/gateways/g2")["weight"] == 3.5


def test_pin_unpin_move(served: Served) -> None:
    ran = ctl(served, "pin", "4", "g3", "--json")
    assert ran.code == EXIT_OK, ran.err
    assert (ran.json()["gateway"], ran.json()["pinned"]) == ("g3", "g3") and ran.json() == served.api("/buckets/4")
    assert "bucket 4 unpinned (stays on g3" in ctl(served, "unpin", "4").out
    assert served.api("/buckets/4")["pinned"] is None
    ran = ctl(served, "move", "4", "g1")
    assert ran.code == EXIT_OK and "bucket 4 moved to g1" in ran.out
    assert served.api("/buckets/4")["gateway"] == "g1"


def test_refusals_show_the_api_message(served: Served) -> None:
    assert ctl(served, "drain", "g3").code == EXIT_OK
    ran = ctl(served, "pin", "1", "g3")
    assert ran.code == EXIT_API
    assert "HTTP 409" in ran.err and "gateway 'g3' is drained: cannot pin a bucket to it" in ran.err
    ran = ctl(served, "buckets", "99")
    assert ran.code == EXIT_API and "HTTP 404" in ran.err and "bucket 99 out of range 0..15" in ran.err


def test_rebalance_dry_run_writes_nothing(served: Served) -> None:
    assert ctl(served, "drain", "g1").code == EXIT_OK
    assert ctl(served, "undrain", "g1").code == EXIT_OK  # empty and recovering: rebalance rounds refill it
    served.session.batches.clear()
    before = served.api("/buckets")
    ran = ctl(served, "rebalance", "--dry-run", "--json")
    assert ran.code == EXIT_OK, ran.err
    plan = ran.json()
    assert plan["dry_run"] is True and plan["applied"] is False and plan["moves"], plan
    assert {m["dst"] for m in plan["moves"]} == {"g1"}
    assert served.session.batches == [] and served.api("/buckets") == before
    human = ctl(served, "rebalance", "--dry-run")
    assert human.out.startswith(f"dry run: {len(plan['moves'])} moves planned, nothing written"), human.out
    table = rows(human.out.split("BUCKET", 1)[1])
    assert {int(b): row[2] for b, row in table.items()} == {m["bucket"]: "g1" for m in plan["moves"]}
    assert served.session.batches == []
    done = ctl(served, "rebalance")
    assert done.code == EXIT_OK and done.out.startswith(f"{len(plan['moves'])} moves applied"), done.out
    assert served.session.batches and served.api("/gateways/g1")["buckets"] == len(plan["moves"])


# -- errors ----------------------------------------------------------------------------


def test_unknown_gateway_gets_the_api_message(served: Served) -> None:
    for argv, status, message in [
        (("drain", "gw9"), 404, "no gateway named 'gw9'; known: g1, g2, g3"),
        (("gateways", "gw9"), 404, "no gateway named 'gw9'; known: g1, g2, g3"),
        (("weight", "gw9", "2"), 404, "no gateway named 'gw9'; known: g1, g2, g3"),
        (("move", "3", "gw9"), 404, "body.gateway: no gateway named 'gw9'; known: g1, g2, g3"),
        (("pin", "3", "gw9"), 404, "body.gateway: no gateway named 'gw9'; known: g1, g2, g3"),
    ]:
        ran = ctl(served, *argv)
        assert ran.code == EXIT_API, (argv, ran)
        assert f"HTTP {status}" in ran.err and message in ran.err, (argv, ran.err)
        assert ran.out == ""


def test_bad_token_is_401_with_advice(served: Served) -> None:
    ran = ctl(served, "status", token="wrong")
    assert ran.code == EXIT_API
    assert "HTTP 401" in ran.err and "the token was refused" in ran.err
    assert "not-a-token-of-this-controller" not in ran.err  # never the secret


def test_read_only_token_reads_but_cannot_drain(served: Served) -> None:
    assert ctl(served, "gateways", token="viewer").code == EXIT_OK
    ran = ctl(served, "drain", "g1", token="viewer")
    assert ran.code == EXIT_API
    detail = httpx.post(served.url + API_PREFIX + "/gateways/g1/drain",
                        headers={"Authorization": f"Bearer {VIEWER}"}).json()["detail"]
    assert "HTTP 403" in ran.err and detail in ran.err and "need an admin token" in ran.err
    assert served.api("/gateways/g1")["drained"] is False


def test_console_script_and_exit_codes(served: Served) -> None:
    """The installed `supergwctl` (the console script of proto/pyproject.toml), as a process."""
    exe = Path(sys.executable).with_name("supergwctl")
    if not exe.exists():
        pytest.skip(f"{exe} is not installed: run .ci/install-deps")
    env = served.env()
    ok = subprocess.run([str(exe), "gateways", "--json"], env=env, capture_output=True, text=True, timeout=30)
    assert ok.returncode == EXIT_OK and [g["name"] for g in json.loads(ok.stdout)] == ["g1", "g2", "g3"]
    refused = subprocess.run([str(exe), "drain", "gw9"], env=env, capture_output=True, text=True, timeout=30)
    assert refused.returncode == EXIT_API and "no gateway named 'gw9'" in refused.stderr
    usage = subprocess.run([str(exe), "pin", "x", "g1"], env=env, capture_output=True, text=True, timeout=30)
    assert usage.returncode == EXIT_USAGE and "'x' is not a bucket index" in usage.stderr


# -- https -----------------------------------------------------------------------------


@pytest.fixture
def served_tls(tmp_path: Path) -> Iterator[Served]:
    reason = openssl_missing()
    if reason:
        pytest.skip(reason)
    yield from serve(tmp_path, make_pki(tmp_path / "pki"))


def test_https_with_the_ca_file(served_tls: Served) -> None:
    assert served_tls.url.startswith("https://") and served_tls.ca is not None
    ran = ctl(served_tls, "gateways", "--json")
    assert ran.code == EXIT_OK, ran.err
    assert ran.json() == served_tls.api("/gateways")
    flag = {k: v for k, v in served_tls.env().items() if k != "SUPERGW_CA_FILE"}
    assert ctl(served_tls, "--ca-file", str(served_tls.ca), "status", env=flag).code == EXIT_OK
    assert ctl(served_tls, "--cacert", str(served_tls.ca), "status", env=flag).code == EXIT_OK  # curl's name
    untrusted = ctl(served_tls, "status", env=flag)
    assert untrusted.code == EXIT_UNREACHABLE
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted.err and "--ca-file" in untrusted.err
