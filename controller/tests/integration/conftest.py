"""Integration tests of the controller: real switch, real P4Runtime, namespaces.

Every module that has a `TOPOLOGY` runs once per switch, the eBPF target and BMv2
(`SGW_SWITCH=ebpf|bmv2` runs one), with the same test bodies: test ids end in `[ebpf]` /
`[bmv2]`. A test that needs what one switch cannot do is marked
`@pytest.mark.not_on("bmv2", "what BMv2 lacks")` and skipped there with that reason.

The harness (topology, controller processes, heartbeat sender) lives in
`sgwctl_harness.py` / `sgwctl_topo.py` under unique module names, so that test modules
can import it without depending on which `conftest` module pytest loaded last; each test
module describes its topology as data (`TOPOLOGY = TopologySpec(...)`) and gets it,
built and torn down once per module, from the `setup` fixture below. Everything in this
directory is marked `integration`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sgwctl_harness import Setup, TopologySpec, make_setup, switches


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "not_on(switch, reason): skip the test on that switch, saying why")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)



@pytest.fixture(scope="module", params=switches())
def setup(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """The module's `TOPOLOGY`: switch namespace, hosts, gateways, the switch running."""
    spec: TopologySpec = request.module.TOPOLOGY
    yield from make_setup(spec, request.param, tmp_path_factory.mktemp(f"ctl-{spec.tag}-{request.param}"))


@pytest.fixture(autouse=True)
def _switch_can_run_this(request: pytest.FixtureRequest) -> None:
    """Skips what the switch cannot do; fails at once, saying so, when the module's switch
    died in an earlier test (instead of every later test timing out on a dead address)."""
    if "setup" not in request.fixturenames:
        return
    topo = request.getfixturevalue("setup").topo
    for mark in request.node.iter_markers("not_on"):
        if mark.args[0] == topo.switch:
            pytest.skip(f"{topo.switch}: {mark.args[1]}")
    if (died := topo.switch_died()) is not None:
        pytest.fail(died, pytrace=False)
