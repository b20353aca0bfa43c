"""The hint every TLS-reading program gives for a missing certificate file."""

from __future__ import annotations

from pathlib import Path

from supergw_proto.certfiles import missing


def test_a_missing_file_names_the_pki_option_that_makes_it() -> None:
    server = missing(Path("/etc/supergw/tls/rest-ctl.key"), "server")
    assert server.startswith("file not found: /etc/supergw/tls/rest-ctl.key: ")
    assert "`supergw-gateway pki --out DIR --server rest-ctl=ADDRESS[,NAME]`" in server
    assert "DIR/rest-ctl.crt and DIR/rest-ctl.key" in server
    client = missing(Path("/etc/supergw/tls/p4rt-controller.crt"), "client")
    assert "`supergw-gateway pki --out DIR --client p4rt-controller`" in client
    ca = missing(Path("/etc/supergw/tls/ca.crt"), "ca")
    assert "ca.crt of the site's CA" in ca and "--server" not in ca and "--client" not in ca
