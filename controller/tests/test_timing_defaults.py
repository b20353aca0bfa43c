"""One set of failover timings: the controller's defaults are what example-config.yaml
documents, what `make run` generates for the controller and the agents, and what the agent
assumes on its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from supergw_controller.config import TimingConfig

EXAMPLE = Path(__file__).resolve().parents[1] / "example-config.yaml"


def test_example_config_documents_the_defaults() -> None:
    timing: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())["timing"]
    defaults = TimingConfig()
    for key in ("report_interval_ms", "heartbeat_interval_ms", "missed_heartbeats"):
        assert timing[key] == getattr(defaults, key), key


def test_emulation_and_agent_use_the_defaults() -> None:
    from supergw_gateway.config import Controller
    from topologies import configs

    d = TimingConfig()
    assert (configs.HEARTBEAT_MS, configs.MISSED_HEARTBEATS, configs.REPORT_MS) == (
        d.heartbeat_interval_ms, d.missed_heartbeats, d.report_interval_ms)
    agent = Controller(url="http://192.0.2.1:8700", token="agent-token-0123456789")
    assert (agent.heartbeat_interval_ms, agent.report_interval_ms) == (d.heartbeat_interval_ms, d.report_interval_ms)
