#!/usr/bin/env python3
"""Estimate the dispatcher's Tofino 1 memory from its tables, before bf-p4c has run.

Reads the Tofino-shaped P4Info (table sizes from p4src/common/size.p4, key and action
data widths from the TNA program) and applies the usual Tofino 1 packing rules per pipe:

- SRAM: 12 stages x 80 blocks of 1024 words x 128 bits; TCAM: 12 x 24 blocks of 512 x 44 bits.
- An exact-match entry takes key bits + 4 (version/valid) + the action selector bits
  + the action data when it fits immediate (<= 32 bits); entries pack into 128-bit
  words; hash ways get 25 % headroom for collisions.
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

    resources.py [P4INFO]     (default: p4src/tna/supergw.tofino-shape.p4info.txtpb)
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
        per_word = max(1, WORD_BITS // entry_bits)
        match = _srams(table.size / per_word * HASH_HEADROOM)
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


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else DEFAULT_P4INFO
    info = p4i.P4Info()
    text_format.Parse(path.read_text(), info)
    sys.stdout.write(markdown(estimate(info)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
