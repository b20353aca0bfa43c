"""Integration tests of the controller: real eBPF switch, real P4Runtime, namespaces.

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

from sgwctl_harness import Setup, TopologySpec, make_setup


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)




@pytest.fixture(scope="module")
def setup(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """The module's `TOPOLOGY`: switch namespace, hosts, gateways, the switch running."""
    spec: TopologySpec = request.module.TOPOLOGY
    yield from make_setup(spec, tmp_path_factory.mktemp(f"ctl-{spec.tag}"))
