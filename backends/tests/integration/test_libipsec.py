"""libipsec gateways, each a namespace with its own charon (kernel-libipsec, ESP in UDP 4500)."""

from __future__ import annotations

from typing import Any

import pytest

from supergw_gateway.cgroup import CpuGroup
from supergw_gateway.config import Backend
from tests.integration.conftest import require_root_strongswan
from tests.integration.helpers import assert_rekey_keeps_traffic, assert_tune_roundtrip, assert_wan_encrypted, ping

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def li(lab_factory: Any) -> Any:
    require_root_strongswan()
    return lab_factory("li", Backend.AUTO, a={"cpu_quota_percent": 50})


def test_detects_libipsec_and_reports_it(li: Any) -> None:
    st = li.gws["a"].status()
    assert st["backend"] == "libipsec" and "kernel refused" in st["detection"]
    assert st["charon_pid"] != li.gws["b"].status()["charon_pid"]  # one charon per gateway
    sa = st["sas"][0]
    assert sa["state"] == "ESTABLISHED" and sa["children"][0]["state"] == "INSTALLED"


def test_host_reaches_host_through_tunnel(li: Any) -> None:
    sent, received = ping(li.lab, count=5)
    assert received == sent
    child = li.gws["a"].status()["sas"][0]["children"][0]
    assert child["packets_out"] >= 5 and child["bytes_in"] > 0


def test_wan_carries_only_esp_in_udp(li: Any) -> None:
    assert_wan_encrypted(li.lab, "udp port 4500")


def test_rekey_keeps_traffic_flowing(li: Any) -> None:
    assert_rekey_keeps_traffic(li.lab, li.gws["a"])


def test_apply_is_idempotent(li: Any) -> None:
    gw = li.gws["a"]
    spi = gw.status()["sas"][0]["children"][0]["spi_in"]
    gw.apply_tunnel()
    gw.apply_tunnel()
    st = gw.status()
    assert len(st["sas"]) == 1 and st["sas"][0]["children"][0]["spi_in"] == spi


def test_cpu_quota_cgroup(li: Any) -> None:
    group = CpuGroup("sgw-gw-li-a")
    assert group.quota_percent() == pytest.approx(50)
    assert li.gws["a"].charon_pid() in group.pids()
    assert not CpuGroup("sgw-gw-li-b").path.exists()


def test_tune_apply_revert_restores_everything(li: Any) -> None:
    assert_tune_roundtrip(li.gws["a"], li.paths["a"])
