"""Gateways as UML guests: real kernel XFRM (ESP, proto 50) with charon inside the guest."""

from __future__ import annotations

from typing import Any

import pytest

from supergw_gateway.config import Backend
from supergw_gateway.uml import UmlGuest, _alive, descendants
from tests.integration.conftest import require_uml
from tests.integration.helpers import assert_rekey_keeps_traffic, assert_tune_roundtrip, assert_wan_encrypted, ping

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def um(lab_factory: Any) -> Any:
    require_uml()
    return lab_factory("um", Backend.UML)


def test_guest_uses_kernel_xfrm(um: Any) -> None:
    st = um.gws["a"].status()
    assert st["backend"] == "xfrm_uml" and st["esp"] == "xfrm"
    assert "kernel ESP state created" in st["detection"]
    states = um.gws["a"].executor().run(["ip", "xfrm", "state"]).stdout
    assert "proto esp" in states and "rfc4106(gcm(aes))" in states


def test_host_reaches_host_through_xfrm_tunnel(um: Any) -> None:
    sent, received = ping(um.lab, count=5)
    assert received == sent


def test_wan_carries_only_esp(um: Any) -> None:
    assert_wan_encrypted(um.lab, "esp")


def test_rekey_keeps_traffic_flowing(um: Any) -> None:
    assert_rekey_keeps_traffic(um.lab, um.gws["a"])


def test_tune_apply_revert_inside_guest(um: Any) -> None:
    assert_tune_roundtrip(um.gws["a"], um.paths["a"])


def test_stop_ends_every_uml_process(um: Any) -> None:
    guest = UmlGuest(um.gws["b"].cfg)
    pid = guest.pid()
    assert pid is not None
    family = [pid, *descendants(pid)]
    assert len(family) > 1  # UML helper processes
    um.gws["b"].down()
    assert not [p for p in family if _alive(p)]
    um.gws["b"].up()  # the module's lab stays usable
    um.gws["a"].apply_tunnel()
