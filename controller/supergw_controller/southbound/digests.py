"""Who batches the learn digests: the switch or the controller (`learning.digest_batching`).

Many hosts at once (a cold start) must cost one write per batch of `learning.digest_list_size`
hosts, and a lone host must wait `learning.digest_timeout_ms` at most. Either side can make the
batches, from the same two numbers:

- the switch, with its DigestEntry lists (`max_list_size`, `max_timeout_ns`): one digest
  message and one ack per list. Only for a switch that sends a list `max_timeout_ns` after its
  first digest, as the eBPF switch does (a timer armed by that digest,
  `targets/ebpf/internal/p4rt/digest.go`). The controller then takes the lists already waiting
  and waits no more: a lone host waits the switch's timeout only.
- the controller (`switch.gather_lists`): the switch sends each digest at once, and the
  controller waits `digest_timeout_ms` for more. Two messages per host instead of a share of
  one, but a lone host is on time on any switch: P4Runtime servers built on PI (BMv2's
  simple_switch_grpc) sweep their lists every 100 ms whatever `max_timeout_ns` says and send
  one on the second sweep, 100-200 ms after its first digest.

`auto` decides from the pipeline the controller pushes: a device config (a BMv2 JSON, a Tofino
binary) goes to a switch that loads its program through P4Runtime, and those servers are built
on PI; the eBPF switch has its program built in and takes none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from finsy import P4DigestEntry

from supergw_controller.config import DigestBatching, LearningConfig
from supergw_controller.southbound import entities as ent


@dataclass(frozen=True, slots=True)
class DigestPlan:
    """The switch's digest config and the controller's gathering, decided together."""

    batcher: DigestBatching  # SWITCH or CONTROLLER, never AUTO
    why: str  # what decided it, for the log
    max_list_size: int  # the switch's DigestEntry config
    max_timeout_ns: int
    gather_items: int  # gather_lists: hosts per batch, and how long it waits for more
    gather_wait_s: float

    def entries(self, *, ip6: bool) -> list[P4DigestEntry]:
        """The learn digest's config, and the IPv6 learn digest's when the LAN is dual-stack."""
        out = [ent.learn_digest(self.max_list_size, self.max_timeout_ns)]
        if ip6:
            out.append(ent.learn_ip6_digest(self.max_list_size, self.max_timeout_ns))
        return out

    def describe(self) -> str:
        if self.batcher is DigestBatching.SWITCH:
            how = (f"the switch batches them (lists of up to {self.max_list_size} hosts, sent at the latest "
                   f"{self.max_timeout_ns / 1e6:g} ms after their first)")
        else:
            how = (f"the switch sends each at once and the controller gathers them (batches of up to "
                   f"{self.gather_items} hosts, learned at the latest {self.gather_wait_s * 1e3:g} ms after their first)")
        return f"learn digests: {how}; learning.digest_batching {self.why}"


def digest_plan(learning: LearningConfig, device_config: Path | None) -> DigestPlan:
    """Who batches, from `learning.digest_batching` and, for `auto`, `pipeline.device_config`."""
    batcher = learning.digest_batching
    if batcher is DigestBatching.AUTO:
        if device_config is None:
            batcher, why = DigestBatching.SWITCH, "auto: no pipeline.device_config (the eBPF switch)"
        else:
            batcher, why = DigestBatching.CONTROLLER, "auto: pipeline.device_config given (a PI-based switch: BMv2, Tofino)"
    else:
        why = f"{batcher.value} (configured)"
    size, timeout_ms = learning.digest_list_size, learning.digest_timeout_ms
    if batcher is DigestBatching.SWITCH:
        return DigestPlan(batcher, why, size, int(timeout_ms * 1e6), size, 0.0)
    return DigestPlan(batcher, why, 1, 0, size, timeout_ms / 1000)
