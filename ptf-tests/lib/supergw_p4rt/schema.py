"""The P4Info as finsy's `P4Schema`, and entities encoded by finsy into P4Runtime updates.

Names, values and IDs are finsy's business (`P4TableEntry(...).encode(schema)`); this
module only loads the schema with an error that names the file, and wraps an encoded
entity into an `Update`. An entity may also be given already encoded (`p4r.Entity`): the
negative tests alter the encoded message to send what finsy would refuse to build.
"""

from __future__ import annotations

from pathlib import Path

from finsy.p4entity import P4Entity
from finsy.p4schema import P4Schema
from finsy.proto import p4r
from google.protobuf import text_format

INSERT = p4r.Update.INSERT
MODIFY = p4r.Update.MODIFY
DELETE = p4r.Update.DELETE

Entity = P4Entity | p4r.Entity
"""A finsy entity (encoded against the schema when sent) or an encoded one (sent as is)."""


def load_schema(p4info: Path, device_config: bytes = b"") -> P4Schema:
    """finsy's schema of a text-format P4Info file, with the target's device config (the
    BMv2 JSON; empty for the eBPF target) for the pipeline push and its cookie. A file that
    does not parse raises ValueError naming it."""
    try:
        return P4Schema(p4info, device_config)
    except (text_format.ParseError, UnicodeDecodeError) as exc:
        raise ValueError(f"{p4info}: not a P4Info: {exc}") from None


def encode(entity: Entity, schema: P4Schema) -> p4r.Entity:
    return entity if isinstance(entity, p4r.Entity) else entity.encode(schema)


def update(kind: p4r.Update.Type.ValueType, entity: Entity, schema: P4Schema) -> p4r.Update:
    return p4r.Update(type=kind, entity=encode(entity, schema))
