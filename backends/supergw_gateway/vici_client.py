"""A thin typed layer over PyPI `vici`: decoded replies, streamed calls consumed fully."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import vici
import vici.exception

from supergw_gateway.errors import TunnelError


def decode(v: Any) -> Any:
    """Reply values are bytes (and nested dicts/lists of bytes)."""
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    if isinstance(v, dict):
        return {decode(k): decode(x) for k, x in v.items()}
    if isinstance(v, list):
        return [decode(x) for x in v]
    return v


@dataclass(frozen=True)
class ChildSaStatus:
    name: str
    state: str
    established_s: int
    bytes_in: int
    bytes_out: int
    packets_in: int
    packets_out: int
    spi_in: str
    spi_out: str
    rekey_in_s: int | None


@dataclass(frozen=True)
class IkeSaStatus:
    name: str
    state: str
    established_s: int
    local: str
    remote: str
    children: list[ChildSaStatus]


def _int(d: dict[str, Any], k: str, default: int = 0) -> int:
    try:
        return int(d.get(k, default))
    except (TypeError, ValueError):
        return default


class ViciClient:
    """One VICI session; every call is synchronous (wrap in asyncio.to_thread when async)."""

    def __init__(self, connect: Callable[[], socket.socket]) -> None:
        self._connect = connect
        self._sock = connect()
        self._s = vici.Session(self._sock)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> ViciClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except vici.exception.CommandException as exc:
            raise TunnelError(f"strongSwan rejected {what}: {exc}") from None

    def version(self) -> dict[str, str]:
        version: dict[str, str] = decode(self._s.version())
        return version

    def load_conn(self, conn: dict[str, Any]) -> None:
        self._call("load-conn", lambda: self._s.load_conn(conn))

    def unload_conn(self, name: str) -> None:
        self._call("unload-conn", lambda: self._s.unload_conn({"name": name}))

    def load_pool(self, pool: dict[str, Any]) -> None:
        self._call("load-pool", lambda: self._s.load_pool(pool))

    def counters(self, conn: str | None = None) -> dict[str, int]:
        """IKE message counters (the `counters` plugin): of connection `conn`, or of the daemon."""
        req: dict[str, Any] = {"name": conn} if conn else {}
        try:
            reply = decode(self._s.get_counters(req))
        except vici.exception.CommandException as exc:
            if "no counters found" in str(exc):  # nothing happened on that connection yet
                return {}
            raise TunnelError(f"strongSwan rejected get-counters: {exc}") from None
        table = reply.get("counters", {}).get(conn or "", {})
        return {k: int(v) for k, v in table.items()}

    def load_shared(self, secret: dict[str, Any]) -> None:
        self._call("load-shared", lambda: self._s.load_shared(secret))

    def load_cert(self, pem: bytes, flag: str = "NONE") -> None:
        self._call("load-cert", lambda: self._s.load_cert({"type": "X509", "flag": flag, "data": pem}))

    def load_key(self, pem: bytes) -> None:
        self._call("load-key", lambda: self._s.load_key({"type": "any", "data": pem}))

    def conns(self) -> list[str]:
        names: list[str] = []
        for c in self._s.list_conns():
            names.extend(decode(c).keys())
        return names

    def initiate(self, ike: str, child: str | None, timeout_ms: int = 15000, loglevel: int = 1) -> list[str]:
        """Initiate and return charon's log lines; failures carry the relevant lines."""
        req: dict[str, Any] = {"ike": ike, "timeout": timeout_ms, "init-limits": "no", "loglevel": loglevel}
        if child:
            req["child"] = child
        lines: list[str] = []
        try:
            for msg in self._s.initiate(req):
                m = decode(msg)
                if "msg" in m:
                    lines.append(m["msg"])
        except vici.exception.CommandException as exc:
            raise TunnelError(explain_failure(ike, str(exc), lines)) from None
        return lines

    def terminate(self, ike: str | None = None, ike_id: int | None = None, timeout_ms: int = 5000,
                  force: bool = False) -> None:
        """Delete an IKE SA; `force`: destroy it at once, without waiting for the peer's answer."""
        req: dict[str, Any] = {"timeout": timeout_ms}
        if force:
            req["force"] = "yes"
        if ike_id is not None:
            req["ike-id"] = ike_id
        elif ike:
            req["ike"] = ike
        try:
            for _ in self._s.terminate(req):
                pass
        except vici.exception.CommandException as exc:
            if "no matching" not in str(exc):
                raise TunnelError(f"terminate {ike or ike_id}: {exc}") from None

    def redirect(self, ike_id: int, gateway: str) -> bool:
        """Send IKE SA `ike_id` an RFC 5685 REDIRECT to `gateway` (an address or FQDN): queued
        by charon, which skips a peer that did not announce REDIRECT_SUPPORTED (its log says
        so). False when no such SA is left."""
        try:
            self._s.redirect({"ike-id": ike_id, "gateway": gateway})
        except vici.exception.CommandException as exc:
            if "no matching" in str(exc):
                return False
            raise TunnelError(f"redirect IKE SA {ike_id} to {gateway}: {exc}") from None
        return True

    def rekey(self, child: str | None = None, ike: str | None = None) -> None:
        req: dict[str, Any] = {"child": child} if child else {"ike": ike}
        self._call("rekey", lambda: self._s.rekey(req))

    def rekey_sa(self, ike_id: int | None = None, child_id: int | None = None) -> None:
        """Rekey one SA by charon's unique id: a CHILD SA (`child_id`) or an IKE SA (`ike_id`)."""
        if (ike_id is None) == (child_id is None):
            raise ValueError("rekey_sa: give exactly one of ike_id and child_id")
        req: dict[str, Any] = {"child-id": child_id} if child_id is not None else {"ike-id": ike_id}
        self._call("rekey", lambda: self._s.rekey(req))

    def raw_sas(self, ike: str | None = None) -> Iterator[dict[str, Any]]:
        """list-sas replies as dicts (of connection `ike` only when given)."""
        for sa in self._s.list_sas({"ike": ike} if ike else None):
            yield decode(sa)

    def list_sas(self) -> list[IkeSaStatus]:
        out: list[IkeSaStatus] = []
        for entry in list(self.raw_sas()):
            for name, ike in entry.items():
                children = [
                    ChildSaStatus(
                        name=c.get("name", key),
                        state=c.get("state", "?"),
                        established_s=_int(c, "install-time"),
                        bytes_in=_int(c, "bytes-in"),
                        bytes_out=_int(c, "bytes-out"),
                        packets_in=_int(c, "packets-in"),
                        packets_out=_int(c, "packets-out"),
                        spi_in=c.get("spi-in", ""),
                        spi_out=c.get("spi-out", ""),
                        rekey_in_s=_int(c, "rekey-time") if "rekey-time" in c else None,
                    )
                    for key, c in ike.get("child-sas", {}).items()
                ]
                out.append(IkeSaStatus(
                    name=name, state=ike.get("state", "?"), established_s=_int(ike, "established"),
                    local=ike.get("local-host", ""), remote=ike.get("remote-host", ""), children=children,
                ))
        return out

    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = decode(self._s.stats())
        return stats


def explain_failure(ike: str, error: str, lines: list[str]) -> str:
    """Turn charon's log of a failed initiate into one clear sentence plus evidence."""
    text = "\n".join(lines)
    if "AUTHENTICATION_FAILED" in text or "authentication of" in text and "failed" in text:
        reason = "peer authentication failed (wrong pre-shared key or certificate?)"
    elif "NO_PROPOSAL_CHOSEN" in text:
        reason = "no proposal chosen: the peers share no IKE/ESP proposal"
    elif "TS_UNACCEPTABLE" in text:
        reason = "traffic selectors unacceptable: the peers' subnets do not match"
    elif "giving up after" in text or "retransmit" in text:
        reason = "peer does not answer (unreachable, or no charon listening)"
    else:
        reason = error
    tail = "\n".join(f"    {l}" for l in lines[-8:])
    return f"tunnel {ike} failed: {reason}\n  charon log:\n{tail}"


@contextmanager
def session(connect: Callable[[], socket.socket]) -> Iterator[ViciClient]:
    c = ViciClient(connect)
    try:
        yield c
    finally:
        c.close()
