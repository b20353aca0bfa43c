"""switch.tls -> finsy credentials, and the advice logged while the P4Runtime channel is down."""

from __future__ import annotations

from pathlib import Path

import pytest

from supergw_controller.config import ConfigError, SwitchConfig
from supergw_controller.southbound.tls import channel_credentials, explain, is_loopback


def switch(tls: dict[str, str] | None = None, address: str = "10.0.0.2:9559") -> SwitchConfig:
    return SwitchConfig.model_validate({"address": address, "device_id": 1, **({"tls": tls} if tls else {})})


PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_plaintext_is_the_default() -> None:
    assert channel_credentials(switch()) is None


def test_credentials_read_the_files_now(tmp_path: Path) -> None:
    for name in ("ca.pem", "c.pem", "k.pem"):
        (tmp_path / name).write_text(PEM)
    creds = channel_credentials(
        switch({"cacert": str(tmp_path / "ca.pem"), "cert": str(tmp_path / "c.pem"), "key": str(tmp_path / "k.pem"),
                "server_name": "sw1"})
    )
    assert creds is not None and creds.cacert == PEM.encode() and creds.private_key == PEM.encode()
    assert creds.target_name_override == "sw1"


def test_unreadable_or_non_pem_files_are_config_errors(tmp_path: Path) -> None:
    (tmp_path / "junk").write_text("hello")
    with pytest.raises(ConfigError, match="switch.tls.cacert: .* is not PEM"):
        channel_credentials(switch({"cacert": str(tmp_path / "junk")}))
    with pytest.raises(ConfigError, match="switch.tls.cacert: cannot read"):
        channel_credentials(switch({"cacert": str(tmp_path / "gone.pem")}))


@pytest.mark.parametrize(
    ("tls", "details", "advice"),
    [
        (None, "ipv4:1.2.3.4:9559: Connection refused", "nothing listens at 10.0.0.2:9559"),
        (None, "ipv4:1.2.3.4:9559: Socket closed", "if it runs with --grpc-server-ssl, set switch.tls"),
        ({"cacert": "ca"}, "Unwrap failed (TSI_DATA_CORRUPTED)", "set switch.tls.cert and switch.tls.key"),
        ({"cacert": "ca"}, "Socket closed", "set switch.tls.cert and switch.tls.key"),
        ({"cacert": "ca", "cert": "c", "key": "k"}, "Unwrap failed (TSI_DATA_CORRUPTED)", "refused our client certificate"),
        ({"cacert": "ca"}, "Ssl handshake failed: CERTIFICATE_VERIFY_FAILED", "does not verify against switch.tls.cacert"),
        ({"cacert": "ca"}, "WRONG_VERSION_NUMBER", "start it with --grpc-server-ssl, or remove switch.tls"),
    ],
)
def test_advice_names_what_to_change(tls: dict[str, str] | None, details: str, advice: str) -> None:
    cfg = switch()
    if tls is not None:  # paths are not read by explain()
        cfg = cfg.model_copy(update={"tls": SwitchConfig.model_validate({"address": "a:1", "device_id": 1, "tls": tls}).tls})
    assert advice in explain(details, cfg)


@pytest.mark.parametrize(
    ("address", "loop"), [("127.0.0.1:9559", True), ("[::1]:9559", True), ("localhost:1", True), ("10.0.0.2:1", False), ("sw:1", False)]
)
def test_is_loopback(address: str, loop: bool) -> None:
    assert is_loopback(address) is loop
