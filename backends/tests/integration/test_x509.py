"""X.509 authentication with a demo CA made by strongSwan's pki."""

from __future__ import annotations

from typing import Any

import pytest

from supergw_gateway.config import Backend
from supergw_gateway.pki import make_demo_pki
from tests.integration.conftest import require_root_strongswan
from tests.integration.helpers import ping

pytestmark = pytest.mark.integration


def test_x509_tunnel(lab_factory: Any, tmp_path: Any) -> None:
    require_root_strongswan()
    files = make_demo_pki(tmp_path / "pki", ["gw-a.sgw.test", "gw-b.sgw.test"])

    def auth(k: str) -> dict[str, Any]:
        return {"auth": {"method": "x509", "cacert": str(files["ca.crt"]), "cert": str(files[f"gw-{k}.sgw.test.crt"]),
                         "key": str(files[f"gw-{k}.sgw.test.key"])}}

    r = lab_factory("x5", Backend.LIBIPSEC, a=auth("a"), b=auth("b"))
    sent, received = ping(r.lab, count=3)
    assert received == sent
    sa = r.gws["a"].status()["sas"][0]
    assert sa["state"] == "ESTABLISHED"
