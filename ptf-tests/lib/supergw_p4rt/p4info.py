"""P4Info loading and lookup by name: the full name or any unique dotted suffix, as
p4c's PTF base test and p4runtime-shell resolve names. IDs are never hard-coded."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from finsy.proto import p4i
from google.protobuf import text_format
from google.protobuf.message import DecodeError

from .errors import P4InfoLookupError

TEXT_SUFFIXES = (".txt", ".txtpb", ".pbtxt", ".textproto")

KINDS = (
    "tables",
    "actions",
    "counters",
    "direct_counters",
    "meters",
    "direct_meters",
    "digests",
    "controller_packet_metadata",
    "action_profiles",
    "registers",
)


def load_p4info(path: Path) -> p4i.P4Info:
    """A P4Info from a text-format file (by suffix) or a binary one; a file that does not
    parse raises ValueError naming it."""
    info = p4i.P4Info()
    try:
        if path.suffix in TEXT_SUFFIXES:
            text_format.Parse(path.read_text(encoding="utf-8"), info)
        else:
            info.ParseFromString(path.read_bytes())
    except (text_format.ParseError, DecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a P4Info: {exc}") from None
    return info


class P4InfoIndex:
    """Look P4Info objects up by full name or by any unique dotted suffix."""

    def __init__(self, info: p4i.P4Info) -> None:
        self.info = info
        self._by_name: dict[tuple[str, str], Any] = {}
        self._by_id: dict[int, Any] = {}
        for kind in KINDS:
            objs = list(getattr(info, kind))
            full = {obj.preamble.name for obj in objs}
            counts: Counter[str] = Counter()
            suffixes: dict[str, Any] = {}
            for obj in objs:
                self._by_name[(kind, obj.preamble.name)] = obj
                self._by_id[obj.preamble.id] = obj
                parts = obj.preamble.name.split(".")
                for i in range(1, len(parts)):
                    suffix = ".".join(parts[i:])
                    if suffix not in full:
                        counts[suffix] += 1
                        suffixes[suffix] = obj
            for suffix, obj in suffixes.items():
                if counts[suffix] == 1:
                    self._by_name[(kind, suffix)] = obj

    def get(self, kind: str, name: str) -> Any:
        """The P4Info object of `kind` (a P4Info field name, e.g. "tables") named `name`."""
        try:
            return self._by_name[(kind, name)]
        except KeyError:
            raise P4InfoLookupError(f"no unique {kind[:-1]} named {name!r} in the P4Info") from None

    def id(self, kind: str, name: str) -> int:
        return int(self.get(kind, name).preamble.id)

    def by_id(self, obj_id: int) -> Any:
        try:
            return self._by_id[obj_id]
        except KeyError:
            raise P4InfoLookupError(f"no object with id {obj_id:#x} in the P4Info") from None

    def table(self, name: str) -> p4i.Table:
        table: p4i.Table = self.get("tables", name)
        return table

    def action(self, name: str) -> p4i.Action:
        action: p4i.Action = self.get("actions", name)
        return action

    def digest(self, name: str) -> p4i.Digest:
        digest: p4i.Digest = self.get("digests", name)
        return digest

    def match_field(self, table: str, field: str) -> p4i.MatchField:
        for mf in self.table(table).match_fields:
            if mf.name == field:
                found: p4i.MatchField = mf
                return found
        raise P4InfoLookupError(f"table {table!r} has no match field {field!r}")

    def param(self, action: str, param: str) -> p4i.Action.Param:
        for p in self.action(action).params:
            if p.name == param:
                found: p4i.Action.Param = p
                return found
        raise P4InfoLookupError(f"action {action!r} has no param {param!r}")

    def metadata(self, header: str) -> dict[str, p4i.ControllerPacketMetadata.Metadata]:
        return {m.name: m for m in self.get("controller_packet_metadata", header).metadata}

    def digest_members(self, digest_id: int) -> list[str]:
        """Member names of a digest's struct, in wire order."""
        digest: p4i.Digest = self.by_id(digest_id)
        struct = self.info.type_info.structs[digest.type_spec.struct.name]
        return [m.name for m in struct.members]
