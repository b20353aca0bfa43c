"""The systemd units and maintainer scripts as files: what each must say, and what it runs
exists in its package. (`make deploy-test` runs `systemd-analyze verify` on them installed.)"""

from __future__ import annotations

import re
import subprocess
from pathlib import PurePosixPath

import pytest

from sgwpkg.deb import maintainer_script
from sgwpkg.spec import PACKAGING, Package, load_spec

SPEC = load_spec()
UNITS = {unit: pkg for pkg in SPEC.packages.values() for unit in pkg.units}
LONG_RUNNING = [u for u in UNITS if "netns" not in u]


def directives(unit: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in (PACKAGING / "systemd" / unit).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def installed_paths(pkg: Package) -> set[str]:
    paths = {str(f.dest) for f in (*pkg.files, *pkg.conffiles)}
    if pkg.venv is not None:
        paths |= {f"/usr/bin/{c}" for c in pkg.commands}
    return paths


def test_every_unit_ships_with_a_package() -> None:
    shipped = {p.name for p in (PACKAGING / "systemd").iterdir()}
    assert shipped == set(UNITS), f"unit files no package ships: {sorted(shipped - set(UNITS))}"


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_a_unit_runs_only_what_its_package_installs(unit: str) -> None:
    d = directives(unit)
    pkg = UNITS[unit]
    for key in ("ExecStartPre", "ExecStart", "ExecStop", "ExecStopPost"):
        for cmd in d.get(key, []):
            exe = cmd.lstrip("+-!@:").split()[0]
            if exe.startswith(("/bin/", "/usr/bin/sh")):
                continue  # the shell (Essential)
            assert exe in installed_paths(pkg), f"{unit} {key} runs {exe}, which {pkg.name} does not install"


@pytest.mark.parametrize("unit", sorted(LONG_RUNNING))
def test_a_service_restarts_on_failure_and_is_hardened(unit: str) -> None:
    d = directives(unit)
    assert d.get("Restart") == ["on-failure"], unit
    assert "CapabilityBoundingSet" in d, f"{unit}: no CapabilityBoundingSet"
    for key, want in (("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("ProtectHome", "yes"),
                      ("PrivateTmp", "yes"), ("ProtectKernelModules", "yes"), ("ProtectControlGroups", "yes")):
        assert d.get(key) == [want], f"{unit}: {key}={want} expected, got {d.get(key)}"
    assert d.get("WantedBy") == ["multi-user.target"], unit


def test_capabilities_are_each_roles_own() -> None:
    caps = {u: set(directives(u)["CapabilityBoundingSet"][-1].split()) for u in UNITS}
    assert caps["supergw-switch.service"] == {"CAP_BPF", "CAP_PERFMON", "CAP_NET_ADMIN", "CAP_NET_RAW"}
    assert caps["supergw-controller.service"] == set()
    assert caps["supergw-gateway-agent@.service"] == {"CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_SYS_NICE"}
    assert caps["supergw-gateway@.service"] == {"CAP_NET_ADMIN", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_SYS_ADMIN"}
    assert directives("supergw-controller.service")["User"] == ["supergw"]


def test_the_netns_unit_has_no_mount_namespace() -> None:
    """Its `ip netns attach` mount must reach every later unit: file-system sandboxing would keep it private."""
    d = directives("supergw-gateway-netns@.service")
    sandboxing = {"ProtectSystem", "PrivateTmp", "ProtectHome", "PrivateDevices", "ReadWritePaths", "PrivateMounts",
                  "ProtectKernelTunables", "ProtectControlGroups", "TemporaryFileSystem", "BindPaths",
                  "ProtectKernelModules", "ProtectKernelLogs", "ProtectProc", "ProcSubset", "ReadOnlyPaths",
                  "InaccessiblePaths", "PrivateUsers", "NetworkNamespacePath"}
    assert not sandboxing & set(d), sorted(sandboxing & set(d))
    gw = directives("supergw-gateway@.service")
    assert "supergw-gateway-netns@%i.service" in gw["BindsTo"] and "supergw-gateway-netns@%i.service" in gw["After"]


def test_ordering_gateway_after_charon_agent_beside_it() -> None:
    gw = directives("supergw-gateway@.service")
    assert gw["Type"] == ["forking"] and gw["PIDFile"] == ["/run/sgw-gw/%i/charon.pid"]
    assert "strongswan.service strongswan-starter.service" in gw["Conflicts"]
    agent = directives("supergw-gateway-agent@.service")
    # stops and restarts with the gateway, but never waits for its tunnel (a fenced gateway's
    # agent lifts the fence its tunnel waits behind)
    assert agent["PartOf"] == ["supergw-gateway@%i.service"]
    assert agent["BindsTo"] == agent["After"] == ["supergw-gateway-netns@%i.service"]
    assert agent["NetworkNamespacePath"] == ["/run/netns/sgw-gw-%i"]


def test_the_switch_env_file_defines_what_the_unit_expands() -> None:
    used = set(re.findall(r"\$(\w+)", directives("supergw-switch.service")["ExecStart"][0]))
    env = (PACKAGING / "etc/switch.env").read_text()
    defined = set(re.findall(r"^(\w+)=", env, re.M))
    assert used == defined == {"SUPERGW_SWITCH_PORTS", "SUPERGW_SWITCH_TLS", "SUPERGW_SWITCH_OPTS"}


@pytest.mark.parametrize("env", ["etc/switch.env", "example-site/switch.env"])
def test_the_packaged_switch_serves_mutual_tls(env: str) -> None:
    """Secure by default: P4Runtime over TLS with client certificates, files in /etc/supergw/tls."""
    tls = re.search(r'^SUPERGW_SWITCH_TLS="([^"]*)"', (PACKAGING / env).read_text(), re.M)
    assert tls is not None
    flags = tls[1].split()
    assert {"--grpc-server-ssl", "--grpc-server-with-client-auth"} <= set(flags)
    for flag in ("--grpc-server-cert", "--grpc-server-key", "--grpc-server-cacert"):
        assert flags[flags.index(flag) + 1].startswith("/etc/supergw/tls/"), flag


@pytest.mark.parametrize(("name", "script"), [(p.name, s) for p in SPEC.packages.values() for s in p.scripts])
def test_maintainer_scripts_are_valid_sh_with_their_snippets(name: str, script: str) -> None:
    pkg = SPEC.packages[name]
    text = maintainer_script(pkg, script)
    assert "#SUPERGW_VENV#" not in text and "@ROLE@" not in text
    if pkg.venv is not None and script in ("postinst", "prerm"):
        assert f"/usr/lib/supergw/{pkg.venv.role}" in text, f"{name} {script} lacks its venv snippet"
    assert text.startswith("#!/bin/sh\nset -e\n")
    check = subprocess.run(["sh", "-n"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_dirs_holding_secrets_are_closed() -> None:
    dirs = {str(p): mode for pkg in SPEC.packages.values() for p, mode in pkg.dirs}
    assert dirs["/etc/supergw/gateway"] == 0o700
    assert dirs["/etc/supergw/controller"] == 0o750  # group supergw (postinst), files 0600
    assert PurePosixPath("/etc/supergw/switch.env") in {c.dest for c in SPEC.packages["supergw-switch"].conffiles}


def test_unit_files_name_config_paths_the_guide_uses() -> None:
    guide = (PACKAGING.parent / "docs/deploy-linux.md").read_text()
    for path in ("/etc/supergw/controller/controller.yaml", "/etc/supergw/gateway/", "/etc/supergw/switch.env"):
        assert path in guide, f"docs/deploy-linux.md does not mention {path}"
        assert any(path in (PACKAGING / "systemd" / u).read_text() for u in UNITS), path

