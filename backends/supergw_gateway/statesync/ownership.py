"""Which SAs are this gateway's own: the replicator's sweep (what a takeover still has to
rekey) and the client report (`ClientSession.esp_renewed`) read it the same way."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# A CHILD SA carries outbound ESP in these states; one being rekeyed still does, until its
# successor is installed (make-before-break).
CARRYING = frozenset({"INSTALLING", "INSTALLED", "UPDATING", "REKEYING"})


@dataclass(frozen=True)
class SpiOwnership:
    """What marks an SA as this gateway's own: its IKE SPI label and its ESP SPI range."""

    ike_label: int
    ike_mask: int
    esp_min: int
    esp_max: int

    def ike_is_ours(self, spi_hex: str) -> bool:
        return self.ike_mask == 0 or (int(spi_hex, 16) & self.ike_mask) == self.ike_label

    def esp_is_ours(self, spi_hex: str) -> bool:
        return self.esp_min <= int(spi_hex, 16) <= self.esp_max

    def foreign_children(self, children: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The CHILD SAs (VICI `list-sas` entries) carrying ESP whose inbound SPI is another
        gateway's: taken over and not rekeyed here yet, their outbound sequence numbers are the
        old gateway's (ESP sent on them would be a replay to the client)."""
        return [c for c in children if c.get("state") in CARRYING and not self.esp_is_ours(str(c.get("spi-in", "0")))]
