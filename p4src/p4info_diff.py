#!/usr/bin/env python3
"""Semantic diff of two P4Info text files: exit 0 if equal, else print what differs, exit 1.

Objects are matched by kind and name (p4c's output order carries no meaning), so the
report reads like "table SupergwIngress.x.y: size: 1024 != 4096".

Usage: p4info_diff.py COMMITTED GENERATED
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from finsy.proto import p4i
from google.protobuf import json_format, text_format

# Top-level repeated fields whose entries carry a preamble with a unique name.
_WITH_PREAMBLE = (
    "tables",
    "actions",
    "action_profiles",
    "counters",
    "direct_counters",
    "meters",
    "direct_meters",
    "controller_packet_metadata",
    "value_sets",
    "registers",
    "digests",
)


class P4InfoError(Exception):
    pass


def load(path: Path) -> p4i.P4Info:
    try:
        text = path.read_text()
    except OSError as exc:
        raise P4InfoError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        return text_format.Parse(text, p4i.P4Info())
    except text_format.ParseError as exc:
        raise P4InfoError(f"{path}: not a P4Info text proto: {exc}") from exc


def _index(info: p4i.P4Info) -> dict[str, Any]:
    as_dict = json_format.MessageToDict(info, preserving_proto_field_name=True)
    out: dict[str, Any] = {}
    for field, value in as_dict.items():
        if field in _WITH_PREAMBLE:
            for obj in value:
                out[f"{field.rstrip('s')} {obj['preamble']['name']}"] = obj
        else:
            out[field] = value
    return out


def _walk(path: str, a: Any, b: Any, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            _walk(f"{path}.{key}" if path else key, a.get(key), b.get(key), out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _walk(f"{path}[{i}]", x, y, out)
    elif a != b:
        out.append(f"{path}: committed {a!r} != generated {b!r}")


def diff(committed: p4i.P4Info, generated: p4i.P4Info) -> list[str]:
    """Human-readable differences; empty when the two P4Infos are equivalent."""
    if not any(t.HasField("initial_default_action") for t in generated.tables):
        # p4c older than 1.2.4.x does not emit initial_default_action: compare the rest.
        committed = p4i.P4Info.FromString(committed.SerializeToString())
        for t in committed.tables:
            t.ClearField("initial_default_action")
    a, b = _index(committed), _index(generated)
    out: list[str] = []
    for key in sorted(set(a) | set(b)):
        if key not in b:
            out.append(f"{key}: only in the committed P4Info")
        elif key not in a:
            out.append(f"{key}: only in the generated P4Info")
        else:
            _walk(key, a[key], b[key], out)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        committed, generated = (load(Path(p)) for p in argv)
    except P4InfoError as exc:
        print(f"p4info_diff: error: {exc}", file=sys.stderr)
        return 2
    problems = diff(committed, generated)
    if problems:
        print(f"p4info_diff: {argv[0]} differs from what p4c generated ({argv[1]}):", file=sys.stderr)
        for line in problems:
            print(f"  {line}", file=sys.stderr)
        return 1
    print(f"p4info_diff: {argv[0]} matches the p4c output")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
