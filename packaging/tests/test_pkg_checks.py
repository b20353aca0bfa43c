"""The build's checks (sgwpkg.checks) and the gateway's declared strongSwan dependencies."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path, PurePosixPath

import pytest

from sgwpkg import checks
from sgwpkg.spec import Package, load_spec
from supergw_gateway.charon import CharonOptions, CharonSettings, render_strongswan_conf
from supergw_gateway.ra.gateway import RA_PLUGINS

SPEC = load_spec()


def test_each_role_owns_its_own_dependencies_only() -> None:
    own = checks.own_dependencies(SPEC)
    assert {"vici", "pyroute2", "supergw-gateway"} <= own["gateway"]
    assert {"fastapi", "finsy", "aetcd", "supergw-controller"} <= own["controller"]
    shared = {"pydantic", "pyyaml", "supergw-proto"}
    assert not shared & (own["gateway"] | own["controller"] | own["proto"])


def test_a_controller_dependency_in_the_gateway_venv_is_a_problem() -> None:
    own = checks.own_dependencies(SPEC)
    assert checks.foreign_distributions("gateway", {"supergw-gateway", "pydantic", "h11", "anyio"}, own) == []
    problems = checks.foreign_distributions("gateway", {"supergw-gateway", "fastapi", "finsy"}, own)
    assert problems == ["the gateway venv holds the controller side's fastapi, finsy"]
    assert checks.foreign_distributions("controller", {"vici"}, own) == ["the controller venv holds the gateway side's vici"]


def test_controller_side_debian_relations_are_refused_outside_the_controller() -> None:
    bad = Package("supergw-gateway", "net", "x", depends=("charon-systemd", "foo | etcd-server (>= 3.4)"),
                  recommends=("supergw-controller",))
    assert checks.foreign_relations(bad) == ["supergw-gateway depends on or recommends controller-side etcd-server",
                                             "supergw-gateway depends on or recommends controller-side supergw-controller"]
    for pkg in SPEC.packages.values():
        assert checks.foreign_relations(pkg) == [], pkg.name


def test_elf_interpreter_tells_static_from_dynamic(tmp_path: Path) -> None:
    true = Path(shutil.which("true") or "/bin/true")
    assert (checks.elf_interpreter(true) or "").startswith("/lib")
    # The same binary with its PT_INTERP header turned into PT_NULL reads as static (a real
    # static binary, the packaged switch, is checked by packaging/package_tests).
    data = bytearray(true.read_bytes())
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        if struct.unpack_from("<I", data, phoff + i * phentsize)[0] == 3:
            struct.pack_into("<I", data, phoff + i * phentsize, 0)
    static = tmp_path / "static"
    static.write_bytes(bytes(data))
    assert checks.elf_interpreter(static) is None
    notelf = tmp_path / "x"
    notelf.write_bytes(b"#!/bin/sh\n")
    with pytest.raises(ValueError, match="not a 64-bit little-endian ELF"):
        checks.elf_interpreter(notelf)
    pkg = Package("p", "net", "x", files=())
    assert checks.undeclared_loader(pkg, [true]) == [f"p: true needs {checks.elf_interpreter(true)} but the package "
                                                     "does not depend on libc6"]
    assert checks.undeclared_loader(Package("p", "net", "x", depends=("libc6",)), [true]) == []


PLUGINS = PurePosixPath("/usr/lib/ipsec/plugins")


@pytest.mark.skipif(not Path(PLUGINS).is_dir(), reason="strongSwan is not installed here (.ci/install-deps installs it)")
def test_the_gateway_depends_on_every_plugin_its_charon_loads() -> None:
    """The plugins of the strongswan.conf the gateway renders (libipsec and remote access: the
    longest list) come from packages the gateway's Depends name directly."""
    conf = render_strongswan_conf(CharonSettings(vici_uri="unix:///x", log_path=Path("/x"), libipsec=True,
                                                 options=CharonOptions(plugins=RA_PLUGINS)))
    load = next(line.split("=", 1)[1].split() for line in conf.splitlines() if line.strip().startswith("load ="))
    depends = set(checks.relation_names(SPEC.packages["supergw-gateway"].depends))
    for plugin in load:
        so = Path(PLUGINS, f"libstrongswan-{plugin}.so")
        assert so.is_file(), f"charon loads {plugin}, but {so} is not installed here"
        owner = subprocess.run(["dpkg-query", "-S", str(so)], capture_output=True, text=True).stdout.split(":")[0]
        assert owner in depends, f"plugin {plugin} comes from {owner}, which supergw-gateway does not depend on"
