#!/usr/bin/env python3
"""Estimate the dispatcher's Tofino 1 memory from its tables, before bf-p4c has run.

Reads the Tofino-shaped P4Info (table sizes from p4src/common/size.p4, key and action
data widths from the TNA program) and applies the usual Tofino 1 packing rules per pipe:

- SRAM: 12 stages x 80 blocks of 1024 words x 128 bits; TCAM: 12 x 24 blocks of 512 x 44 bits.
- An exact-match entry takes key bits + 4 (version/valid) + the action selector bits
  + the action data when it fits immediate (<= 32 bits); entries pack into 128-bit
  words, an entry wider than a word across 2 to 4 of them, at the width that packs best
  (two 180-bit IPv6 entries in three words); hash ways get 25 % headroom for collisions.
- Wider action data goes to its own SRAM words (rounded up to 2^n bits per entry).
- A PACKETS_AND_BYTES counter cell takes a whole 128-bit word (64 + 64 bits); a register
  cell of W bits packs 128 / W to a word (stateful ALU memory, in the counters column); idle
  timeout adds one map RAM per 1024 x 4 entries (not counted as SRAM).
- A ternary or LPM table (bf-p4c puts LPM in TCAM unless told `@alpm`) takes
  ceil(key bits / 44) x ceil(entries / 512) TCAM blocks, and its action selector and
  immediate action data go to a ternary-indirection SRAM word per entry (rounded up to
  2^n bits, packed into 128-bit words); wider action data as for exact match.

This is an estimate; bf-p4c's `pipe/logs/mau.resources.log` is the real figure
(docs/deploy-tofino.md, "Resources"). Writes a markdown table:

    resources.py [--check] [P4INFO]     (default: p4src/tna/supergw.tofino-shape.p4info.txtpb)

`--check` (run by check.sh, so by `make p4`) also exits 1 when the tables need more SRAM
or TCAM than the pipe has, naming the largest, and warns above WARN_PERCENT: bf-p4c must
also place the tables in a chain of dependent stages, so a pipe nearly full by this count
will likely not compile.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

from finsy.proto import p4i
from google.protobuf import text_format

DEFAULT_P4INFO = Path(__file__).resolve().parent / "supergw.tofino-shape.p4info.txtpb"
WORD_BITS = 128
WORDS_PER_SRAM = 1024
SRAM_PER_STAGE = 80
TCAM_PER_STAGE = 24
TCAM_WIDTH_BITS = 44
TCAM_DEPTH = 512
STAGES = 12
OVERHEAD_BITS = 4
IMMEDIATE_MAX_BITS = 32
HASH_HEADROOM = 1.25
MAX_WIDE_WORDS = 4  # an exact-match entry spans at most this many 128-bit words
WARN_PERCENT = 85.0


@dataclass(frozen=True)
class TableCost:
    name: str
    entries: int
    key_bits: int
    action_data_bits: int
    match_srams: int
    action_srams: int
    counter_srams: int
    tcam_blocks: int = 0

    @property
    def srams(self) -> int:
        return self.match_srams + self.action_srams + self.counter_srams


def _srams(words: float) -> int:
    return max(1, math.ceil(words / WORDS_PER_SRAM)) if words > 0 else 0


def entries_per_word(entry_bits: int) -> float:
    """Exact-match entries per 128-bit word at the best width of 1..MAX_WIDE_WORDS words."""
    best = max((w * WORD_BITS // entry_bits) / w for w in range(1, MAX_WIDE_WORDS + 1))
    if best == 0:
        raise ValueError(f"an exact-match entry of {entry_bits} bits is wider than {MAX_WIDE_WORDS} words")
    return best


def table_cost(info: p4i.P4Info, table: p4i.Table) -> TableCost:
    actions = {a.preamble.id: a for a in info.actions}
    refs = [actions[r.id] for r in table.action_refs]
    data_bits = max((sum(p.bitwidth for p in a.params) for a in refs), default=0)
    key_bits = sum(f.bitwidth for f in table.match_fields)
    selector_bits = math.ceil(math.log2(len(refs))) if len(refs) > 1 else 0
    immediate = data_bits <= IMMEDIATE_MAX_BITS
    tcam = 0
    if key_bits == 0:
        # Keyless: only the default action, held in registers, no match RAM.
        match = 0
    elif any(f.match_type in (p4i.MatchField.TERNARY, p4i.MatchField.LPM) for f in table.match_fields):
        tcam = math.ceil(key_bits / TCAM_WIDTH_BITS) * math.ceil(table.size / TCAM_DEPTH)
        tind_bits = max(1, selector_bits + (data_bits if immediate else 0))
        slot = 1 << math.ceil(math.log2(tind_bits))
        match = _srams(table.size / max(1, WORD_BITS // slot))
    else:
        entry_bits = key_bits + OVERHEAD_BITS + selector_bits + (data_bits if immediate else 0)
        match = _srams(table.size / entries_per_word(entry_bits) * HASH_HEADROOM)
    action = 0
    if not immediate and key_bits:
        slot = 1 << math.ceil(math.log2(data_bits))
        action = _srams(table.size / max(1, WORD_BITS // slot))
    counter = _srams(table.size) if table.direct_resource_ids else 0
    return TableCost(str(table.preamble.name), int(table.size), key_bits, data_bits, match, action, counter, tcam)


def estimate(info: p4i.P4Info) -> list[TableCost]:
    costs = [table_cost(info, t) for t in info.tables]
    for c in info.counters:
        costs.append(TableCost(str(c.preamble.name), int(c.size), 0, 0, 0, 0, _srams(c.size)))
    for r in info.registers:
        per_word = max(1, WORD_BITS // r.type_spec.bitstring.bit.bitwidth)
        costs.append(TableCost(str(r.preamble.name), int(r.size), 0, 0, 0, 0, _srams(r.size / per_word)))
    return costs


def markdown(costs: list[TableCost]) -> str:
    rows = [
        "| object | entries | key bits | action data bits | SRAM: match | action data | counters | total | TCAM |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in costs:
        rows.append(
            f"| `{c.name.removeprefix('pipe.')}` | {c.entries} | {c.key_bits} | {c.action_data_bits} "
            f"| {c.match_srams} | {c.action_srams} | {c.counter_srams} | {c.srams} | {c.tcam_blocks} |"
        )
    total = sum(c.srams for c in costs)
    budget = SRAM_PER_STAGE * STAGES
    tcam = sum(c.tcam_blocks for c in costs)
    tcam_budget = TCAM_PER_STAGE * STAGES
    rows.append(
        f"| **total** | | | | | | | **{total}** of {budget} ({100 * total / budget:.1f} %) "
        f"| **{tcam}** of {tcam_budget} ({100 * tcam / tcam_budget:.1f} %) |"
    )
    rows.append("")
    rows.append("SRAM match of a ternary or LPM table is its ternary-indirection RAM.")
    return "\n".join(rows) + "\n"


def check(costs: list[TableCost]) -> tuple[list[str], list[str]]:
    """(errors, warnings) of the budget check: over the pipe's SRAM or TCAM is an error,
    over WARN_PERCENT of either a warning; each names the three largest objects."""
    errors: list[str] = []
    warnings: list[str] = []
    for what, used, budget, size in (
        ("SRAM", sum(c.srams for c in costs), SRAM_PER_STAGE * STAGES, lambda c: c.srams),
        ("TCAM", sum(c.tcam_blocks for c in costs), TCAM_PER_STAGE * STAGES, lambda c: c.tcam_blocks),
    ):
        top = ", ".join(f"{c.name.removeprefix('pipe.')} {size(c)}" for c in sorted(costs, key=size, reverse=True)[:3])
        line = f"{what}: {used} of {budget} blocks ({100 * used / budget:.1f} %); largest: {top}"
        if used > budget:
            errors.append(f"{line} -- does not fit one Tofino 1 pipe: shrink the tables in p4src/common/size.p4")
        elif 100 * used / budget > WARN_PERCENT:
            warnings.append(f"{line} -- above {WARN_PERCENT:.0f} %: bf-p4c may not place it")
    return errors, warnings


def main(argv: list[str]) -> int:
    checking = "--check" in argv
    args = [a for a in argv if a != "--check"]
    path = Path(args[0]) if args else DEFAULT_P4INFO
    info = p4i.P4Info()
    text_format.Parse(path.read_text(), info)
    costs = estimate(info)
    sys.stdout.write(markdown(costs))
    if not checking:
        return 0
    errors, warnings = check(costs)
    for w in warnings:
        print(f"p4 tna resources: WARNING {w}", file=sys.stderr)
    for e in errors:
        print(f"p4 tna resources: FAILED {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
