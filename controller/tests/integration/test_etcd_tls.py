"""The controller's etcd store over TLS with client certificates and etcd auth, against a
real etcd set up as docs/deploy-linux.md does it (topologies.etcd_auth: certificates from
`supergw-gateway pki`, users by certificate CN, role `supergw` with readwrite on the store
prefix only, auth enabled).

- the right certificate: the store opens, writes and reads; the leader campaign works;
- refused, each with an error saying what to fix: no client certificate, a certificate
  from another CA, a CA that did not sign etcd's certificate, a user whose role lacks the
  prefix (reads and writes), a user etcd does not know, plaintext to the TLS port;
- config: a CA file that is no certificate, a key that is not the certificate's, each a
  ConfigError naming the key, at start and in `--check` (the pure config mistakes, such as
  https endpoints without store.etcd.tls, are unit tests in tests/test_etcd_store.py).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from etcd_server import EtcdServer, etcd_binary, start_etcd, MISSING
from supergw_controller.config import ConfigError, load_config
from supergw_controller.etcd_kv import EtcdError
from supergw_controller.etcd_store import EtcdIntentStore
from supergw_controller.etcd_tls import EtcdTls, load_etcd_tls
from supergw_controller.ha.leadership import Leadership
from supergw_controller.intent_store import IntentStoreError
from supergw_controller.stores import build_intent_store
from topologies.etcd_auth import ETCDCTL, SERVER_NAME, USER, EtcdPki, enable_auth, etcdctl, make_etcd_pki

pytestmark = pytest.mark.integration

PREFIX = "/supergw/tls-test"
OTHER_PREFIX = "/supergw/other-site"  # a role with readwrite there only
TIMEOUT_S = 2.0


def _missing() -> str | None:
    import shutil

    if etcd_binary() is None:
        return MISSING
    for cmd, pkg in ((ETCDCTL, "etcd-client"), ("pki", "strongswan-pki")):
        if shutil.which(cmd) is None:
            return f"{cmd} is not installed (Debian package {pkg}; .ci/install-deps installs it)"
    return None


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EtcdServer, EtcdPki, EtcdPki]]:
    """etcd with TLS + client-cert auth + auth enabled; its PKI (users root, supergw,
    other (role on OTHER_PREFIX only), stranger (no etcd user)); and an unrelated PKI."""
    if reason := _missing():
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("etcd-tls")
    pki = make_etcd_pki(tmp / "pki", {"server": "127.0.0.1"}, users=("root", USER, "other", "stranger"))
    rogue = make_etcd_pki(tmp / "rogue", {"server": "127.0.0.1"}, users=(USER,))
    server = start_etcd(tmp / "etcd", pki=pki)
    try:
        url = server.url
        enable_auth(pki, url, PREFIX)
        for args in (("user", "add", "other", "--no-password"), ("role", "add", "other"),
                     ("role", "grant-permission", "other", "--prefix=true", "readwrite", OTHER_PREFIX + "/"),
                     ("user", "grant-role", "other", "other")):  # fmt: skip
            etcdctl(pki, url, *args)
        yield server, pki, rogue
    finally:
        server.cleanup()


def tls_for(pki: EtcdPki, user: str | None, ca: EtcdPki | None = None) -> EtcdTls:
    cert, key = pki.client(user) if user else (None, None)
    return load_etcd_tls((ca or pki).ca, cert, key)


async def open_error(server: EtcdServer, tls: EtcdTls | None, endpoint: str | None = None) -> str:
    store = EtcdIntentStore([endpoint or server.url], PREFIX, timeout_s=TIMEOUT_S, tls=tls)
    with pytest.raises(IntentStoreError) as ei:
        await store.open()
    return str(ei.value)


@pytest.fixture
async def store(secured: tuple[EtcdServer, EtcdPki, EtcdPki]) -> AsyncIterator[EtcdIntentStore]:
    server, pki, _ = secured
    s = EtcdIntentStore([server.url], PREFIX, timeout_s=TIMEOUT_S, tls=tls_for(pki, USER))
    await s.open()
    yield s
    await s.close()


async def test_the_right_certificate_reads_and_writes(store: EtcdIntentStore) -> None:
    await store.set_weight("gw1", 3)
    await store.pin(7, "gw2")
    intent = await store.load()
    assert intent.weights == {"gw1": 3} and intent.pins == {7: "gw2"}


async def test_several_endpoints_check_one_server_name(secured: tuple[EtcdServer, EtcdPki, EtcdPki]) -> None:
    """One channel balances over the members and checks every certificate against one name:
    server_name (which make_etcd_pki puts in each member's certificate). Without it, an IP
    list fails verification, which the error says."""
    server, pki, _ = secured
    cert, key = pki.client(USER)
    endpoints = [f"https://127.0.0.2:{server.port}", server.url]  # nothing on .2: the member on .1 answers
    good = EtcdIntentStore(endpoints, PREFIX, timeout_s=TIMEOUT_S, tls=load_etcd_tls(pki.ca, cert, key, SERVER_NAME))
    await good.open()
    assert (await good.load()).weights is not None
    await good.close()
    bad = EtcdIntentStore(endpoints, PREFIX, timeout_s=TIMEOUT_S, tls=load_etcd_tls(pki.ca, cert, key))
    with pytest.raises(IntentStoreError, match="does not carry the name checked"):
        await bad.open()


async def test_the_leader_campaign_works_over_tls(secured: tuple[EtcdServer, EtcdPki, EtcdPki]) -> None:
    server, pki, _ = secured
    lead = Leadership([server.url], PREFIX, "c1", "https://c1:8080", 2, TIMEOUT_S, tls_for(pki, USER))
    try:
        campaign, _ = await lead.campaign()
        assert campaign.won and campaign.leader.replica == "c1"
        await lead.resign(campaign.leader.term, campaign.leader.lease)
        assert await lead.leader() is None
    finally:
        await lead.close()


async def test_no_client_certificate_is_refused(secured: tuple[EtcdServer, EtcdPki, EtcdPki]) -> None:
    server, pki, _ = secured
    msg = await open_error(server, tls_for(pki, None))
    assert "requires a client certificate" in msg and "set store.etcd.tls.cert and store.etcd.tls.key" in msg, msg


async def test_a_certificate_from_another_ca_is_refused(secured: tuple[EtcdServer, EtcdPki, EtcdPki]) -> None:
    server, pki, rogue = secured
    msg = await open_error(server, tls_for(rogue, USER, ca=pki))  # trusts etcd, etcd does not trust it
    assert "etcd refused our client certificate" in msg and "--trusted-ca-file" in msg, msg


async def test_a_ca_that_did_not_sign_etcd_is_refused(secured: tuple[EtcdServer, EtcdPki, EtcdPki]) -> None:
    server, pki, rogue = secured
    msg = await open_error(server, tls_for(pki, USER, ca=rogue))
    assert "does not verify against store.etcd.tls.cacert" in msg, msg


async def test_a_user_whose_role_lacks_the_prefix_is_refused(secured: tuple[EtcdServer, EtcdPki, EtcdPki]) -> None:
    server, pki, _ = secured
    msg = await open_error(server, tls_for(pki, "other"))
    assert "permission denied" in msg and "grant its role readwrite on the store prefix" in msg, msg
    assert str(pki.client("other")[0]) in msg, msg  # names the certificate whose CN is the user


async def test_a_user_etcd_does_not_know_is_refused(secured: tuple[EtcdServer, EtcdPki, EtcdPki]) -> None:
    server, pki, _ = secured
    msg = await open_error(server, tls_for(pki, "stranger"))
    assert "refused a read" in msg and "check that etcd knows the user" in msg, msg


async def test_a_read_only_role_cannot_open_the_store(secured: tuple[EtcdServer, EtcdPki, EtcdPki]) -> None:
    """Reading alone is not enough: open() proves the user may write, before any takeover."""
    server, pki, _ = secured
    etcdctl(pki, server.url, "role", "add", "reader")
    etcdctl(pki, server.url, "role", "grant-permission", "reader", "--prefix=true", "read", PREFIX + "/")
    etcdctl(pki, server.url, "user", "add", "stranger", "--no-password")
    etcdctl(pki, server.url, "user", "grant-role", "stranger", "reader")
    try:
        msg = await open_error(server, tls_for(pki, "stranger"))
        assert "permission denied" in msg and "readwrite" in msg, msg
    finally:
        etcdctl(pki, server.url, "user", "delete", "stranger")


async def test_plaintext_to_the_tls_port_says_to_set_tls(secured: tuple[EtcdServer, EtcdPki, EtcdPki]) -> None:
    server, _, _ = secured
    msg = await open_error(server, None, endpoint=server.endpoint)
    assert "set store.etcd.tls" in msg, msg


async def test_no_user_is_left_without_a_message(secured: tuple[EtcdServer, EtcdPki, EtcdPki]) -> None:
    """Every refusal above is an EtcdError at the KV level too (the replica's leadership loop logs it)."""
    server, pki, _ = secured
    lead = Leadership([server.url], PREFIX, "c1", "", 2, TIMEOUT_S, tls_for(pki, "other"))
    try:
        with pytest.raises(EtcdError) as ei:
            await lead.campaign()
        assert "grant its role readwrite" in str(ei.value)
    finally:
        await lead.close()


# --- config ------------------------------------------------------------------------------

def _config(tmp_path: Path, etcd: dict[str, Any]) -> Path:
    (tmp_path / "p4info.txtpb").write_text("# p4info\n")
    data = {
        "switch": {"address": "127.0.0.1:50700", "device_id": 700, "election_id": {"high": 0, "low": 5}},
        "pipeline": {"p4info": "p4info.txtpb"},
        "gateway_ip": "10.0.0.1", "buckets": 64, "vmac_base": "02:5e:00:00:00:00",
        "ports": {1: "host", 11: "gateway"},
        "gateways": [{"name": "gw1", "port": 11, "mac": "52:54:00:00:01:01", "agent_token": "agent-gw1-secret-0001"}],
        "api": {"listen": "127.0.0.1:18700", "token": "secret-token"},
        "store": {"backend": "etcd", "etcd": etcd},
    }  # fmt: skip
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_config_builds_a_tls_store(secured: tuple[EtcdServer, EtcdPki, EtcdPki], tmp_path: Path) -> None:
    _, pki, _ = secured
    cert, key = pki.client(USER)
    tls = {"cacert": str(pki.ca), "cert": str(cert), "key": str(key)}
    store = build_intent_store(load_config(_config(tmp_path, {"endpoints": ["https://127.0.0.1:2379"], "tls": tls})))
    assert isinstance(store, EtcdIntentStore)


def test_config_unusable_files_are_clear(secured: tuple[EtcdServer, EtcdPki, EtcdPki], tmp_path: Path) -> None:
    _, pki, rogue = secured
    (tmp_path / "junk.crt").write_text("not a certificate\n")
    cert, _ = pki.client(USER)
    _, wrong_key = rogue.client(USER)
    cases = [
        ({"cacert": str(tmp_path / "junk.crt")}, "store.etcd.tls.cacert"),
        ({"cacert": str(pki.ca), "cert": str(cert), "key": str(wrong_key)}, "check that the key belongs to it"),
    ]
    for tls, says in cases:
        path = _config(tmp_path, {"endpoints": ["127.0.0.1:2379"], "tls": tls})
        with pytest.raises(ConfigError) as ei:
            build_intent_store(load_config(path))
        assert says in str(ei.value), ei.value
        checked = subprocess.run([sys.executable, "-m", "supergw_controller.cli", "--config", str(path), "--check"],
                                 capture_output=True, text=True, timeout=60)
        assert checked.returncode == 2 and says in checked.stderr, checked.stderr  # the unit's ExecStartPre
