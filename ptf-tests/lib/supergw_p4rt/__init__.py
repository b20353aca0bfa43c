"""A synchronous P4Runtime session over finsy, shared by the PTF library and the benchmarks.

finsy builds, encodes and decodes every entity (`P4TableEntry(...)`, `P4Schema`,
`p4values`); what this package adds is what finsy lacks for blocking callers: one session
(stream, arbitration, Write/Read, pipeline, packet-out/in, digests, idle timeouts) and the
spec's one p4.Error per update. Knows nothing about supergw; the controller uses finsy's
asyncio `Switch` instead.
"""

from .errors import P4RuntimeClientError, P4RuntimeWriteError, code_name, write_error
from .schema import DELETE, INSERT, MODIFY, Entity, encode, load_schema, update
from .session import STREAM_KINDS, P4RuntimeSession, StreamKind

__all__ = [
    "DELETE",
    "INSERT",
    "MODIFY",
    "STREAM_KINDS",
    "Entity",
    "P4RuntimeClientError",
    "P4RuntimeSession",
    "P4RuntimeWriteError",
    "StreamKind",
    "code_name",
    "encode",
    "load_schema",
    "update",
    "write_error",
]
