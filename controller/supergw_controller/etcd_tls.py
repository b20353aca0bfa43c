"""etcd over TLS: the channel credentials from `store.etcd.tls`, and what to do when etcd
refuses them.

The PEM files are read once, when the store is built, so a missing or unreadable file is
an error at start naming the config key, never a reconnect loop. With etcd's
`--client-cert-auth` and auth enabled, the client certificate's CN is the etcd user: its
roles decide which keys the controller may touch (docs/deploy-linux.md: one role with
readwrite on the store prefix only).

gRPC reports a failed handshake as UNAVAILABLE with OpenSSL's or the peer's alert text
("CERTIFICATE_VERIFY_FAILED", "certificate required", "Socket closed"); `explain` turns
that into the config key or etcd flag to fix.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc


class EtcdTlsError(ValueError):
    """A TLS file of store.etcd.tls cannot be used."""


@dataclass(frozen=True)
class EtcdTls:
    """PEM bytes: the CA that signed the members' certificates, our client certificate and key."""

    cacert: bytes
    cert: bytes | None = None
    key: bytes | None = None
    server_name: str | None = None
    cert_path: Path | None = None  # for messages: its CN is the etcd user

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(root_certificates=self.cacert, private_key=self.key,
                                            certificate_chain=self.cert)  # fmt: skip

    def channel_options(self) -> tuple[tuple[str, str], ...]:
        return (("grpc.ssl_target_name_override", self.server_name),) if self.server_name else ()


def _read_pem(path: Path, what: str, marker: bytes) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EtcdTlsError(f"store.etcd.tls.{what}: cannot read {path}: {exc.strerror or exc}") from None
    if marker not in data:
        raise EtcdTlsError(f"store.etcd.tls.{what}: {path} holds no PEM {marker.decode().strip('- ')}")
    return data


def load_etcd_tls(cacert: Path, cert: Path | None, key: Path | None, server_name: str | None = None) -> EtcdTls:
    """Read and check the files; EtcdTlsError names the config key and what is wrong."""
    if (cert is None) != (key is None):
        raise EtcdTlsError("store.etcd.tls: give both cert and key (a client certificate and its key), or neither")
    ca = _read_pem(cacert, "cacert", b"-----BEGIN CERTIFICATE")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        ctx.load_verify_locations(cadata=ca.decode(errors="replace"))
    except (ssl.SSLError, ValueError) as exc:
        raise EtcdTlsError(f"store.etcd.tls.cacert: {cacert} is not a usable CA certificate: {exc}") from None
    if cert is None or key is None:
        return EtcdTls(ca, server_name=server_name)
    crt = _read_pem(cert, "cert", b"-----BEGIN CERTIFICATE")
    k = _read_pem(key, "key", b"PRIVATE KEY-----")
    try:
        ctx.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise EtcdTlsError(
            f"store.etcd.tls: cannot use certificate {cert} with key {key}: {exc}; check that the key belongs to it"
        ) from None
    return EtcdTls(ca, crt, k, server_name, cert)


def explain(details: str, tls: EtcdTls | None) -> str:
    """What to do about an etcd channel that does not come up, from gRPC's error text."""
    d = details.lower()
    if tls is None:
        if any(s in d for s in ("socket closed", "connection reset", "eof", "handshake", "ssl", "tls")):
            return "etcd closed the plaintext connection: if its client URLs are https, set store.etcd.tls"  # or it stopped
        return ""
    if "custom verification check failed" in d:
        return (
            "etcd's certificate does not carry the name checked: the endpoint's host, or store.etcd.tls.server_name "
            "when set (with several endpoints it must be a name every member's certificate carries)"
        )
    if "certificate_verify_failed" in d or "verify" in d and "cert" in d:
        return (
            "etcd's certificate does not verify against store.etcd.tls.cacert (a certificate from another CA, "
            "expired, or its names do not include the endpoint's host: see store.etcd.tls.server_name)"
        )
    if "wrong_version_number" in d or "http/1" in d or "record" in d:
        return "etcd does not speak TLS on that port: use its https client URL, or remove store.etcd.tls"
    refused = ("certificate_required", "certificate required", "bad_certificate", "bad certificate",
               "unknown_ca", "unknown ca", "handshake_failure", "tsi_data_corrupted", "socket closed")
    if any(s in d for s in refused):
        if tls.cert is None:
            return (
                "etcd refused the TLS handshake: it requires a client certificate (--client-cert-auth): "
                "set store.etcd.tls.cert and store.etcd.tls.key"
            )
        return (
            "etcd refused our client certificate: is store.etcd.tls.cert signed by etcd's --trusted-ca-file, "
            "valid now, and made for client authentication (extendedKeyUsage clientAuth)?"
        )
    return ""


def explain_denied(details: str, tls: EtcdTls | None, key: bytes) -> str:
    """What to do about PERMISSION_DENIED / an unknown user, for a call on `key`."""
    cert = tls.cert_path if tls is not None else None
    who = f"the etcd user named by the CN of {cert} (store.etcd.tls.cert)" if cert else "this client (no user)"
    d = details.lower()
    if "user name not found" in d or "user name is empty" in d or "invalid auth token" in d:
        return (
            f"etcd has auth enabled and does not know {who}: add the user and grant it the controller's role "
            "(etcdctl user add NAME --no-password; etcdctl user grant-role NAME supergw)"
        )
    # etcd answers "permission denied" for a user it does not know, too: say both.
    return (
        f"{who} may not access {key.decode(errors='replace')!r}: grant its role readwrite on the store prefix "
        "(etcdctl role grant-permission supergw --prefix=true readwrite PREFIX/; store.etcd.prefix), "
        "and check that etcd knows the user (etcdctl user get NAME; user add NAME --no-password)"
    )
