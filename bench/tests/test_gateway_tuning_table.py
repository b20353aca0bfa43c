"""The gateway benchmark's per-knob table: medians, ranges and per-round gains from samples."""

from __future__ import annotations

import pytest

from bench.gateway.tuning import CONFIGS, TUNED, Config, Sample, gain, table
from supergw_gateway.tuning.groups import ENDPOINT_GROUPS, GATEWAY_GROUPS

DEFAULT, TCP, ALL = Config("default", ""), Config("tcp", "", endpoint=("tcp",)), Config("all", "")


def test_medians_ranges_and_paired_gains() -> None:
    samples = [Sample("default", 0, "ipsec", 100.0), Sample("all", 0, "ipsec", 120.0),
               Sample("default", 1, "ipsec", 200.0), Sample("all", 1, "ipsec", 200.0),
               Sample("default", 2, "ipsec", 150.0), Sample("all", 2, "ipsec", 180.0),
               Sample("all", 2, "plain", 999.0)]
    rows = {r.config: r for r in table(samples, [DEFAULT, ALL])}
    assert rows["default"].median == 150.0 and rows["default"].gain == 1.0
    assert (rows["all"].runs, rows["all"].median, rows["all"].low, rows["all"].high) == (3, 180.0, 120.0, 200.0)
    assert rows["all"].gain == pytest.approx(180 / 150)
    # Per round: 1.2, 1.0, 1.2: the spread of the gain within rounds, not across them.
    assert (rows["all"].gain_low, rows["all"].gain_high) == pytest.approx((1.0, 1.2))
    assert gain(list(rows.values())) == rows["all"]


def test_a_configuration_without_any_result_is_shown_empty_not_dropped() -> None:
    samples = [Sample("default", 0, "ipsec", 100.0), Sample("tcp", 0, "ipsec", None)]
    rows = {r.config: r for r in table(samples, [DEFAULT, TCP, ALL])}
    assert rows["tcp"].runs == 0 and rows["tcp"].median is None and rows["tcp"].gain is None
    assert "all" not in rows  # never measured in that path: no row


def test_no_default_means_no_gain() -> None:
    (row,) = table([Sample("all", 0, "ipsec", 100.0)], [ALL])
    assert row.median == 100.0 and row.gain is None and row.gain_low is None


def test_configs_cover_each_knob_alone_then_all() -> None:
    names = [c.name for c in CONFIGS]
    assert names[0] == "default" and names[-1] == TUNED
    alone = {g for c in CONFIGS[1:-2] for g in (*c.gateway, *c.endpoint)}
    assert alone == set(GATEWAY_GROUPS) | set(ENDPOINT_GROUPS)
    assert all(len(set(c.gateway) | set(c.endpoint)) == 1 for c in CONFIGS[1:-2]), "one knob group per row"
    everything = CONFIGS[-1]
    assert set(everything.gateway) == set(GATEWAY_GROUPS) and set(everything.endpoint) == set(ENDPOINT_GROUPS)
    assert not CONFIGS[0].gateway_tuning()["enabled"] and everything.gateway_tuning()["host_wide"]
