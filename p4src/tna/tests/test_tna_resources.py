"""resources.py: the Tofino 1 SRAM/TCAM estimate and its budget check (`make p4` runs it).

The committed program must fit one pipe; the same tables sized past the pipe must fail the
check naming the largest table, and an entry wider than four words cannot be placed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from finsy.proto import p4i
from google.protobuf import text_format
from tna_scripts import TNA, load

SHAPE = TNA / "supergw.tofino-shape.p4info.txtpb"


resources = load("resources")


def _shape(**sizes: int) -> p4i.P4Info:
    """The committed Tofino-shaped P4Info with some tables (by their last name) resized."""
    info = p4i.P4Info()
    text_format.Parse(SHAPE.read_text(), info)
    for t in info.tables:
        short = t.preamble.name.rsplit(".", 1)[-1]
        if short in sizes:
            t.size = sizes[short]
    return info


@pytest.mark.parametrize(
    ("bits", "per_word"),
    [(64, 2.0), (128, 1.0), (129, 0.75), (180, 2 / 3), (256, 0.5), (512, 0.25)],
)
def test_wide_entries_pack_at_their_best_width(bits: int, per_word: float) -> None:
    assert resources.entries_per_word(bits) == pytest.approx(per_word)


def test_an_entry_wider_than_four_words_is_refused() -> None:
    with pytest.raises(ValueError, match="wider than 4 words"):
        resources.entries_per_word(513)


def test_the_committed_program_fits_a_pipe() -> None:
    errors, _ = resources.check(resources.estimate(_shape()))
    assert errors == []


def test_ipv6_tables_pack_two_entries_in_three_words() -> None:
    costs = {c.name.rsplit(".", 1)[-1]: c for c in resources.estimate(_shape(learned_ip6s=3 * 1024))}
    # 176-bit key + 4 bits: two entries per three words, 25 % hash headroom -> 5.625 words.. 6 SRAMs
    assert costs["learned_ip6s"].match_srams == 6


def test_tables_past_the_pipe_fail_naming_the_largest() -> None:
    errors, _ = resources.check(resources.estimate(_shape(learned_ip6s=1 << 20)))
    assert len(errors) == 1
    assert errors[0].startswith("SRAM:") and "learned_ip6s" in errors[0] and "does not fit" in errors[0]


def test_check_mode_exit_status(tmp_path: Path) -> None:
    ok = subprocess.run([sys.executable, str(TNA / "resources.py"), "--check"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    big = tmp_path / "big.txtpb"
    big.write_text(text_format.MessageToString(_shape(host_ip6s=1 << 20)))
    bad = subprocess.run([sys.executable, str(TNA / "resources.py"), "--check", str(big)], capture_output=True, text=True)
    assert bad.returncode == 1
    assert "FAILED SRAM" in bad.stderr and "host_ip6s" in bad.stderr
