"""`make run TLS=1` (`up --tls`): the topology flag, the certificates `up` issues, the
configs that use them and the switch's TLS flags. Without the flag nothing changes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from topologies import api_tls
from topologies.configs import Secrets, validate_with_owners, write_all
from topologies.model import TopologyError
from topologies.paths import SitePaths
from topologies.schema import load
from topologies.switch import outside_command, site_command

TWO_SITE = Path(__file__).resolve().parents[1] / "two-site.yaml"
REMOTE_ACCESS = Path(__file__).resolve().parents[1] / "remote-access.yaml"


def needs_pki() -> None:
    if shutil.which("pki") is None:
        pytest.skip("strongSwan's pki tool is not installed (Debian package strongswan-pki)")


def san_text(cert: Path) -> str:
    """The certificate as `openssl x509 -text` prints it (its SANs and key usages)."""
    return subprocess.run(["openssl", "x509", "-noout", "-text", "-in", str(cert)],
                          capture_output=True, text=True, check=True).stdout


def test_tls_off_by_default() -> None:
    topo = load().single
    assert not topo.controller.tls
    assert all(c.api_url.startswith("http://") for c in topo.controllers())
    assert api_tls.switch_options(topo, SitePaths(Path("/x"), Path("/x/logs"))) == ()


def test_tls_flag_makes_every_api_url_https() -> None:
    spec = load(tls=True, replicas=3)
    for topo in spec.sites:
        assert topo.controller.tls
        assert [c.api_url for c in topo.controllers()] == [
            f"https://{ip}:{topo.controller.api_port}" for ip in topo.replica_ips().values()]
    assert all(s.controller.tls for s in load(TWO_SITE, tls=True).sites)


def test_tls_in_a_site_file_and_its_errors(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    data = yaml.safe_load((Path(__file__).resolve().parents[1] / "default.yaml").read_text())
    data.setdefault("controller", {})["tls"] = True
    f.write_text(yaml.safe_dump(data))
    assert load(f).single.controller.tls
    data["controller"]["tls"] = "sometimes"
    f.write_text(yaml.safe_dump(data))
    with pytest.raises(TopologyError, match="tls"):
        load(f)


def test_tls_survives_the_state_file() -> None:
    """`status`/`down`/benchmarks rebuild the spec from the state file's JSON: the flag is in it."""
    spec = load(tls=True)
    again = type(spec).model_validate(spec.model_dump(mode="json"))
    assert again.single.controller.tls and again == spec


@pytest.mark.parametrize("replicas", [1, 3])
def test_configs_and_certificates(tmp_path: Path, replicas: int) -> None:
    pytest.importorskip("supergw_controller.config")
    pytest.importorskip("supergw_gateway.config")
    needs_pki()
    topo = load(tls=True, replicas=replicas).single
    paths = SitePaths(tmp_path, tmp_path / "logs")
    gen = write_all(topo, paths, Secrets.fresh(16))
    assert validate_with_owners(gen) == []  # the owners load every certificate path they name
    pki = api_tls.site_pki(paths)
    for process, path in gen.controllers.items():
        ctl = yaml.safe_load(path.read_text())
        assert ctl["api"]["tls"] == {"cert": str(pki.dir / "rest.crt"), "key": str(pki.dir / "rest.key")}, process
        assert ctl["switch"]["tls"] == {"cacert": str(pki.ca), "cert": str(pki.dir / "p4rt-controller.crt"),
                                        "key": str(pki.dir / "p4rt-controller.key")}
    member = yaml.safe_load(gen.gateways["gw1"].read_text())
    assert member["controller"]["ca_file"] == str(pki.ca)
    urls = member["controller"].get("urls") or [member["controller"]["url"]]
    assert urls and all(u.startswith("https://") for u in urls)
    rest = san_text(pki.pair("rest")[0])
    for ip in [topo.mgmt.controller_ip, *topo.replica_ips().values()]:
        assert f"IP Address:{ip}" in rest
    assert "TLS Web Server Authentication" in rest
    switch_host = topo.p4runtime_addr.rpartition(":")[0]
    assert f"IP Address:{switch_host}" in san_text(pki.pair("p4rt-switch")[0])
    assert "TLS Web Client Authentication" in san_text(pki.pair("p4rt-controller")[0])
    for name in ("rest", "p4rt-switch", "p4rt-controller"):
        assert oct(pki.pair(name)[1].stat().st_mode & 0o777) == "0o600"
    argv = site_command(topo, paths.logs, api_tls.switch_options(topo, paths)).argv()
    assert argv[-8:] == ["--grpc-server-ssl", "--grpc-server-cert", str(pki.dir / "p4rt-switch.crt"),
                         "--grpc-server-key", str(pki.dir / "p4rt-switch.key"), "--grpc-server-cacert", str(pki.ca),
                         "--grpc-server-with-client-auth"]


def test_the_outside_switch_of_remote_access_serves_mutual_tls_too(tmp_path: Path) -> None:
    """`make run TOPO=remote-access TLS=1`: the controller dials the outside switch as it dials
    the LAN switch (its client certificate, the site's CA), and the outside switch serves the
    switches' certificate, which names its management address, requiring client certificates."""
    pytest.importorskip("supergw_controller.config")
    pytest.importorskip("supergw_gateway.config")
    needs_pki()
    topo = load(REMOTE_ACCESS, tls=True).single
    paths = SitePaths(tmp_path, tmp_path / "logs")
    gen = write_all(topo, paths, Secrets.fresh(16))
    assert validate_with_owners(gen) == []
    pki = api_tls.site_pki(paths)
    for path in gen.controllers.values():
        ctl = yaml.safe_load(path.read_text())
        assert ctl["remote_access"]["switch"]["tls"] == ctl["switch"]["tls"] == api_tls.switch_tls_config(pki)
    outside_host = topo.outside_p4runtime_addr.rpartition(":")[0]
    assert f"IP Address:{outside_host}" in san_text(pki.pair("p4rt-switch")[0])
    argv = outside_command(topo, paths.logs, api_tls.switch_options(topo, paths)).argv()
    assert argv[-8:] == list(api_tls.switch_options(topo, paths)) and "--grpc-server-with-client-auth" in argv
    plain = load(REMOTE_ACCESS).single
    gen = write_all(plain, SitePaths(tmp_path / "plain", tmp_path / "plain/logs"), Secrets.fresh(16))
    assert all("tls" not in yaml.safe_load(p.read_text())["remote_access"]["switch"] for p in gen.controllers.values())


def test_configs_without_tls_name_no_certificate(tmp_path: Path) -> None:
    pytest.importorskip("supergw_controller.config")
    topo = load().single
    paths = SitePaths(tmp_path, tmp_path / "logs")
    gen = write_all(topo, paths, Secrets.fresh(16))
    ctl = yaml.safe_load(gen.controllers["controller"].read_text())
    assert "tls" not in ctl["api"] and "tls" not in ctl["switch"]
    assert "ca_file" not in yaml.safe_load(gen.gateways["gw1"].read_text())["controller"]
    assert not api_tls.site_pki(paths).dir.exists()
    assert "--grpc-server-ssl" not in site_command(topo, paths.logs, api_tls.switch_options(topo, paths)).argv()
