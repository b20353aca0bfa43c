from __future__ import annotations

import pytest
from pydantic import ValidationError

from supergw_proto.reports import tunnel_up

from supergw_gateway.report import CpuSample, GatewayReport, build_report, cpu_shares, parse_pid_stat, parse_proc_stat
from supergw_gateway.vici_client import ChildSaStatus, IkeSaStatus

STAT = "cpu  100 5 50 1000 10 3 20 2 0 0\ncpu0 50 2 25 500 5 1 10 1 0 0\nintr 1\n"


def test_parse_proc_stat() -> None:
    busy, soft = parse_proc_stat(STAT)
    assert (busy, soft) == (100 + 5 + 50 + 3 + 20 + 2, 20)
    with pytest.raises(ValueError):
        parse_proc_stat("intr 1\n")


def test_parse_pid_stat_with_spaces_in_comm() -> None:
    line = "42 (charon systemd) S 1 42 42 0 -1 4194560 100 0 0 0 70 30 0 0 20 0 17 0 1 0 0"
    assert parse_pid_stat(line) == 100


def test_cpu_shares() -> None:
    a = CpuSample(10.0, 1000, 100, 50)
    b = CpuSample(10.5, 1060, 110, 75)
    cpu, soft, charon = cpu_shares(a, b)
    assert cpu == pytest.approx(120.0) and soft == pytest.approx(20.0) and charon == pytest.approx(50.0)
    assert cpu_shares(b, b) == (0.0, 0.0, 0.0)


def _sa(bytes_in: int) -> IkeSaStatus:
    child = ChildSaStatus("sgw-g-net", "INSTALLED", 3, bytes_in, 20, 3, 4, "c1", "c2", 100)
    return IkeSaStatus("sgw-g", "ESTABLISHED", 5, "192.0.2.1", "192.0.2.2", [child])


def test_build_report_uses_the_controller_schema() -> None:
    rep = build_report("g", "xfrm_uml", CpuSample(0, 0, 0, 0), CpuSample(1, 100, 10, 5),
                       [_sa(10), IkeSaStatus("other", "ESTABLISHED", 1, "", "", [])], "sgw-g", timestamp=1.0)
    assert isinstance(rep, GatewayReport)
    assert rep.tunnel_bytes_in == 10 and rep.tunnel_packets_out == 4
    assert rep.cpu_percent == 100.0 and rep.softirq_percent == 10.0 and rep.charon_cpu_percent == 5.0
    assert rep.cpu_cores == 1.0 and rep.cpu_scope == "processes"  # the sample's, never the machine's
    assert [(s.name, s.kind) for s in rep.sas] == [("sgw-g", "ike"), ("sgw-g-net", "child")]
    assert tunnel_up(rep) is True and rep.sa_error is None
    again = GatewayReport.model_validate_json(rep.model_dump_json())
    assert again == rep


def test_unknown_backend_rejected() -> None:
    with pytest.raises(ValueError):
        build_report("g", "dpdk", CpuSample(0, 0, 0, 0), CpuSample(1, 1, 1, 1), [], "sgw-g")
    with pytest.raises(ValidationError):
        GatewayReport.model_validate({"gateway": "g"})
