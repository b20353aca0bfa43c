"""cgroup.CpuGroup where cgroup v1 mounts cpu and cpuacct apart (as on the development machines):
a gateway's processes join the cpuacct twin too, so CpuAcct can read their usage; a fake
hierarchy of plain files stands in for /sys/fs/cgroup."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from supergw_gateway.cgroup import CpuAcct, CpuGroup


@pytest.fixture(autouse=True)
def cgroupfs_rmdir(monkeypatch: pytest.MonkeyPatch) -> None:
    """cgroupfs removes a group's directory with its control files in it; plain files need rmtree."""
    monkeypatch.setattr(Path, "rmdir", lambda self: shutil.rmtree(self))


def hierarchy(tmp_path: Path, acct_apart: bool) -> tuple[Path, Path]:
    cpu, acct = tmp_path / "cpu", tmp_path / "cpuacct"
    cpu.mkdir()
    (cpu / "cpu.cfs_quota_us").write_text("-1\n")
    (cpu / "cgroup.procs").write_text("")
    if acct_apart:
        acct.mkdir()
        (acct / "cpuacct.usage").write_text("0\n")
        (acct / "cgroup.procs").write_text("")
    return cpu, acct


def test_processes_join_the_cpuacct_twin_when_cpuacct_is_mounted_apart(tmp_path: Path) -> None:
    cpu, acct = hierarchy(tmp_path, acct_apart=True)
    group = CpuGroup("sgw-gw-g1", root=cpu, acct_root=acct)
    group.add(4242)
    assert (cpu / "sgw-gw-g1" / "cgroup.procs").read_text() == "4242"
    assert group.acct_path == acct / "sgw-gw-g1" and (acct / "sgw-gw-g1" / "cgroup.procs").read_text() == "4242"
    (acct / "sgw-gw-g1" / "cpuacct.usage").write_text("3000000000\n")  # what the kernel would count: 3 s
    assert CpuAcct("sgw-gw-g1", roots=(acct,)).usage_jiffies() == 300
    group.remove()  # processes back to each root, both groups gone
    assert not (cpu / "sgw-gw-g1").exists() and not (acct / "sgw-gw-g1").exists()
    assert (cpu / "cgroup.procs").read_text() == "4242" and (acct / "cgroup.procs").read_text() == "4242"


def test_no_twin_where_cpuacct_is_absent_or_mounted_with_cpu(tmp_path: Path) -> None:
    cpu, acct = hierarchy(tmp_path, acct_apart=False)
    group = CpuGroup("sgw-gw-g1", root=cpu, acct_root=acct)
    assert group.acct_path is None
    group.add(7)
    assert not acct.exists()
    (cpu / "cpuacct.usage").write_text("0\n")  # cpu,cpuacct in one hierarchy: the group itself has the usage
    assert CpuGroup("sgw-gw-g1", root=cpu, acct_root=cpu).acct_path is None
    group.remove()
    assert not (cpu / "sgw-gw-g1").exists()
