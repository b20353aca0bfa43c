"""One set of failover timings: the controller's `timing:` is the one source. Its defaults
are what example-config.yaml documents, what the agents run on until their controller
answers (the protocol defaults of `supergw_proto.reports`), and what `make run` uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from supergw_controller.config import TimingConfig
from supergw_proto.reports import AgentTiming

EXAMPLE = Path(__file__).resolve().parents[1] / "example-config.yaml"


def test_example_config_documents_the_defaults() -> None:
    timing: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())["timing"]
    defaults = TimingConfig()
    for key in ("report_interval_ms", "heartbeat_interval_ms", "missed_heartbeats"):
        assert timing[key] == getattr(defaults, key), key


def test_agents_start_on_the_controllers_defaults_and_are_told_the_rest() -> None:
    from supergw_gateway.agent import Timing

    assert TimingConfig().agent_timing() == AgentTiming() == Timing().current
    told = TimingConfig(heartbeat_interval_ms=40, missed_heartbeats=5, report_interval_ms=250).agent_timing()
    assert told == AgentTiming(heartbeat_interval_ms=40, missed_heartbeats=5, report_interval_ms=250)
    assert AgentTiming.from_header(told.header()) == told


def test_emulation_uses_the_defaults() -> None:
    from topologies import configs

    d = TimingConfig()
    assert (configs.HEARTBEAT_MS, configs.MISSED_HEARTBEATS, configs.REPORT_MS) == (
        d.heartbeat_interval_ms, d.missed_heartbeats, d.report_interval_ms)


def test_every_answer_to_an_agent_tells_the_timing() -> None:
    from fastapi.testclient import TestClient

    from supergw_controller.api import API_PREFIX, create_app
    from supergw_proto.reports import TIMING_HEADER
    from test_api import FakeCore, agent, make_config, report_body

    cfg = make_config()
    cfg = cfg.model_copy(update={"timing": TimingConfig(heartbeat_interval_ms=40, missed_heartbeats=5)})
    client = TestClient(create_app(FakeCore(cfg), cfg))
    want = AgentTiming(heartbeat_interval_ms=40, missed_heartbeats=5, report_interval_ms=500)
    for path, body in (("report", report_body("gw2")), ("heartbeat", {"gateway": "gw2", "timestamp": 1.0})):
        r = client.post(f"{API_PREFIX}/gateways/gw2/{path}", json=body, headers=agent("gw2"))
        assert r.status_code == 204 and r.content == b""
        assert AgentTiming.from_header(r.headers[TIMING_HEADER]) == want
    refused = client.post(f"{API_PREFIX}/gateways/gw2/report", json=report_body("gw1"), headers=agent("gw2"))
    assert refused.status_code == 403 and TIMING_HEADER not in refused.headers
    doc = client.get("/openapi.json").json()["paths"][f"{API_PREFIX}/gateways/{{name}}/report"]["post"]
    assert TIMING_HEADER in doc["responses"]["204"]["headers"]
