"""A narrow, typed etcd v3 KV client: ranges and transactions.

It speaks gRPC through aetcd's generated etcd bindings (`aetcd.rpc`) rather than through
`aetcd.Client`, because the client takes one host:port (a replica must reach any member
of the cluster), cannot limit a range (the event log is read a page at a time) and has no
type information (mypy --strict sees only this module's types). Everything that crosses
this module's boundary is a dataclass defined here.

Every call carries a deadline of `timeout_s`; an unreachable or silent etcd becomes
`EtcdUnavailable` naming the endpoints within that time, never a gRPC default hang. The
channel reconnects with a short backoff (0.1-1 s, not gRPC's default up to 120 s), so a
restarted member is used again at once.

With `tls` (etcd_tls.EtcdTls) the channel is TLS, with a client certificate when given;
handshake failures and PERMISSION_DENIED become errors that say what to fix.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import grpc
import grpc.aio
from aetcd import rpc as _rpc

from supergw_controller.etcd_tls import EtcdTls, explain, explain_denied

CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)
_UNREACHABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


class EtcdError(RuntimeError):
    """etcd answered with an error."""


class EtcdUnavailable(EtcdError):
    """No etcd member answered within the deadline."""


@dataclass(frozen=True)
class KV:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int


@dataclass(frozen=True)
class Put:
    key: bytes
    value: bytes
    lease: int = 0


@dataclass(frozen=True)
class Delete:
    """Delete `key`, or every key in [key, range_end) when range_end is given."""

    key: bytes
    range_end: bytes | None = None


@dataclass(frozen=True)
class Get:
    key: bytes
    range_end: bytes | None = None


Op = Put | Delete | Get

_TARGETS = {"create": "CREATE", "mod": "MOD", "version": "VERSION", "value": "VALUE"}
_FIELDS = {"create": "create_revision", "mod": "mod_revision", "version": "version", "value": "value"}


@dataclass(frozen=True)
class Compare:
    """key's `target` == value. A missing key has create/mod revision and version 0."""

    key: bytes
    target: Literal["create", "mod", "version", "value"]
    value: int | bytes


@dataclass(frozen=True)
class TxnResult:
    succeeded: bool
    revision: int
    gets: list[list[KV]]  # one list per Get op of the branch that ran, in order


def prefix_end(prefix: bytes) -> bytes:
    """The range end that covers every key starting with `prefix`."""
    b = bytearray(prefix)
    while b:
        if b[-1] < 0xFF:
            b[-1] += 1
            return bytes(b)
        b.pop()
    return b"\0"


def endpoint_scheme(endpoint: str) -> Literal["http", "https"] | None:
    """The scheme written in front of an endpoint, if any."""
    e = endpoint.strip()
    return "https" if e.startswith("https://") else "http" if e.startswith("http://") else None


def check_schemes(endpoints: Sequence[str], tls: bool) -> None:
    """https:// endpoints need TLS settings and http:// ones refuse them; ValueError says which."""
    for e in endpoints:
        scheme = endpoint_scheme(e)
        if scheme == "https" and not tls:
            raise ValueError(f"{e!r} is an https endpoint: add store.etcd.tls (cacert, and cert/key for a client certificate)")
        if scheme == "http" and tls:
            raise ValueError(f"{e!r} is a plain-text endpoint but store.etcd.tls is set: write https:// or host:port")


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """"host:port" (an http:// or https:// in front is accepted) -> (host, port); ValueError says what is wrong."""
    e = endpoint.strip().removeprefix("https://").removeprefix("http://").rstrip("/")
    host, sep, port_s = e.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_s.isdigit() or not 0 < int(port_s) < 65536:
        raise ValueError(f"{endpoint!r}: expected host:port, e.g. 127.0.0.1:2379")
    return host, int(port_s)


def grpc_target(endpoints: Sequence[str]) -> str:
    """One gRPC target for all endpoints: "host:port", or "ipv4:a:p,b:p" (any member will do)."""
    if not endpoints:
        raise ValueError("no etcd endpoints given")
    pairs = [split_endpoint(e) for e in endpoints]
    if len(pairs) == 1:
        host, port = pairs[0]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        addrs = [ipaddress.ip_address(h) for h, _ in pairs]
    except ValueError:
        raise ValueError(
            f"several etcd endpoints must be IP addresses (gRPC balances over a fixed address list): {list(endpoints)}"
        ) from None
    if len({a.version for a in addrs}) != 1:
        raise ValueError(f"etcd endpoints mix IPv4 and IPv6: {list(endpoints)}")
    if addrs[0].version == 4:
        return "ipv4:" + ",".join(f"{a}:{p}" for a, (_, p) in zip(addrs, pairs, strict=True))
    return "ipv6:" + ",".join(f"[{a}]:{p}" for a, (_, p) in zip(addrs, pairs, strict=True))


def _kv(m: Any) -> KV:
    return KV(
        bytes(m.key), bytes(m.value), int(m.create_revision), int(m.mod_revision), int(m.version), int(m.lease)
    )


def _compare(c: Compare) -> Any:
    msg = _rpc.Compare(key=c.key, result=_rpc.Compare.EQUAL, target=getattr(_rpc.Compare, _TARGETS[c.target]))
    setattr(msg, _FIELDS[c.target], c.value)
    return msg


def _op(op: Op) -> Any:
    if isinstance(op, Put):
        return _rpc.RequestOp(request_put=_rpc.PutRequest(key=op.key, value=op.value, lease=op.lease))
    if isinstance(op, Delete):
        req = _rpc.DeleteRangeRequest(key=op.key)
        if op.range_end is not None:
            req.range_end = op.range_end
        return _rpc.RequestOp(request_delete_range=req)
    req = _rpc.RangeRequest(key=op.key)
    if op.range_end is not None:
        req.range_end = op.range_end
    return _rpc.RequestOp(request_range=req)


def _first_key(ops: Sequence[Op]) -> bytes:
    return ops[0].key if ops else b""


class EtcdKV:
    def __init__(self, endpoints: Sequence[str], timeout_s: float, tls: EtcdTls | None = None) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        check_schemes(endpoints, tls is not None)
        self.endpoints = list(endpoints)
        self.timeout_s = timeout_s
        self.tls = tls
        target = grpc_target(self.endpoints)
        if tls is None:
            self.channel = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        else:
            opts = CHANNEL_OPTIONS + tls.channel_options()
            self.channel = grpc.aio.secure_channel(target, tls.credentials(), options=opts)
        self._kv = _rpc.KVStub(self.channel)

    async def close(self) -> None:
        await self.channel.close()

    def error(self, exc: grpc.aio.AioRpcError, what: str, key: bytes = b"") -> EtcdError:
        """The EtcdError for a failed call: unreachable, a TLS handshake refused, or denied, each
        with what to do (calls on other stubs of `channel` use it too)."""
        where = ", ".join(self.endpoints)
        details = str(exc.details())
        if exc.code() in _UNREACHABLE:
            hint = explain(details, self.tls)
            if hint and self.tls is not None:  # it answered, with a TLS refusal
                return EtcdUnavailable(f"etcd at {where} refused the TLS connection for {what} ({exc.code().name}: {details}): {hint}")
            return EtcdUnavailable(
                f"etcd at {where} did not answer {what} within {self.timeout_s:g} s ({exc.code().name}: {details}):"
                " check that etcd runs and is reachable there (store.etcd.endpoints), and that a majority of its"
                " members is up" + (f"; {hint}" if hint else "")
            )
        if exc.code() in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INVALID_ARGUMENT) and (
            "permission denied" in details or "user name" in details or "auth token" in details
        ):
            return EtcdError(f"etcd at {where} refused {what}: {details}: {explain_denied(details, self.tls, key)}")
        return EtcdError(f"etcd at {where} refused {what}: {exc.code().name}: {details}")

    async def range(
        self, key: bytes, range_end: bytes | None = None, *, limit: int = 0, descending: bool = False
    ) -> list[KV]:
        req = _rpc.RangeRequest(key=key, limit=limit)
        if range_end is not None:
            req.range_end = range_end
        if descending:
            req.sort_order = _rpc.RangeRequest.DESCEND
            req.sort_target = _rpc.RangeRequest.KEY
        try:
            resp = await self._kv.Range(req, timeout=self.timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise self.error(exc, f"a read of {key.decode(errors='replace')}", key) from None
        return [_kv(m) for m in resp.kvs]

    async def get(self, key: bytes) -> KV | None:
        found = await self.range(key)
        return found[0] if found else None

    async def txn(self, compare: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op] = ()) -> TxnResult:
        req = _rpc.TxnRequest(
            compare=[_compare(c) for c in compare],
            success=[_op(o) for o in success],
            failure=[_op(o) for o in failure],
        )
        try:
            resp = await self._kv.Txn(req, timeout=self.timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise self.error(exc, "a transaction", _first_key(success)) from None
        gets = [
            [_kv(m) for m in r.response_range.kvs]
            for r in resp.responses
            if r.WhichOneof("response") == "response_range"
        ]
        return TxnResult(bool(resp.succeeded), int(resp.header.revision), gets)
