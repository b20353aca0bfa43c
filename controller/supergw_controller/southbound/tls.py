"""P4Runtime channel security from `switch.tls`: plaintext (the default), TLS, or mutual TLS."""

from __future__ import annotations

import ipaddress
import logging

from finsy import GRPCCredentialsTLS

from supergw_controller.config import ConfigError, SwitchConfig

log = logging.getLogger(__name__)


def is_loopback(address: str) -> bool:
    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def warn_if_plaintext(switch: SwitchConfig) -> None:
    if switch.tls is None and not is_loopback(switch.address):
        log.warning(
            "P4Runtime to %s is plaintext: anyone on the path can read and inject it; "
            "set switch.tls (and run the switch with --grpc-server-ssl)",
            switch.address,
        )


def channel_credentials(switch: SwitchConfig) -> GRPCCredentialsTLS | None:
    """finsy's TLS credentials for `switch`, or None for plaintext. The PEM files are read
    now, so a missing or unreadable one is a ConfigError at start, not a reconnect loop."""
    if switch.tls is None:
        return None
    pem: dict[str, bytes | None] = {}
    for key in ("cacert", "cert", "key"):
        path = getattr(switch.tls, key)
        if path is None:
            pem[key] = None
            continue
        try:
            pem[key] = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"switch.tls.{key}: cannot read {path}: {exc.strerror or exc}") from None
        if b"-----BEGIN " not in (pem[key] or b""):
            raise ConfigError(f"switch.tls.{key}: {path} is not PEM")
    return GRPCCredentialsTLS(
        cacert=pem["cacert"],
        cert=pem["cert"],
        private_key=pem["key"],
        target_name_override=switch.tls.server_name or "",
    )


def explain(details: str, switch: SwitchConfig) -> str:
    """What to do about a P4Runtime channel that does not come up, from gRPC's error text
    (which under TLS 1.3 is as vague as "Unwrap failed" when the switch wants a certificate)."""
    d = details.lower()
    tls = switch.tls
    if "connection refused" in d:
        return f"nothing listens at {switch.address}: is the switch running, with --grpc-server-addr {switch.address}?"
    if tls is None:
        if any(s in d for s in ("socket closed", "connection reset", "eof", "handshake", "ssl")):
            return "the switch closed the plaintext connection: if it runs with --grpc-server-ssl, set switch.tls"
        return "check switch.address and that the switch is up"
    if "certificate_verify_failed" in d or "verify" in d and "cert" in d:
        return (
            "the switch's certificate does not verify against switch.tls.cacert (wrong CA, expired, or its names do "
            "not include the address's host: see switch.tls.server_name)"
        )
    # Go's TLS 1.3 server alerts (gRPC: "Unwrap failed"); BMv2's gRPC server just hangs up.
    refused = ("certificate_required", "tsi_data_corrupted", "handshake_failure", "bad_certificate", "unknown_ca")
    if any(s in d for s in refused) or "socket closed" in d:
        if tls.cert is None:
            return (
                "the switch refused the TLS handshake: it requires a client certificate "
                "(--grpc-server-with-client-auth): set switch.tls.cert and switch.tls.key"
            )
        return "the switch refused our client certificate: is switch.tls.cert signed by the switch's --grpc-server-cacert?"
    if "wrong_version_number" in d or "record" in d:
        return "the switch does not speak TLS: start it with --grpc-server-ssl, or remove switch.tls"
    return "check switch.address, switch.tls and the switch's --grpc-server-* options"


async def probe(switch: SwitchConfig, timeout: float = 3.0) -> str | None:
    """One Capabilities call with the session's credentials: None if it answers, else gRPC's
    error text. Only called while the session's channel is down, to say why."""
    import grpc
    from finsy.proto import p4r, p4r_grpc

    creds = channel_credentials(switch)
    if creds is None:
        channel = grpc.aio.insecure_channel(switch.address)
    else:
        opts = [("grpc.ssl_target_name_override", switch.tls.server_name)] if switch.tls and switch.tls.server_name else []
        channel = grpc.aio.secure_channel(switch.address, creds.to_client_credentials(), options=opts)
    try:
        await p4r_grpc.P4RuntimeStub(channel).Capabilities(p4r.CapabilitiesRequest(), timeout=timeout)
    except grpc.aio.AioRpcError as exc:
        if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return str(exc.details())
        return None  # it answered (even UNIMPLEMENTED): the transport is fine
    finally:
        await channel.close()
    return None
