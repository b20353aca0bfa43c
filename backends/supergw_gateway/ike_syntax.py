"""strongSwan proposal strings: the syntax check and the defaults every connection shares."""

from __future__ import annotations

import re

DEFAULT_IKE_PROPOSAL = "aes128gcm16-prfsha256-x25519"
DEFAULT_ESP_PROPOSAL = "aes128gcm16-x25519"
_PROPOSAL_RE = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


def check_proposals(v: list[str]) -> list[str]:
    """`v` unchanged, or ValueError naming the first proposal that is not strongSwan syntax."""
    for p in v:
        if not _PROPOSAL_RE.fullmatch(p):
            raise ValueError(f"invalid proposal {p!r} (strongSwan form like {DEFAULT_ESP_PROPOSAL})")
    return v
