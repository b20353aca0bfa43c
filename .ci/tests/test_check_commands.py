"""The command checker: what its scan finds, and that it fails where a fresh machine would."""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ci_scripts import REPO, load_script

cc = load_script("check-commands")
needs_dpkg = pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="not a Debian system (no dpkg-query)")


def py(src: str) -> set[str]:
    return {u.command for u in cc.python_uses(src, "x.py")}


def shell(src: str) -> set[str]:
    return {u.command for u in cc.shell_uses(src, "x.sh")}


def test_python_argv_lists_and_launchers() -> None:
    assert py('subprocess.run(["modprobe", "esp4"])') == {"modprobe"}
    assert py('ex.run(["ip", "netns", "exec", ns, "tcpdump", "-i", dev])') == {"ip", "tcpdump"}
    assert py('argv = ["taskset", "-c", str(cpu), "iperf3", "-c", host]') == {"taskset", "iperf3"}
    assert py('p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", code])') == {"ip"}


def test_python_names_wrappers_and_system_paths() -> None:
    assert py('for tool in ("iptables-legacy", "iptables"):\n    ex.run([tool, "-S"])') == {"iptables-legacy", "iptables"}
    assert py('sh("ethtool", "-K", dev)\nnsexec(ns, "arping", "-c", "1")') == {"ethtool", "arping"}
    assert py('CHARON_BIN = "/usr/sbin/charon-systemd"') == {"charon-systemd"}
    assert py('SAMPLE = "cat /proc/stat; cat /proc/$(cat /run/x.pid)/stat"\nex.run(["sh", "-c", SAMPLE])') == {"sh", "cat"}
    assert py('shutil.which("ping")') == {"ping"}


def test_python_ignores_what_is_not_a_command() -> None:
    assert py('run("ipsec", profile)\nasyncio.run(main())\n" ".join(["a", "b"])') == set()


def test_shell_commands_through_functions_substitutions_and_case() -> None:
    script = """#!/bin/bash
nsx() { ip netns exec "$NS" "$@"; }
skip() { echo "$1"; exit 0; }
nsx sysctl -qw a=1 >/dev/null 2>&1 || true
pids="$(ip netns pids "$NS" 2>/dev/null | tr '\\n' ' ')"
case "$t" in
  ebpf) [[ -x "$BIN" ]] || skip "no" ;;
  *) command -v simple_switch_grpc >/dev/null || skip "x" ;;
esac
for ((i = 0; ; i++)); do sleep 1; done
cat <<EOF
not a command here
EOF
"""
    assert shell(script) == {"ip", "sysctl", "tr", "simple_switch_grpc", "sleep", "cat"}


def test_go_and_makefile() -> None:
    go = 'exec.Command("ip", "link")\nrun(t, "nsenter", "--net=x")\nfor _, tool := range []string{"ip", "go"} {\n if _, err := exec.LookPath(tool)'
    assert {u.command for u in cc.go_uses(go, "x.go")} == {"ip", "nsenter", "go"}
    mk = "fmt:\n\t@gofmt -w x\n\t@clang-format -i $(wildcard *.c) 2>/dev/null || true\n\t@mkdir -p $(dir $(JUNIT))\n\t$(GO) test\n"
    assert {u.command for u in cc.makefile_uses(mk, "Makefile")} == {"gofmt", "clang-format", "mkdir"}


def test_install_deps_list_is_read_as_bash_reads_it() -> None:
    pkgs = cc.apt_packages(REPO / ".ci/install-deps")
    assert {"kmod", "iproute2", "user-mode-linux", "procps"} <= set(pkgs)
    assert not [p for p in pkgs if p.startswith("#")]


def test_every_command_the_repo_runs_is_declared() -> None:
    bad = [r.failure for r in cc.run_checks(REPO, scan_only=True) if r.failure]
    assert bad == []


def _fake_repo(tmp: Path, code: str, declared: str, apt: str) -> Path:
    (tmp / ".ci").mkdir()
    (tmp / ".ci/commands").write_text(declared)
    (tmp / ".ci/install-deps").write_text(f"#!/usr/bin/env bash\nAPT_PACKAGES=(\n  {apt}\n)\n")
    (tmp / "backends/supergw_gateway").mkdir(parents=True)
    (tmp / "backends/supergw_gateway/uml_init.py").write_text('GUEST_COMMANDS: dict[str, str] = {"ip": "iproute2"}\n')
    (tmp / "tool.py").write_text(code)
    subprocess.run(["git", "init", "-q"], cwd=tmp, check=True)
    subprocess.run(["git", "add", "."], cwd=tmp, check=True)
    return tmp


def test_a_new_command_without_a_declaration_fails(tmp_path: Path) -> None:
    repo = _fake_repo(tmp_path, 'subprocess.run(["ip", "l"])\nsubprocess.run(["sgw-new-tool", "-x"])\n',
                      "ip iproute2\n", "iproute2")
    bad = [r.failure for r in cc.run_checks(repo, scan_only=True) if r.failure]
    assert len(bad) == 1 and "sgw-new-tool is run at tool.py:2" in bad[0] and ".ci/commands" in bad[0]


def test_a_declared_command_nothing_runs_is_noted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _fake_repo(tmp_path, 'subprocess.run(["ip", "l"])\n', "ip iproute2\nethtool ethtool\n", "iproute2")
    assert [r.failure for r in cc.run_checks(repo, scan_only=True) if r.failure] == []
    assert "ethtool is declared but the scan finds no use" in capsys.readouterr().err


@needs_dpkg
def test_an_installed_package_missing_from_the_list_fails(tmp_path: Path) -> None:
    # The pre-provisioned machine: ip is installed, but nothing in the list would install it.
    repo = _fake_repo(tmp_path, 'subprocess.run(["ip", "l"])\n', "ip iproute2\n", "tcpdump")
    bad = [r.failure for r in cc.run_checks(repo, scan_only=False) if r.failure]
    assert len(bad) == 1 and "iproute2 is not in APT_PACKAGES" in bad[0]


@needs_dpkg
def test_a_command_from_another_package_than_declared_fails(tmp_path: Path) -> None:
    repo = _fake_repo(tmp_path, 'subprocess.run(["ip", "l"])\n', "ip coreutils\n", "coreutils iproute2")
    bad = [r.failure for r in cc.run_checks(repo, scan_only=False) if r.failure]
    assert len(bad) == 2  # the guest's ip says iproute2, and dpkg says so too
    assert any("belongs to iproute2, not to coreutils" in b for b in bad)


@needs_dpkg
def test_a_command_that_is_not_installed_fails(tmp_path: Path) -> None:
    repo = _fake_repo(tmp_path, 'subprocess.run(["ip", "l"])\nsubprocess.run(["sgw-absent-tool"])\n',
                      "ip iproute2\nsgw-absent-tool iproute2\n", "iproute2")
    bad = [r.failure for r in cc.run_checks(repo, scan_only=False) if r.failure]
    assert len(bad) == 1 and "sgw-absent-tool: not found" in bad[0] and "install-deps" in bad[0]


def test_junit_names_each_failure(tmp_path: Path) -> None:
    out = tmp_path / "commands.xml"
    cc.write_junit([cc.Result("package:ip"), cc.Result("package:modprobe", "modprobe: kmod is not in APT_PACKAGES")], out)
    text = out.read_text()
    assert 'tests="2" failures="1"' in text and 'message="modprobe: kmod is not in APT_PACKAGES"' in text


def test_the_uml_guest_init_runs_only_commands_it_checks_for() -> None:
    pytest.importorskip("supergw_gateway")
    from supergw_gateway.config import parse_config
    from supergw_gateway.uml_init import GUEST_COMMANDS, UML_MODULES, GuestAddrs, render_init

    if not UML_MODULES.exists():
        pytest.skip("user-mode-linux is not installed (the init names its kernel release)")
    cfg = parse_config({
        "name": "gw1", "backend": "uml",
        "interfaces": [{"role": "wan", "device": "wan0", "address": "192.0.2.1/24"}],
        "routes": [{"destination": "203.0.113.0/24", "via": "192.0.2.254"}],
        "local": {"address": "192.0.2.1", "subnets": ["10.1.0.0/24"]},
        "remote": {"address": "192.0.2.2", "subnets": ["10.2.0.0/24"]},
        "auth": {"method": "psk", "psk": "0123456789abcdef"},
    })
    init = render_init(cfg, GuestAddrs.from_subnet(ipaddress.IPv4Network("169.254.77.0/30")), "/venv/bin/python")
    used = {Path(u.command).name for u in cc.shell_uses(init, "guest-init.sh")}
    assert used - {"python"} <= set(GUEST_COMMANDS)
    assert {"modprobe", "mount", "ip", "charon-systemd"} <= used
