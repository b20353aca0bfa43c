"""A small synchronous P4Runtime client shared by the PTF library and the benchmarks:
canonical values, P4Info names, entity builders, per-update error decoding and one
session (stream, arbitration, Write/Read, pipeline). Knows nothing about supergw.
Protos come from finsy (`finsy.proto`), as in the controller."""

from .client import STREAM_KINDS, P4RuntimeClient, StreamKind
from .entities import DELETE, INSERT, MODIFY, CounterValue, EntityBuilder, entity, pipeline_config, update
from .errors import P4InfoLookupError, P4RuntimeClientError, P4RuntimeWriteError, code_name, write_error
from .p4info import P4InfoIndex, load_p4info
from .values import Value, decode, encode

__all__ = [
    "DELETE",
    "INSERT",
    "MODIFY",
    "STREAM_KINDS",
    "CounterValue",
    "EntityBuilder",
    "P4InfoIndex",
    "P4InfoLookupError",
    "P4RuntimeClient",
    "P4RuntimeClientError",
    "P4RuntimeWriteError",
    "StreamKind",
    "Value",
    "code_name",
    "decode",
    "encode",
    "entity",
    "load_p4info",
    "pipeline_config",
    "update",
    "write_error",
]
