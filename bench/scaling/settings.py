"""What a bench/scaling run is asked to do (`Settings`), the paper's fixed inputs, and the
two-site file's keys every boot of the run sets (`boot_changes`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.scaling.emulation import BenchError

DEFAULT_SUITE = "aes128gcm16-x25519"  # supergw_gateway.config.DEFAULT_ESP_PROPOSAL, what users get
OTHER_SUITE = "aes128-sha256-x25519"  # AES-CBC + HMAC-SHA-256: the paper's "cipher + HMAC" kind of tunnel
SUITE_LABEL = {DEFAULT_SUITE: "gcm", OTHER_SUITE: "cbc-sha256"}
BIG_FRAME, SMALL_FRAME = 1408, 64
# §4.2: K = 256 virtual MACs, h(m) = base | (m % K) (our identity hash), the hosts' MACs
# 00:00:03:00:00:18 ... :f7 (mac_step 1: one host per bucket), and the paper's equal partition
# of the virtual MACs over the gateways (Algorithm 1: interleaved, dispatch.partition_period K).
PAPER_K = 256
PAPER_DISPATCH = {"hash": "identity", "partition_period": PAPER_K}
PAPER_MAC_STEP = 1
# Fig. 4 runs with redistribution off, as the paper's §4.2 did: the shipped policy acts only
# when max/mean exceeds its threshold, and max/mean never exceeds N (<= 4) — so it never acts.
# Failover stays on (it is health, not a policy), and any move during a search is reported.
REDISTRIBUTION_OFF: dict[str, Any] = {"threshold": 1000.0}


@dataclass(frozen=True)
class Settings:
    ns: list[int]
    frames: list[int]
    suites: list[str]
    quota_percent: float  # each gateway's CPU quota, % of one core: the capacity under test
    realtime: bool  # gateways' processes SCHED_FIFO within a real-time budget of the quota (else CFS quota)
    trials: int  # Fig. 4: zero-loss searches per (suite, frame, N)
    control_trials: int  # Fig. 4: searches of the skewed partition per N
    quota_factors: tuple[float, ...]  # Fig. 4 at N = 1: capacity at these multiples of the quota too
    skew: float  # the skewed partition: gateway 1 holds this many times its even share
    probe_s: float
    resolution: float
    max_probes: int
    fig5_seeds: list[int]  # Algorithm 5's random draw: one run per seed
    fig5_paper_s: float  # the longest a run of the paper's policy lasts
    fig5_greedy_s: float  # the longest a run of our policy lasts
    fig5_load: float  # offered in Fig. 5, a fraction of Fig. 4's T(3)
    soak_s: float
    base: Path
    fig4: bool = True
    fig5: bool = True
    results_dir: Path | None = None  # None: bench/results
    quick: bool = False
    notes: list[str] = field(default_factory=list)
    t3_pps: float | None = None  # Fig. 5's basis when Fig. 4 is not run


def paper_hosts(base: Path) -> dict[str, Any]:
    """The topology file's `simulated_hosts:` with §4.2's MAC step (the rest as the file has it)."""
    data = yaml.safe_load(base.read_text())
    hosts = data.get("simulated_hosts") if isinstance(data, dict) else None
    if not isinstance(hosts, dict):
        raise BenchError(f"{base}: no simulated_hosts mapping, nothing to offer load with")
    return hosts | {"mac_step": PAPER_MAC_STEP}


def boot_changes(s: Settings, n: int, suite: str, rebalancer: dict[str, Any]) -> dict[str, Any]:
    """The two-site file's keys a boot sets: N pairs of UML gateways (kernel ESP in their own
    guest kernels) each under the run's CPU quota, §4.2's hosts, K and dispatch, the ESP suite
    and both controllers' `rebalancer:` section."""
    return {
        "gateways": n,
        "gateway_backend": "uml",
        "gateway_cpu_percent": s.quota_percent,
        "buckets": PAPER_K,
        "dispatch": PAPER_DISPATCH,
        "simulated_hosts": paper_hosts(s.base),
        "rebalancer": rebalancer,
        **({} if suite == DEFAULT_SUITE else {"esp_proposals": [suite]}),
    }
