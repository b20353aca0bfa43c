"""The remote_access section: what a single config must get right, with the error it gets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from supergw_gateway.config import parse_config
from supergw_gateway.errors import ConfigError
from supergw_gateway.ra import gateway as ra_gateway
from supergw_gateway.ra.config import SpiPlan, cluster_conflicts, cluster_spi_plan
from tests.conftest import with_value


def test_defaults(ra_dict: dict[str, Any]) -> None:
    ra = parse_config(ra_dict).remote_access
    assert ra is not None
    assert ra.spi.esp_min == 0xC1000000 and ra.spi.ike_mask == 0xFF << 56
    assert ra.public.hold == "wan_host_scope" and ra.mobike and ra.unique == "replace"
    assert ra.caching.strategy == "none" and ra.dpd_delay == 30
    assert ra.caching.auth_age_s == 86400 and ra.caching.over_s == 8640


def test_without_remote_access_nothing_changes(gw_dict: dict[str, Any]) -> None:
    assert parse_config(gw_dict).remote_access is None


@pytest.mark.parametrize(("path", "value", "needle"), [
    (("spi", "esp_min"), "0x10", "outside 0x100..0xffffffff"),
    (("spi", "esp_max"), 0x1_0000_0000, "outside 0x100"),
    (("spi", "esp_min"), "0xc2000000", "esp_min 0xc2000000 is above spi.esp_max"),
    (("spi", "esp_max"), "0xc1000fff", "give at least 0x10000"),
    (("spi", "esp_min"), "zero", "not an integer"),
    (("spi", "ike_label"), 0x0100000000000001, "bits outside spi.ike_mask"),
    (("spi", "ike_label"), 0, "label is 0 under a non-zero"),
    (("spi", "ike_mask"), (1 << 40) - 1 << 24, "leaves 24 random bits"),
    (("spi", "ike_mask"), 1 << 64, "not a 64-bit value"),
    (("pool",), "10.1.0.0/25", "overlaps the lan network"),
    (("pool",), "10.2.0.0/16", "overlaps remote.subnets"),
    (("pool",), "192.0.2.128/25", "overlaps the wan network"),
    (("pool",), "10.90.0.0/31", "too small"),
    (("pool",), "203.0.113.0/24", "inside remote_access.pool"),
    (("public", "address"), "192.0.2.1", "is the wan interface address"),
    (("public", "address"), "10.1.0.77", "inside the lan network"),
    (("public", "address"), "127.0.0.1", "cannot be a public service address"),
    (("public", "hold"), "dummy", "public.hold"),
    (("subnets",), ["10.90.0.0/16"], "overlaps remote_access.pool"),
    (("proposals",), {"ike": ["AES!"]}, "invalid proposal"),
    (("caching",), {"strategy": "clocked"}, "needs caching.lifetime_s"),
    (("caching",), {"strategy": "data"}, "needs caching.lifetime_bytes"),
    (("caching",), {"strategy": "data", "lifetime_bytes": 10, "lifetime_s": 5}, "lifetime_s belongs to"),
    (("caching",), {"strategy": "established", "lifetime_s": 5, "lifetime_bytes": 9}, "lifetime_bytes belongs"),
    (("caching",), {"strategy": "clocked", "lifetime_s": 5, "max_auth_age_s": 9}, "does not apply to strategy"),
    (("caching",), {"strategy": "lru"}, "caching.strategy"),
    (("auth", "cert"), "/nonexistent/vpn.crt", "remote_access.auth.cert: file /nonexistent/vpn.crt does not exist"),
])
def test_bad_remote_access_is_a_clear_error(ra_dict: dict[str, Any], path: tuple[str, ...], value: Any,
                                            needle: str) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config(with_value(ra_dict, ("remote_access", *path), value), "gw.yaml")
    assert needle in str(ei.value)


def test_a_cache_and_gateway_dpd_contradict(ra_dict: dict[str, Any]) -> None:
    ra_dict["remote_access"]["caching"] = {"strategy": "clocked", "lifetime_s": 3600}
    ra_dict["remote_access"]["dpd_delay_s"] = 30
    with pytest.raises(ConfigError, match="would delete an absent client's IKE SA"):
        parse_config(ra_dict)
    ra_dict["remote_access"]["dpd_delay_s"] = 0
    ra = parse_config(ra_dict).remote_access
    assert ra is not None and ra.dpd_delay == 0


def test_uml_backend_takes_remote_access_with_replication_over_its_management_link(ra_dict: dict[str, Any],
                                                                                  tmp_path: Path) -> None:
    """IP_P, the SAs and charon's sync socket live in the guest; its agent reaches the sync socket
    over the guest's management link."""
    ra_dict["backend"] = "uml"
    for f in ("cert", "key", "ca"):
        (tmp_path / f).write_text("x")
    ra_dict["remote_access"]["replication"] = {"listen": "10.255.60.11:4520", "tls": {
        f: str(tmp_path / f) for f in ("cert", "key", "ca")}}
    cfg = parse_config(ra_dict)
    opts = ra_gateway.charon_options(cfg)
    assert "ha" in opts.plugins
    assert dict(opts.plugin_settings)["ha"] == (("local", "169.254.77.2"), ("remote", "169.254.77.1"),
                                                ("segment_count", "1"), ("monitor", "no"), ("fifo_interface", "no"),
                                                ("resync", "no"))


@pytest.mark.parametrize("listen, why", [("10.0.0.1", "want ADDRESS:PORT"), ("gw1:4520", "want ADDRESS:PORT"),
                                         ("10.0.0.1:0", "want ADDRESS:PORT"), ("10.0.0.1:70000", "ADDRESS:PORT")])
def test_replication_refuses_a_bad_listener_or_missing_files(ra_dict: dict[str, Any], tmp_path: Path, listen: str,
                                                             why: str) -> None:
    for f in ("cert", "key", "ca"):
        (tmp_path / f).write_text("x")
    tls = {f: str(tmp_path / f) for f in ("cert", "key", "ca")}
    ra_dict["remote_access"]["replication"] = {"listen": listen, "tls": tls}
    with pytest.raises(ConfigError, match=why):
        parse_config(ra_dict)
    ra_dict["remote_access"]["replication"] = {"listen": "10.0.0.1:4520", "tls": {**tls, "ca": str(tmp_path / "no")}}
    with pytest.raises(ConfigError, match="replication.tls.ca: file .*no does not exist"):
        parse_config(ra_dict)


def test_cluster_conflicts() -> None:
    a = SpiPlan(esp_min=0xC0000000, esp_max=0xC0FFFFFF, ike_label=1 << 56, ike_mask=0xFF << 56)
    b = SpiPlan(esp_min=0xC1000000, esp_max=0xC1FFFFFF, ike_label=2 << 56, ike_mask=0xFF << 56)
    assert cluster_conflicts({"a": a, "b": b}) == []
    c = SpiPlan(esp_min=0xC0800000, esp_max=0xC17FFFFF, ike_label=1 << 56, ike_mask=0xFF << 56)
    problems = cluster_conflicts({"a": a, "b": b, "c": c})
    assert any("a and c: ESP SPI ranges overlap" in p for p in problems)
    assert any("a and c: IKE SPI labels cannot be told apart" in p for p in problems)
    assert any("b and c: ESP SPI ranges overlap" in p for p in problems)
    unlabelled = SpiPlan(esp_min=0xC2000000, esp_max=0xC2FFFFFF)
    assert any("IKE SPI labels" in p for p in cluster_conflicts({"a": a, "u": unlabelled}))


def test_cluster_layout_is_disjoint_and_matches_the_wire() -> None:
    plans = {f"g{k}": cluster_spi_plan(k) for k in range(64)}
    assert cluster_conflicts(plans) == []
    assert (plans["g0"].esp_min, plans["g0"].esp_max, plans["g0"].ike_label) == (0xC0000000, 0xC0FFFFFF, 1 << 56)
    assert (plans["g63"].esp_min >> 24, plans["g63"].esp_max, plans["g63"].ike_label >> 56) == (0xFF, 0xFFFFFFFF, 64)
    for bad in (-1, 64):
        with pytest.raises(ValueError, match="outside 0..63"):
            cluster_spi_plan(bad)
