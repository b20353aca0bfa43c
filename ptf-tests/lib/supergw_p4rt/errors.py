"""What the session raises, and the decoding of a Write's per-update p4.v1.Error details
(finsy's decoding is for its asyncio client and keeps only the failed updates; the spec's
one p4.Error per update, OK ones included, is what the negative tests check)."""

from __future__ import annotations

import grpc
from finsy.proto import p4r, rpc_code, rpc_status


class P4RuntimeClientError(RuntimeError):
    """The switch refused a request, did not answer, or closed the stream."""


def code_name(code: int) -> str:
    return rpc_code.Code.Name(code) if code in rpc_code.Code.values() else str(code)


class P4RuntimeWriteError(P4RuntimeClientError):
    """A Write failed with per-update p4.v1.Error details (RPC status UNKNOWN)."""

    def __init__(self, rpc_error: grpc.RpcError, errors: list[p4r.Error], n_updates: int) -> None:
        self.rpc_error = rpc_error
        self.errors = errors  # one per update, OK ones included (spec §12.2)
        self.n_updates = n_updates
        super().__init__(str(self))

    def failed(self) -> list[tuple[int, p4r.Error]]:
        return [(i, e) for i, e in enumerate(self.errors) if e.canonical_code != rpc_code.OK]

    def __str__(self) -> str:
        lines = [f"Write of {self.n_updates} update(s) failed:"]
        for i, e in self.failed():
            lines.append(f"  [{i}] {code_name(e.canonical_code)}: {e.message}")
        return "\n".join(lines)


def write_error(err: grpc.RpcError, n_updates: int) -> Exception:
    """`err` as a P4RuntimeWriteError when it carries p4.Error details, else `err` itself
    (a Write refused as a whole, e.g. PERMISSION_DENIED for a backup client)."""
    whole: Exception = err  # grpc ships no type information
    if not isinstance(err, grpc.Call) or err.code() != grpc.StatusCode.UNKNOWN:
        return whole
    status: rpc_status.Status | None = None
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            status = rpc_status.Status.FromString(value)
    if status is None or not status.details:
        return whole
    errors: list[p4r.Error] = []
    for detail in status.details:
        e = p4r.Error()
        if not detail.Unpack(e):
            return whole
        errors.append(e)
    return P4RuntimeWriteError(err, errors, n_updates)
