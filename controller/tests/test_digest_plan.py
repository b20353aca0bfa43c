"""Who batches the learn digests (`learning.digest_batching`, southbound/digests.py): the
switch where it sends a list on time (the eBPF switch), the controller where it does not
(PI-based servers: BMv2), from one pair of numbers; and the gathering of whatever comes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from corekit import make_config
from supergw_proto import p4constants as pc
from supergw_controller.config import ConfigError, DigestBatching, LearningConfig
from supergw_controller.southbound.digests import digest_plan
from supergw_controller.southbound.switch import gather_lists

BMV2_JSON = Path("/etc/supergw/supergw.json")  # any device config: only whether there is one counts
EXAMPLE = Path(__file__).resolve().parents[1] / "example-config.yaml"


def switch_config(plan_entries: list[Any]) -> list[tuple[str, int, int]]:
    return [(e.digest_id, e.max_list_size, e.max_timeout_ns) for e in plan_entries]


def test_auto_lets_the_switch_batch_when_the_pipeline_has_no_device_config() -> None:
    """The eBPF switch (program built in, no device config) sends a list max_timeout_ns after
    its first digest: it batches, and the controller takes what waits without waiting more."""
    plan = digest_plan(LearningConfig(), None)
    assert plan.batcher is DigestBatching.SWITCH
    assert switch_config(plan.entries(ip6=True)) == [(pc.DIGEST_LEARN_DIGEST, 256, 2_000_000),
                                                     (pc.DIGEST_LEARN_IP6_DIGEST, 256, 2_000_000)]
    assert (plan.gather_items, plan.gather_wait_s) == (256, 0.0)  # a lone host waits the switch's 2 ms only
    assert "switch batches" in plan.describe() and "no pipeline.device_config" in plan.describe()


def test_auto_has_a_pi_based_switch_send_each_digest_at_once_and_the_controller_gather() -> None:
    """A device config (BMv2's JSON, a Tofino binary) goes to a PI-based server, which sends a
    list 100-200 ms late whatever max_timeout_ns says: every digest at once, and the controller
    waits digest_timeout_ms for more."""
    plan = digest_plan(LearningConfig(), BMV2_JSON)
    assert plan.batcher is DigestBatching.CONTROLLER
    assert switch_config(plan.entries(ip6=False)) == [(pc.DIGEST_LEARN_DIGEST, 1, 0)]
    assert (plan.gather_items, plan.gather_wait_s) == (256, 0.002)
    assert "controller gathers" in plan.describe() and "device_config given" in plan.describe()


@pytest.mark.parametrize(("batching", "device_config", "want"), [
    (DigestBatching.SWITCH, BMV2_JSON, DigestBatching.SWITCH),  # the operator knows better than auto
    (DigestBatching.CONTROLLER, None, DigestBatching.CONTROLLER),
])  # fmt: skip
def test_a_configured_batcher_overrides_auto(batching: DigestBatching, device_config: Path | None,
                                             want: DigestBatching) -> None:
    plan = digest_plan(LearningConfig(digest_batching=batching), device_config)
    assert plan.batcher is want and "(configured)" in plan.describe()


@pytest.mark.parametrize("device_config", [None, BMV2_JSON])
def test_either_batcher_uses_the_one_pair_of_numbers(device_config: Path | None) -> None:
    """digest_list_size and digest_timeout_ms are the batch, whoever makes it."""
    plan = digest_plan(LearningConfig(digest_list_size=64, digest_timeout_ms=5), device_config)
    assert plan.gather_items == 64
    if plan.batcher is DigestBatching.SWITCH:
        assert (plan.max_list_size, plan.max_timeout_ns, plan.gather_wait_s) == (64, 5_000_000, 0.0)
    else:
        assert (plan.max_list_size, plan.max_timeout_ns, plan.gather_wait_s) == (1, 0, 0.005)


def test_no_timeout_is_every_digest_at_once_on_either_side() -> None:
    plan = digest_plan(LearningConfig(digest_timeout_ms=0), None)
    assert switch_config(plan.entries(ip6=False)) == [(pc.DIGEST_LEARN_DIGEST, 1, 0)]
    assert plan.gather_wait_s == 0


def test_the_config_takes_the_three_names_and_refuses_others(tmp_path: Path) -> None:
    assert make_config(tmp_path).learning.digest_batching is DigestBatching.AUTO
    for name in ("auto", "switch", "controller"):
        assert make_config(tmp_path, learning={"digest_batching": name}).learning.digest_batching == name
    with pytest.raises(ConfigError, match=r"learning\.digest_batching"):
        make_config(tmp_path, learning={"digest_batching": "ebpf"})
    with pytest.raises(ConfigError, match=r"learning\.digest_batching"):
        make_config(tmp_path, learning={"digest_batching": True})


def test_the_example_config_documents_the_default() -> None:
    learning = yaml.safe_load(EXAMPLE.read_text())["learning"]
    assert learning["digest_batching"] == LearningConfig().digest_batching.value


def test_the_southbound_runs_the_plan_of_its_pipeline(tmp_path: Path) -> None:
    from corekit import P4INFO, RecordingSession
    from supergw_controller.southbound.switch import Southbound

    (tmp_path / "supergw.json").write_text("{}")
    for pipeline, want in (({"p4info": str(P4INFO)}, DigestBatching.SWITCH),
                           ({"p4info": str(P4INFO), "device_config": "supergw.json"}, DigestBatching.CONTROLLER)):
        s = Southbound(make_config(tmp_path, pipeline=pipeline), session=RecordingSession())
        assert s.digests.batcher is want


class Digests(list[int]):
    """A digest list of `n` hosts, as finsy gives it (only its length counts here)."""


async def _stream(q: asyncio.Queue[Any]) -> Any:
    while True:
        yield await q.get()


async def test_the_switchs_lists_are_taken_whole_and_at_once() -> None:
    """When the switch batches (gather wait 0): a list alone is learned at once (it has waited
    on the switch already), and the lists already waiting are gathered whole, the batch ending
    with the list that fills it."""
    q: asyncio.Queue[Any] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    batches = gather_lists(_stream(q), 256, 0.0, 100)
    q.put_nowait(Digests(range(3)))
    started = loop.time()
    first = await anext(batches)
    assert [len(d) for d in first] == [3] and loop.time() - started < 0.05
    for n in (200, 100, 256, 1):
        q.put_nowait(Digests(range(n)))
    await asyncio.sleep(0.01)
    assert [len(d) for d in await anext(batches)] == [200, 100]  # 300 hosts: no list is split
    assert [len(d) for d in await anext(batches)] == [256]
    assert [len(d) for d in await anext(batches)] == [1]
    await batches.aclose()
